"""SPLADE's vocabulary projection split off the graph (clirkit.encoders.vocab_projection) and fused with
the max over each text's tokens (clirkit._native.VocabProjection): the kernel against numpy, the split
encoder against the plain onnxruntime path on padded batches (the shipped graph's full logits, max over
each text's real tokens), and graphs without such a projection, which run whole."""

from __future__ import annotations

import json
from itertools import islice
from pathlib import Path

import numpy as np
import pytest
from clirkit import InvalidInputError
from clirkit._native import VocabProjection
from conftest import shared_path

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")

from clirkit.encoders import SparseEncoder  # noqa: E402
from clirkit.encoders.tokenization import length_batches, padded_batch  # noqa: E402
from clirkit.encoders.vocab_projection import STATES_OUTPUT, split_projection  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tiny_transformer import HIDDEN, build, texts  # noqa: E402


def test_the_kernel_gives_each_texts_maximum_logits_and_ignores_padding():
    rng = np.random.default_rng(5)
    vocab, hidden, seq = 200, 24, 13  # a vocabulary off the 64-entry tile, lengths off the 6-row step
    weight = rng.standard_normal((vocab, hidden)).astype(np.float32)
    bias = rng.standard_normal(vocab).astype(np.float32)
    states = rng.standard_normal((4, seq, hidden)).astype(np.float32)
    lengths = np.array([13, 1, 7, 5], dtype=np.int64)
    for n, length in enumerate(lengths):
        states[n, length:] = 1e4  # padding that would win every maximum were it counted
    want = (
        np.stack(
            [
                (states[n, :length].astype(np.float64) @ weight.T.astype(np.float64)).max(axis=0)
                for n, length in enumerate(lengths)
            ]
        )
        + bias
    )
    # (Every kernel's bits equal the plain maximum's: the core's tests run each one this CPU has.)
    p = VocabProjection(weight, bias)
    assert p.shape == (vocab, hidden) and p.kernel in (
        "avx512",
        "avx512+int8-prefilter",
        "avx2-fma",
        "portable",
    )
    got = p.max_logits(states, lengths)
    assert got.shape == (4, vocab) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # positive=True: max(0, maximum) bit for bit, also where maxima sit just above or below zero
    # (biases moved so), which the int8 prefilter must not drop.
    near_zero = VocabProjection(weight, (bias - got[0] + rng.uniform(-0.05, 0.05, vocab)).astype(np.float32))
    plain = near_zero.max_logits(states, lengths)
    assert np.array_equal(near_zero.max_logits(states, lengths, positive=True), np.maximum(plain, 0))
    assert (plain[0] > 0).any() and (plain[0] < 0).any()


def test_the_kernel_refuses_bad_shapes():
    p = VocabProjection(np.ones((5, 3), np.float32), np.zeros(5, np.float32))
    states = np.zeros((2, 4, 3), np.float32)
    with pytest.raises(InvalidInputError, match="text 1 has 0 tokens"):
        p.max_logits(states, np.array([2, 0]))
    with pytest.raises(InvalidInputError, match="text 0 has 5 tokens"):
        p.max_logits(states, np.array([5, 1]))
    with pytest.raises(InvalidInputError, match="do not fit a projection of 3 hidden units"):
        p.max_logits(np.zeros((2, 4, 2), np.float32), np.array([1, 1]))
    with pytest.raises(InvalidInputError, match="bias holds 4 floats"):
        VocabProjection(np.ones((5, 3), np.float32), np.zeros(4, np.float32))


def _tiny_splade(dst: Path, head: str) -> Path:
    """The tiny encoder with an MLM head over its own vocabulary: ``"gemm"`` as SPLADE's exports end
    (states flattened, ``Gemm`` with the tied embedding table, ``transB=1``, reshaped back), ``"matmul"``
    (``MatMul`` by ``(hidden, vocab)`` weights then ``Add``), or ``"relu"`` (the logits through a ``Relu``
    after the projection: not a projection at the output, so the graph must run whole)."""
    build(dst, config={"model_type": "splade", "pad_token_id": 0})
    model = onnx.load(str(dst / "model.onnx"))
    graph = model.graph
    vocab = json.loads((dst / "config.json").read_text())["vocab_size"]
    rng = np.random.default_rng(11)
    weights = {"mlm_bias": (rng.standard_normal(vocab) * 0.5).astype(np.float32)}
    states = "last_hidden_state"
    if head == "gemm":
        weights["flat"] = np.array([-1, HIDDEN], dtype=np.int64)
        weights["back"] = np.array([0, 0, vocab], dtype=np.int64)
        nodes = [
            helper.make_node("Reshape", [states, "flat"], ["mlm_flat"]),
            helper.make_node("Gemm", ["mlm_flat", "emb", "mlm_bias"], ["mlm_rows"], transB=1),
            helper.make_node("Shape", ["input_ids"], ["ids_shape"]),
            helper.make_node("Concat", ["ids_shape", "vocab_dim"], ["logits_shape"], axis=0),
            helper.make_node("Reshape", ["mlm_rows", "logits_shape"], ["logits"]),
        ]
        weights["vocab_dim"] = np.array([vocab], dtype=np.int64)
        del weights["back"]
    else:
        weights["mlm_w"] = rng.standard_normal((HIDDEN, vocab)).astype(np.float32)
        nodes = [
            helper.make_node("MatMul", [states, "mlm_w"], ["mlm_mm"]),
            helper.make_node("Add", ["mlm_mm", "mlm_bias"], ["logits" if head == "matmul" else "mlm_pre"]),
        ]
        if head == "relu":
            nodes.append(helper.make_node("Relu", ["mlm_pre"], ["logits"]))
    graph.node.extend(nodes)
    graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in weights.items())
    del graph.output[:]
    graph.output.append(
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "sequence", vocab])
    )
    onnx.save_model(model, str(dst / "model.onnx"))
    return dst


