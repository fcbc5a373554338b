"""The prepared graph cut at its attention nodes (clirkit.encoders.split_attention): the segments and an
attention kernel of ours give the whole graph's outputs; graphs whose attention such a kernel cannot
compute exactly are refused with the reason."""

from __future__ import annotations

import dataclasses
import json
import math
import threading
from pathlib import Path

import numpy as np
import pytest
from clirkit import InvalidInputError
from clirkit._native import attention_kernel, quantized_attention
from clirkit.encoders import OnnxEncoder
from clirkit.encoders.graph_cache import open_prepared, prepared_graph
from clirkit.encoders.split_attention import (
    AttentionSplitSession,
    OnnxAttention,
    int8_attention_session,
    split_refusal,
)
from conftest import shared_path

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

HIDDEN, HEADS = 8, 2


def numpy_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, num_heads: int, scale: float) -> np.ndarray:
    """The float reference: per head softmax(q kᵀ · scale) v, in float64."""
    batch, tokens, hidden = q.shape

    def heads(x: np.ndarray) -> np.ndarray:
        return x.astype(np.float64).reshape(batch, tokens, num_heads, -1).transpose(0, 2, 1, 3)

    scores = heads(q) @ heads(k).transpose(0, 1, 3, 2) * scale
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return (weights @ heads(v)).transpose(0, 2, 1, 3).reshape(batch, tokens, hidden).astype(q.dtype)


class Recorded:
    """The float reference as a kernel that records each call's heads and scale and, when given
    ``compare`` (another kernel), the largest difference to its output relative to its largest
    magnitude (thread-safe)."""

    def __init__(self, compare=None) -> None:
        self.calls: list[tuple[int, float]] = []
        self.differences: list[float] = []
        self._compare = compare
        self._lock = threading.Lock()

    def __call__(
        self, q: np.ndarray, k: np.ndarray, v: np.ndarray, num_heads: int, scale: float
    ) -> np.ndarray:
        out = numpy_attention(q, k, v, num_heads, scale)
        other = self._compare(q, k, v, num_heads, scale) if self._compare is not None else None
        with self._lock:
            self.calls.append((num_heads, scale))
            if other is not None:
                self.differences.append(float(np.abs(out - other).max() / np.abs(other).max()))
        return out


