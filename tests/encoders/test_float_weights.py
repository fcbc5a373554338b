"""Dequantizing a dynamically int8-quantized graph (the GPU float16 path's first step): every int8
matrix product becomes a float one by exactly the weights the int8 graph holds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tiny_transformer

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
quantization = pytest.importorskip("onnxruntime.quantization")

from clirkit import InvalidInputError  # noqa: E402
from clirkit.encoders.quantization import float_weights  # noqa: E402
from onnx import numpy_helper  # noqa: E402


def quantized_tiny(tmp_path: Path) -> Path:
    tiny = tiny_transformer.build(tmp_path / "float")
    target = tmp_path / "int8.onnx"
    quantization.quantize_dynamic(
        str(tiny / "model.onnx"), str(target), weight_type=quantization.QuantType.QInt8
    )
    return target


def hidden(model_bytes: bytes, ids: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    return session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0]


def test_dequantized_graph_multiplies_by_the_int8_weights_exactly(tmp_path):
    quantized = onnx.load(str(quantized_tiny(tmp_path)))
    int8 = {t.name: numpy_helper.to_array(t) for t in quantized.graph.initializer}
    integer_products = [n for n in quantized.graph.node if n.op_type == "MatMulInteger"]
    assert integer_products
    model = onnx.load(str(tmp_path / "int8.onnx"))
    assert float_weights(model) is model
    onnx.checker.check_model(model)
    ops = {n.op_type for n in model.graph.node}
    assert not ops & {"MatMulInteger", "DynamicQuantizeLinear"}
    floats = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for node in integer_products:
        weight, zero_point = int8[node.input[1]], int8[node.input[3]]
        scale = next(int8[name] for name in int8 if name == node.input[1].replace("_quantized", "_scale"))
        expected = (weight.astype(np.float32) - zero_point.astype(np.float32)) * scale
        np.testing.assert_array_equal(floats[f"{node.input[1]}_float"], expected)
    # The float graph is the model the int8 one approximates: close to the original float weights' output.
    ids = np.array([[2, 7, 9, 30, 61, 3]], dtype=np.int64)
    original = hidden((tmp_path / "float" / "model.onnx").read_bytes(), ids)
    dequantized = hidden(model.SerializeToString(), ids)
    cosine = (
        (original * dequantized).sum(-1)
        / np.linalg.norm(original, axis=-1)
        / np.linalg.norm(dequantized, axis=-1)
    )
    assert cosine.min() > 0.999


def test_a_float_graph_is_left_alone_and_an_unknown_pattern_refused(tmp_path):
    tiny = tiny_transformer.build(tmp_path / "float")
    assert float_weights(onnx.load(str(tiny / "model.onnx"))) is None
    model = onnx.load(str(quantized_tiny(tmp_path)))
    # A MatMulInteger fed by something other than DynamicQuantizeLinear is not guessed at.
    first = next(n for n in model.graph.node if n.op_type == "MatMulInteger")
    first.input[0] = "input_ids"
    with pytest.raises(InvalidInputError, match="not dynamically quantized"):
        float_weights(model)


def test_a_float_model_directory_encodes_like_the_int8_one_and_is_never_overwritten(tmp_path):
    from clirkit.encoders import OnnxEncoder
    from clirkit.encoders.quantization import write_float_model

    source = tmp_path / "int8"
    tiny_transformer.build(source)
    quantized_tiny(tmp_path)  # tmp_path/int8.onnx
    (source / "model.onnx").write_bytes((tmp_path / "int8.onnx").read_bytes())
    target = write_float_model(source, tmp_path / "dequantized")
    graph = onnx.load(str(target / "model.onnx"))
    assert "MatMulInteger" not in {n.op_type for n in graph.graph.node}
    texts = tiny_transformer.texts(5)
    int8 = OnnxEncoder(source, device="cpu", optimize_graph=False).encode_passages(texts)
    dequantized = OnnxEncoder(target, device="cpu", optimize_graph=False).encode_passages(texts)
    assert ((int8 * dequantized).sum(axis=1) > 0.99).all()
    with pytest.raises(FileExistsError):
        write_float_model(source, target)