def _plain_vectors(encoder: SparseEncoder, model: Path, items: list[str]) -> list[dict[str, float]]:
    """SPLADE as a plain onnxruntime loop would do it, on the encoder's own padded batches: the shipped
    graph's full logits, max over each text's real tokens, then log(1 + relu)."""
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    encodings = [encoder.tokenizer.encode(t) for t in items]
    out: list[dict[str, float]] = [{} for _ in items]
    for batch in length_batches([len(e.ids) for e in encodings], 4, 512):
        ids, mask = padded_batch(encodings, batch, encoder.pad_id)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (logits,) = session.run(["logits"], {k: v for k, v in feeds.items() if k in names})
        for row, position, length in zip(logits, batch, mask.sum(axis=1)):
            weights = np.log1p(np.maximum(row[:length].max(axis=0), 0))
            out[position] = {encoder.vocabulary[i]: float(weights[i]) for i in np.flatnonzero(weights > 0)}
    return out


def _assert_close(got: list[dict[str, float]], want: list[dict[str, float]], tolerance: float) -> None:
    for mine, theirs in zip(got, want):
        # A weight within float rounding of 0 may fall on either side of it.
        assert {t for t, w in mine.items() if w > tolerance} <= set(theirs)
        assert {t for t, w in theirs.items() if w > tolerance} <= set(mine)
        for term in set(mine) | set(theirs):
            assert abs(mine.get(term, 0.0) - theirs.get(term, 0.0)) <= tolerance, term


@pytest.mark.parametrize("head", ["gemm", "matmul"])
def test_a_split_tiny_model_equals_the_whole_graph(tmp_path, head):
    model_dir = _tiny_splade(tmp_path / head, head)
    items = texts(23, seed=4)
    split = SparseEncoder(model_dir, batch_size=4, threads=1, device="cpu")
    whole = SparseEncoder(model_dir, batch_size=4, threads=1, device="cpu", split_projection=False)
    assert split.runtime.projection is not None and split.runtime.output_name == STATES_OUTPUT
    assert whole.runtime.projection is None
    assert split.fingerprint() != whole.fingerprint()
    got = split.encode(items)
    _assert_close(got, _plain_vectors(split, model_dir / "model.onnx", items), 1e-5)
    _assert_close(got, whole.encode(items), 1e-5)


def test_a_model_without_a_projection_at_its_output_runs_whole(tmp_path):
    model_dir = _tiny_splade(tmp_path / "relu", "relu")
    encoder = SparseEncoder(model_dir, batch_size=4, threads=1, device="cpu")
    assert encoder.runtime.projection is None and encoder.runtime.output_name == "logits"
    items = texts(9, seed=2)
    _assert_close(encoder.encode(items), _plain_vectors(encoder, model_dir / "model.onnx", items), 1e-5)
    # And the cut itself leaves such a graph unchanged.
    model = onnx.load(str(model_dir / "model.onnx"))
    before = model.SerializeToString()
    assert split_projection(model, "logits") is None and model.SerializeToString() == before
    assert split_projection(model, "no_such_output") is None


@pytest.mark.shared
def test_splade_tiny_split_equals_plain_onnxruntime_on_padded_batches():
    model_dir = shared_path("models", "splade-tiny-en")
    with open(shared_path("data", "beir-scifact", "corpus.jsonl"), encoding="utf-8") as f:
        docs = [json.loads(line) for line in islice(f, 10)]
    # Lengths from 2 tokens to the 128 cap, so every batch of four is padded.
    items = [f"{d['title']} {d['text'][: 60 * i]}" for i, d in enumerate(docs)] + ["", "aspirin"]
    encoder = SparseEncoder(model_dir, max_length=128, batch_size=4, threads=1, device="cpu")
    assert encoder.runtime.projection is not None
    assert encoder.runtime.projection.shape == (30522, 128)
    got = encoder.encode(items)
    want = _plain_vectors(encoder, model_dir / "model.onnx", items)
    _assert_close(got, want, 2e-5)
    # The same terms at the top, in the same order.
    for mine, theirs in zip(got, want):
        assert (
            sorted(mine, key=lambda t: (-mine[t], t))[:20]
            == sorted(theirs, key=lambda t: (-theirs[t], t))[:20]
        )