def build(dst: Path, first: dict | None = None, extra_inputs: tuple = ()) -> Path:
    """``dst/graph.onnx`` with its weights in ``graph.onnx.data``: two layers of attention (the first's
    scale 0.3, the second's the default) over input ``x`` (batch, tokens, HIDDEN), each followed by an
    output projection, a residual ``Add`` and a ``LayerNormalization`` whose weights both layers share;
    outputs ``mid`` (after layer 0) and ``out``, the final states times input ``gate`` reshaped to the
    shape taken from ``x`` before the first attention (values carried across two cuts). ``first``
    overrides the first attention node's inputs, outputs and attributes; ``extra_inputs`` are further
    graph inputs."""
    rng = np.random.default_rng(5)
    inits = [
        numpy_helper.from_array((rng.standard_normal(HIDDEN) * 0.1 + 1).astype(np.float32), "gamma"),
        numpy_helper.from_array((rng.standard_normal(HIDDEN) * 0.1).astype(np.float32), "beta"),
    ]

    def weight(name: str, *shape: int) -> str:
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * 0.5).astype(np.float32), name))
        return name

    nodes = [helper.make_node("Shape", ["x"], ["x_shape"])]
    h = "x"
    for layer in range(2):
        p = f"l{layer}_"
        for part in "qkv":
            nodes += [
                helper.make_node("MatMul", [h, weight(p + part + "_w", HIDDEN, HIDDEN)], [p + part + "_mm"]),
                helper.make_node("Add", [p + part + "_mm", weight(p + part + "_b", HIDDEN)], [p + part]),
            ]
        settings = {
            "inputs": [p + "q", p + "k", p + "v"],
            "outputs": [p + "ctx"],
            "num_heads": HEADS,
            **({"scale": 0.3} if layer == 0 else {}),
        }
        if layer == 0 and first:
            settings.update(first)
        inputs, outputs = settings.pop("inputs"), settings.pop("outputs")
        nodes.append(
            helper.make_node("MultiHeadAttention", inputs, outputs, domain="com.microsoft", **settings)
        )
        nodes += [
            helper.make_node("MatMul", [p + "ctx", weight(p + "o_w", HIDDEN, HIDDEN)], [p + "o_mm"]),
            helper.make_node("Add", [p + "o_mm", weight(p + "o_b", HIDDEN)], [p + "o"]),
            helper.make_node("Add", [p + "o", h], [p + "res"]),
            helper.make_node("LayerNormalization", [p + "res", "gamma", "beta"], [p + "h"], axis=-1),
        ]
        h = p + "h"
    nodes += [
        helper.make_node("Identity", ["l0_h"], ["mid"]),
        helper.make_node("Mul", [h, "gate"], ["gated"]),
        helper.make_node("Reshape", ["gated", "x_shape"], ["out"]),
    ]
    states = ["batch", "tokens", HIDDEN]
    graph = helper.make_graph(
        nodes,
        "two-layers",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, states),
            helper.make_tensor_value_info("gate", TensorProto.FLOAT, [1, 1, HIDDEN]),
            *extra_inputs,
        ],
        [
            helper.make_tensor_value_info("out", TensorProto.FLOAT, states),
            helper.make_tensor_value_info("mid", TensorProto.FLOAT, states),
        ],
        initializer=inits,
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    path = dst / "graph.onnx"
    onnx.save_model(
        model, str(path), save_as_external_data=True, location="graph.onnx.data", size_threshold=0
    )
    return path


def feeds(batch: int, tokens: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal((batch, tokens, HIDDEN)).astype(np.float32),
        "gate": rng.standard_normal((1, 1, HIDDEN)).astype(np.float32),
    }


