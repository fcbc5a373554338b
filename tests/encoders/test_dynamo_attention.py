"""Attention as ``torch.export``/dynamo exports ``scaled_dot_product_attention`` (all-MiniLM-L6-v2-int8's
graph): fused into MultiHeadAttention in the prepared CPU graph, with the shipped graph's vectors; a mask
that is not a key padding mask (a causal one) is left alone. The exact GELU spelled with ``Erf`` (in the
order dynamo writes it, which onnxruntime's fusion misses) becomes one ``Gelu`` node."""

from __future__ import annotations

import numpy as np
import pytest
import tiny_transformer
from clirkit.encoders import OnnxEncoder, graph_cache
from clirkit.encoders.attention import fuse_attention, fuse_erf_gelu
from conftest import shared_path

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")


run = tiny_transformer.run


def padded(lengths: list[int]) -> tuple[np.ndarray, np.ndarray]:
    return tiny_transformer.padded(np.random.default_rng(len(lengths)), lengths)


def padding_masks(model, names):
    return graph_cache.padding_masks(ort, model, names)


@pytest.mark.parametrize("masked", [True, False])
def test_dynamo_attention_is_fused_with_the_same_outputs(tmp_path, masked):
    tiny_transformer.build(tmp_path / "dynamo", layers=3, dynamo=True)
    tiny_transformer.build(tmp_path / "classic", layers=3)
    original = onnx.load(str(tmp_path / "dynamo" / "model.onnx"))
    classic = onnx.load(str(tmp_path / "classic" / "model.onnx"))
    fused = onnx.load(str(tmp_path / "dynamo" / "model.onnx"))
    assert fuse_attention(fused, masked=masked, padding_masks=padding_masks) == 3
    ops = [n.op_type for n in fused.graph.node]
    assert ops.count("MultiHeadAttention") == 3
    # The unfused attention and what computed only for it are gone.
    assert not {"Softmax", "Where", "Transpose"} & set(ops)
    attention = [n for n in fused.graph.node if n.op_type == "MultiHeadAttention"]
    heads = {a.name: onnx.helper.get_attribute_value(a) for a in attention[0].attribute}
    assert heads["num_heads"] == tiny_transformer.HEADS
    assert heads["scale"] == pytest.approx((tiny_transformer.HIDDEN // tiny_transformer.HEADS) ** -0.5)
    batches = [padded([11, 4, 7])] if masked else [padded([n]) for n in (1, 9, 23)]
    for ids, mask in batches:
        want, got = run(original, ids, mask), run(fused, ids, mask)
        np.testing.assert_allclose(run(classic, ids, mask), want, rtol=1e-4, atol=1e-5)  # the same model
        for row, length in enumerate(mask.sum(1)):
            np.testing.assert_allclose(got[row, :length], want[row, :length], rtol=1e-4, atol=1e-5)


def test_a_causal_mask_is_not_taken_for_a_padding_mask(tmp_path, monkeypatch):
    """The structural match alone accepts a mask built from Range and comparisons; evaluating it on a
    probe is what refuses a causal one, and the prepared graph then runs as shipped."""
    model_dir = tiny_transformer.build(tmp_path / "causal", layers=2, dynamo=True, causal=True)
    model = onnx.load(str(model_dir / "model.onnx"))
    assert fuse_attention(onnx.load(str(model_dir / "model.onnx")), masked=True) == 2
    assert fuse_attention(model, masked=True, padding_masks=padding_masks) == 0
    monkeypatch.setenv("CLIRKIT_CACHE_DIR", str(tmp_path / "cache"))
    assert graph_cache.prepared_graph(ort, model_dir / "model.onnx", masked=True) == model_dir / "model.onnx"
    padding_only = tiny_transformer.build(tmp_path / "padding", layers=2, dynamo=True)
    prepared = graph_cache.prepared_graph(ort, padding_only / "model.onnx", masked=True)
    assert "MultiHeadAttention" in {n.op_type for n in onnx.load(str(prepared)).graph.node}


def gelu_graph(order: str, half: float = 0.5):
    """``MatMul`` + bias, then ``x * 0.5 * (1 + erf(x / sqrt(2)))`` spelled in ``order``."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(5)
    values = {"w": rng.standard_normal((8, 12)), "b": rng.standard_normal(12), "one": 1.0, "half": half}
    values.update({"r": np.sqrt(0.5)} if order == "reciprocal" else {"s": np.sqrt(2.0)})
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"]),
        helper.make_node("Add", ["mm", "b"], ["h"]),
        helper.make_node("Mul", ["h", "r"], ["scaled"])
        if order == "reciprocal"
        else helper.make_node("Div", ["h", "s"], ["scaled"]),
        helper.make_node("Erf", ["scaled"], ["erf"]),
        helper.make_node("Add", ["one", "erf"], ["plus"]),
    ]
    if order == "half-last":  # onnxruntime's own pattern: (x * (1 + erf)) * 0.5
        nodes += [
            helper.make_node("Mul", ["h", "plus"], ["m"]),
            helper.make_node("Mul", ["m", "half"], ["y"]),
        ]
    else:  # dynamo's: x * (0.5 * (1 + erf))
        nodes += [
            helper.make_node("Mul", ["half", "plus"], ["m"]),
            helper.make_node("Mul", ["h", "m"], ["y"]),
        ]
    graph = helper.make_graph(
        nodes,
        "gelu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 12])],
        initializer=[numpy_helper.from_array(np.asarray(v, dtype=np.float32), k) for k, v in values.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("order", ["dynamo", "half-last", "reciprocal"])
def test_erf_gelu_is_fused_in_any_order(order):
    model = gelu_graph(order)
    x = np.random.default_rng(6).standard_normal((5, 8)).astype(np.float32) * 2

    def run_y(graph) -> np.ndarray:
        session = ort.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, {"x": x})[0]

    want = run_y(model)
    assert fuse_erf_gelu(model) == 1
    assert [n.op_type for n in model.graph.node] == ["MatMul", "Add", "Gelu"]
    np.testing.assert_allclose(run_y(model), want, rtol=1e-6, atol=1e-6)
    assert fuse_erf_gelu(gelu_graph(order, half=0.25)) == 0  # not a GELU


MINILM_TEXTS = [
    "a",
    "Retrieval across languages.",
    "Dense retrieval encodes queries and documents into vectors whose inner product ranks them. " * 3,
    "The quick brown fox jumps over the lazy dog while the encoder keeps its attention masked. " * 12,
    "Ein kurzer deutscher Satz mit Umlauten: Größe, Übung, Äpfel.",
    "x " * 40,
]


@pytest.mark.shared
@pytest.mark.parametrize("max_length", [180, 512])
def test_minilm_prepared_graph_fuses_attention_with_the_shipped_vectors(tmp_path, monkeypatch, max_length):
    """all-MiniLM-L6-v2-int8 (a dynamo export with float products): its six attention blocks become
    MultiHeadAttention, and its vectors stay within float rounding of the shipped graph's, one text at
    a time and in padded batches."""
    model_dir = shared_path("models", "all-MiniLM-L6-v2-int8")
    monkeypatch.setenv("CLIRKIT_CACHE_DIR", str(tmp_path / "cache"))
    prepared = graph_cache.prepared_graph(ort, model_dir / "model.onnx", masked=True, nonempty=True)
    ops = [n.op_type for n in onnx.load(str(prepared)).graph.node]
    assert ops.count("MultiHeadAttention") == 6 and "Softmax" not in ops
    assert "Erf" not in ops and ops.count("Gelu") == 6 and "BiasGelu" not in ops
    shipped = OnnxEncoder(model_dir, device="cpu", optimize_graph=False, max_length=max_length, threads=1)
    alone = np.stack([shipped.encode([text])[0] for text in MINILM_TEXTS])
    for budget in (512, 8192):  # narrow batches and wide padded ones (all six texts in one)
        encoder = OnnxEncoder(model_dir, device="cpu", max_length=max_length, batch_tokens=budget, threads=1)
        assert encoder.graph_optimization == f"prepared-v{graph_cache.PREPARATION_VERSION}"
        got = encoder.encode(MINILM_TEXTS)
        cosine = np.sum(got * alone, axis=1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(alone, axis=1))
        assert cosine.min() > 1 - 1e-6, cosine
