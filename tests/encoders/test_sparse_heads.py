"""Sparse heads (clirkit.encoders.sparse_heads) on small ONNX graphs with random weights, against a numpy
forward pass: BGE-M3's per-token weights (in the graph, or states plus an .npz linear layer) and MILCO's
output vocabulary."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from clirkit import InvalidInputError

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
tokenizers = pytest.importorskip("tokenizers")

from clirkit.encoders import SparseEncoder, is_sparse_model  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tiny_transformer import SPECIALS, WORDS, save_graph, tokenizer_json  # noqa: E402

HIDDEN = 8
OUTPUT_TERMS = ["[CLS]", "[SEP]", "chat", "chien", "oiseau", "nuit", "<s>", "ronronner", "fort"]
TEXTS = ["alpha beta w3 gamma . alpha", "retrieval encoder", "", "unknownword delta w7 w7 w7"]


def _model(dst: Path, outputs: dict[str, np.ndarray], config: dict, seed: int = 3) -> dict[str, np.ndarray]:
    """embedding lookup -> tanh -> hidden; then, per entry of ``outputs``, hidden @ W (+ b) [-> relu]."""
    rng = np.random.default_rng(seed)
    vocab = len(SPECIALS) + len(WORDS)
    weights = {"embedding": rng.standard_normal((vocab, HIDDEN)).astype(np.float32)}
    nodes = [
        helper.make_node("Gather", ["embedding", "input_ids"], ["looked_up"]),
        helper.make_node("Tanh", ["looked_up"], ["hidden"]),
    ]
    graph_outputs = []
    for name, spec in outputs.items():
        if spec == "hidden":
            nodes.append(helper.make_node("Identity", ["hidden"], [name]))
            graph_outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, ["b", "s", HIDDEN]))
            continue
        width, relu = spec
        weights[f"{name}_w"] = rng.standard_normal((HIDDEN, width)).astype(np.float32)
        weights[f"{name}_b"] = rng.standard_normal(width).astype(np.float32) * 0.5
        nodes.append(helper.make_node("MatMul", ["hidden", f"{name}_w"], [f"{name}_mm"]))
        nodes.append(helper.make_node("Add", [f"{name}_mm", f"{name}_b"], [f"{name}_pre" if relu else name]))
        if relu:
            nodes.append(helper.make_node("Relu", [f"{name}_pre"], [name]))
        graph_outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, ["b", "s", width]))
    dst.mkdir(parents=True, exist_ok=True)
    initializers = [numpy_helper.from_array(v, k) for k, v in weights.items()]
    save_graph(dst, "sparse-head", nodes, graph_outputs, initializers)
    tokenizer_json(dst)
    base = {"vocab_size": vocab, "pad_token_id": 0, "max_position_embeddings": 32}
    (dst / "config.json").write_text(json.dumps({**base, **config}))
    return weights


def _close(got: dict[str, float], want: dict[str, float]) -> None:
    assert sorted(got) == sorted(want)
    for term, weight in want.items():
        assert abs(got[term] - weight) <= 1e-5, term


def _token_ids(text: str) -> np.ndarray:
    vocab = {token: i for i, token in enumerate(SPECIALS + WORDS)}
    return np.array([2, *(vocab.get(w, 1) for w in text.split()), 3])


def _token_weight_reference(text: str, embedding, weight, bias) -> dict[str, float]:
    """FlagEmbedding's BGE-M3 sparse weights: relu(linear(hidden)) per token, the max per token id, CLS,
    SEP (EOS), PAD and UNK left out."""
    ids = _token_ids(text)
    per_token = np.maximum(np.tanh(embedding[ids]) @ weight.reshape(HIDDEN, 1) + bias, 0)[:, 0]
    vocab = SPECIALS + WORDS
    out: dict[str, float] = {}
    for token, w in zip(ids, per_token):
        if vocab[token] in SPECIALS or w <= 0:
            continue
        out[vocab[token]] = max(out.get(vocab[token], 0.0), float(w))
    return out


def test_token_weight_head_in_the_graph(tmp_path):
    weights = _model(tmp_path, {"sparse_weights": (1, True)}, {"sparse_head": "token_weights"})
    assert is_sparse_model(tmp_path)
    encoder = SparseEncoder(tmp_path, threads=1)
    got = encoder.encode_passages(TEXTS)
    for text, vector in zip(TEXTS, got):
        _close(
            vector,
            _token_weight_reference(
                text, weights["embedding"], weights["sparse_weights_w"], weights["sparse_weights_b"]
            ),
        )
    assert got[0] and "[CLS]" not in got[0] and "[UNK]" not in got[3]
    # one at a time equals batched (padding never reaches a weight)
    assert [encoder.encode([t])[0] for t in TEXTS] == got


def test_token_weight_head_from_states_and_an_npz_linear_layer(tmp_path):
    weights = _model(
        tmp_path,
        {"last_hidden_state": "hidden"},
        {"sparse_head": "token_weights", "sparse_linear": "sparse_linear.npz"},
    )
    rng = np.random.default_rng(5)
    linear_w = rng.standard_normal((1, HIDDEN)).astype(np.float32)
    linear_b = np.array([0.1], dtype=np.float32)
    np.savez(tmp_path / "sparse_linear.npz", weight=linear_w, bias=linear_b)
    got = SparseEncoder(tmp_path, threads=1).encode_queries(TEXTS)
    for text, vector in zip(TEXTS, got):
        _close(vector, _token_weight_reference(text, weights["embedding"], linear_w, linear_b))


def test_output_vocabulary_head(tmp_path):
    weights = _model(
        tmp_path,
        {"logits": (len(OUTPUT_TERMS), False)},
        {"sparse_head": "output_vocabulary", "output_vocabulary": "vocab.txt"},
    )
    (tmp_path / "vocab.txt").write_text("\n".join(OUTPUT_TERMS) + "\n")
    encoder = SparseEncoder(tmp_path, threads=1)
    assert encoder.dim == len(OUTPUT_TERMS)
    got = encoder.encode_passages(TEXTS)
    for text, vector in zip(TEXTS, got):
        ids = _token_ids(text)
        logits = np.tanh(weights["embedding"][ids]) @ weights["logits_w"] + weights["logits_b"]
        pooled = np.log1p(np.maximum(logits.max(axis=0), 0))
        want = {
            t: float(w) for t, w in zip(OUTPUT_TERMS, pooled) if w > 0 and t not in ("[CLS]", "[SEP]", "<s>")
        }
        _close(vector, want)
    assert any(got) and not any(t in v for v in got for t in ("[CLS]", "[SEP]", "<s>"))
    # special_terms names the excluded entries explicitly
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "special_terms": []}))
    every = SparseEncoder(tmp_path, threads=1).encode_passages(TEXTS)
    assert all(set(v) <= set(w) for v, w in zip(got, every)) and any(
        set(w) - set(v) for v, w in zip(got, every)
    )


def test_bad_heads_are_named(tmp_path):
    _model(
        tmp_path,
        {"logits": (len(OUTPUT_TERMS), False)},
        {"sparse_head": "output_vocabulary", "output_vocabulary": "vocab.txt"},
    )
    (tmp_path / "vocab.txt").write_text("a\nb\n")
    with pytest.raises(
        InvalidInputError, match=r"output 'logits' has shape .*, not \(batch, \[sequence,\] 2\)"
    ):
        SparseEncoder(tmp_path, threads=1)
    (tmp_path / "vocab.txt").write_text("a\na\n")
    with pytest.raises(InvalidInputError, match=r"vocab.txt:2: term repeats line 1"):
        SparseEncoder(tmp_path, threads=1)
    (tmp_path / "config.json").write_text(json.dumps({"sparse_head": "colbert"}))
    with pytest.raises(InvalidInputError, match="sparse_head 'colbert' is not one of"):
        SparseEncoder(tmp_path, threads=1)