def test_split_graph_gives_the_whole_graphs_outputs(tmp_path):
    path = build(tmp_path)
    assert split_refusal(onnx.load(str(path), load_external_data=False)) is None
    whole = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    kernel = Recorded()
    split = AttentionSplitSession(ort, path, kernel)
    assert [len(s) for s in split.plan.segments] == [7, 10, 7]  # cut at each attention node
    for batch, tokens in ((2, 5), (1, 1), (3, 17)):
        want = whole.run(None, feeds(batch, tokens))
        got = split.run(None, feeds(batch, tokens))
        assert [g.shape for g in got] == [w.shape for w in want]
        for w, g in zip(want, got):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
        (mid,) = split.run(["mid"], feeds(batch, tokens))
        np.testing.assert_array_equal(mid, got[1])
    assert kernel.calls == [(HEADS, pytest.approx(0.3)), (HEADS, 1 / math.sqrt(HIDDEN // HEADS))] * 6
    for mine, theirs in (
        (split.get_inputs(), whole.get_inputs()),
        (split.get_outputs(), whole.get_outputs()),
    ):
        assert [(a.name, a.type, a.shape) for a in mine] == [(a.name, a.type, a.shape) for a in theirs]
    assert split.get_providers() == ["CPUExecutionProvider"]


def test_split_with_onnxruntimes_kernel_is_the_whole_graph_bit_for_bit(tmp_path):
    path = build(tmp_path)
    # The segments run at the basic level, meant for a graph that is already optimized.
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    whole = open_prepared(ort, path, options)  # attention off the flash path, as OnnxAttention's
    split = AttentionSplitSession(ort, path, OnnxAttention(ort))
    for want, got in zip(whole.run(None, feeds(2, 9)), split.run(None, feeds(2, 9))):
        np.testing.assert_array_equal(got, want)


def test_segments_hold_only_the_initializers_they_read(tmp_path):
    path = build(tmp_path)
    model = onnx.load(str(path), load_external_data=False)
    from clirkit.encoders.split_attention import plan_split

    plan = plan_split(model)
    assert not isinstance(plan, str)
    reads = [{x for i in segment for x in model.graph.node[i].input} for segment in plan.segments]
    held = [{t.name for t in model.graph.initializer} & r for r in reads]
    assert held[0] == {f"l0_{p}_{w}" for p in "qkv" for w in "wb"}
    assert held[1] == {"l0_o_w", "l0_o_b", "gamma", "beta"} | {f"l1_{p}_{w}" for p in "qkv" for w in "wb"}
    assert held[2] == {"l1_o_w", "l1_o_b", "gamma", "beta"}


def test_a_kernel_giving_the_wrong_shape_is_an_error(tmp_path):
    split = AttentionSplitSession(ort, build(tmp_path), lambda q, k, v, heads, scale: q[:, :1])
    with pytest.raises(InvalidInputError, match=r"node 7 \(MultiHeadAttention 'l0_ctx'\).*must return"):
        split.run(None, feeds(1, 4))


def test_unknown_feeds_and_outputs_are_errors(tmp_path):
    split = AttentionSplitSession(ort, build(tmp_path), numpy_attention)
    with pytest.raises(InvalidInputError, match="no graph input 'y'"):
        split.run(None, {**feeds(1, 3), "y": np.zeros(1)})
    with pytest.raises(InvalidInputError, match="no graph output 'l0_q'"):
        split.run(["l0_q"], feeds(1, 3))
    with pytest.raises(InvalidInputError, match="input 'gate' was not fed"):
        split.run(None, {"x": feeds(1, 3)["x"]})


def test_a_runtime_without_the_external_data_folder_option_is_named(tmp_path):
    class Old:
        __version__ = "1.20.1"

        def __getattr__(self, name):
            return getattr(ort, name)

    with pytest.raises(ImportError, match="needs onnxruntime >= 1.21, this is 1.20.1"):
        AttentionSplitSession(Old(), build(tmp_path), numpy_attention)


MASK = helper.make_tensor_value_info("mask", TensorProto.INT32, ["batch", "tokens"])


@pytest.mark.parametrize(
    ("first", "extra_inputs", "reason"),
    [
        ({"inputs": ["l0_q", "l0_k", "l0_v", "", "mask"]}, (MASK,), "takes key_padding_mask"),
        ({"unidirectional": 1}, (), "is unidirectional"),
        ({"inputs": ["l0_q", "l0_k", "l0_v", "l0_bias"]}, (), "takes bias"),
        ({"outputs": ["l0_ctx", "l0_present_k", "l0_present_v"]}, (), "gives present_key, present_value"),
        ({"mask_filter_value": -1e4, "softcap": 1.0}, (), "attribute 'softcap'"),
        ({"num_heads": 3}, (), "width 8 is not divisible by 3 heads"),
    ],
)
def test_graphs_the_split_cannot_compute_are_refused_with_the_reason(tmp_path, first, extra_inputs, reason):
    path = build(tmp_path, first, extra_inputs)
    refusal = split_refusal(onnx.load(str(path), load_external_data=False))
    assert refusal is not None and reason in refusal and "node 7 (MultiHeadAttention 'l0_ctx')" in refusal
    with pytest.raises(InvalidInputError, match=f"{path.name}: attention cannot be split out: .*{reason}"):
        AttentionSplitSession(ort, path, numpy_attention)


def test_attention_of_another_shape_or_none_at_all_is_refused(tmp_path):
    model = onnx.load(str(build(tmp_path)), load_external_data=False)
    keys = model.graph.value_info
    keys.append(helper.make_tensor_value_info("l0_k", TensorProto.FLOAT, ["batch", "tokens", HEADS, 4]))
    assert "'l0_k' has 4 dimensions" in split_refusal(model)
    del keys[:]
    keys.append(helper.make_tensor_value_info("l0_k", TensorProto.FLOAT, ["batch", 3, HIDDEN]))
    keys.append(helper.make_tensor_value_info("l0_v", TensorProto.FLOAT, ["batch", 4, HIDDEN]))
    assert "differ in dimension 1 ([3, 4])" in split_refusal(model)
    nodes = [n for n in model.graph.node if n.op_type != "MultiHeadAttention"]
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    assert split_refusal(model) == "the graph has no MultiHeadAttention node"


E5 = ("models", "multilingual-e5-small-int8")
TEXTS = [
    "Vitamin D deficiency is associated with an increased risk of fractures in older adults.",
    "La recherche d'information multilingue compare des requêtes et des documents en plusieurs langues.",
    "检索增强生成",
    " ".join(["The cohort study followed 1,200 patients with type 2 diabetes for ten years."] * 25),
]


@pytest.fixture(scope="module")
def e5():
    """The default e5 encoder, its vectors of TEXTS, and its prepared unpadded graph."""
    encoder = OnnxEncoder(shared_path(*E5), device="cpu")
    assert encoder.runtime.one_text_per_call  # so the graph it runs is the unpadded one
    graph = prepared_graph(ort, encoder.model_dir / "model.onnx", masked=False, nonempty=True)
    return encoder, encoder.encode_passages(TEXTS), graph


def split_vectors(e5, attention) -> np.ndarray:
    """TEXTS encoded by the e5 encoder with its session replaced by the split graph."""
    encoder, _, graph = e5
    runtime = encoder.runtime
    try:
        encoder.runtime = dataclasses.replace(runtime, session=AttentionSplitSession(ort, graph, attention))
        return encoder.encode_passages(TEXTS)
    finally:
        encoder.runtime = runtime


@pytest.mark.shared
def test_e5_split_with_the_float_reference_kernel(e5):
    """Each of the 12 attention nodes is computed by the kernel, once per text, and the float reference
    gives onnxruntime's attention within float rounding on e5's own activations. The vectors then differ
    from the default at the int8 model's requantization floor: any change of the attention output, one
    rounding step included, moves later activations' dynamic int8 scales, and over 12 layers that costs
    cosine 1e-3 (40 SciFact documents: onnxruntime's kernel with one-ulp noise 0.9984 at worst, this
    reference 0.9982, the shipped graph against the prepared one 0.9980), so 0.9999 cannot be asked
    of any kernel but onnxruntime's own (bit for bit below)."""
    kernel = Recorded(compare=OnnxAttention(ort))
    got, want = split_vectors(e5, kernel), e5[1]
    assert kernel.calls == [(12, pytest.approx(1 / math.sqrt(32)))] * 12 * len(TEXTS)
    assert max(kernel.differences) <= 1e-5, max(kernel.differences)
    cosines = np.sum(got * want, axis=1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
    assert cosines.min() >= 0.998, cosines


@pytest.mark.shared
def test_e5_split_with_onnxruntimes_kernel_gives_the_default_vectors_bit_for_bit(e5):
    np.testing.assert_array_equal(split_vectors(e5, OnnxAttention(ort)), e5[1])


# -- the int8 kernel (clirkit._native.quantized_attention) and fast mode --------------------------------


def test_int8_attention_is_close_to_float_attention():
    rng = np.random.default_rng(3)
    for batch, tokens, hidden, heads in ((2, 37, 64, 2), (1, 1, 128, 4), (1, 200, 96, 3), (1, 70, 24, 2)):
        q, k = (rng.uniform(-2, 2, (batch, tokens, hidden)).astype(np.float32) for _ in range(2))
        v = rng.uniform(-1, 1, (batch, tokens, hidden)).astype(np.float32)
        got = quantized_attention(q, k, v, heads, 0.25)
        assert got.shape == q.shape and got.dtype == np.float32
        error = np.abs(got - numpy_attention(q, k, v, heads, 0.25)).max()
        assert error < 0.02, (batch, tokens, hidden, heads, error)
        for t in range(batch):  # texts do not see each other
            alone = quantized_attention(q[t : t + 1], k[t : t + 1], v[t : t + 1], heads, 0.25)
            np.testing.assert_array_equal(alone[0], got[t])


def test_int8_attention_refuses_what_it_cannot_compute():
    x = np.ones((1, 3, 16), dtype=np.float32)
    with pytest.raises(InvalidInputError, match="must have one shape"):
        quantized_attention(x, x, np.ones((1, 4, 16), dtype=np.float32), 2, 1.0)
    with pytest.raises(InvalidInputError, match="16 hidden units do not split into 3 heads"):
        quantized_attention(x, x, x, 3, 1.0)
    with pytest.raises(InvalidInputError, match="head size that is a multiple of 4, got 2"):
        quantized_attention(x, x, x, 8, 1.0)
    bad = x.copy()
    bad[0, 2, 5] = np.nan
    with pytest.raises(InvalidInputError, match=r"keys hold a non-finite value \(NaN\) at token 2, unit 5"):
        quantized_attention(x, bad, x, 2, 1.0)
    assert attention_kernel(32) in ("avx512-vnni", "portable")
    assert attention_kernel(12) == "portable"  # the vector kernel takes heads of 16, 32, 48 or 64


def test_graphs_without_an_int8_split_keep_onnxruntimes_attention(tmp_path):
    (tmp_path / "masked").mkdir()
    (tmp_path / "small").mkdir()
    masked = build(tmp_path / "masked", {"inputs": ["l0_q", "l0_k", "l0_v", "", "mask"]}, (MASK,))
    assert int8_attention_session(ort, masked) is None
    assert int8_attention_session(ort, build(tmp_path / "small")) is None  # heads of 4: no vector kernel


@pytest.mark.shared
def test_e5_fast_mode_computes_attention_in_int8(e5):
    """Fast mode (``batch_invariant=False``) of the dynamically quantized e5 on a CPU with the kernel: one
    text per call, the prepared graph cut at its 12 attention nodes, each computed by the int8 kernel
    close to onnxruntime's float attention on e5's own activations, and vectors close to the default's."""
    if attention_kernel(32) == "portable":
        pytest.skip("this CPU lacks AVX-512 VNNI/VBMI: fast mode keeps onnxruntime's attention")
    fast = OnnxEncoder(shared_path(*E5), device="cpu", batch_invariant=False)
    assert fast.one_text_per_call and fast.graph_optimization.endswith("-int8-attention")
    assert fast.fingerprint() != e5[0].fingerprint()
    got, want = fast.encode_passages(TEXTS), e5[1]
    cosines = np.sum(got * want, axis=1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
    assert cosines.min() >= 0.995, cosines
    kernel = Recorded(compare=quantized_attention)
    split_vectors(e5, kernel)
    assert len(kernel.calls) == 12 * len(TEXTS)
    assert max(kernel.differences) <= 0.03, max(kernel.differences)


@pytest.mark.shared
def test_cli_encode_fast_is_the_encoders_fast_mode(tmp_path):
    from clirkit import cli

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"_id": f"d{i}", "text": text}) + "\n" for i, text in enumerate(TEXTS)),
        encoding="utf-8",
    )
    model = shared_path(*E5)
    out = tmp_path / "fast"
    common = ["encode", "--model", str(model), "--corpus", str(corpus), "--threads", "1", "--quiet"]
    assert cli.main([*common, "--output", str(out), "--fast"]) == 0
    want = OnnxEncoder(model, device="cpu", threads=1, batch_invariant=False).encode_passages(TEXTS)
    np.testing.assert_array_equal(np.load(f"{out}.npy"), want)
