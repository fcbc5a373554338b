"""clirkit's onnxruntime operators (clirkit.encoders.custom_ops): the same bits as onnxruntime's own
kernels, errors as errors, and the prepared graph's vectors equal to the shipped graph's."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import tiny_transformer
from clirkit.encoders import OnnxEncoder, custom_ops
from clirkit.encoders.custom_ops import DOMAIN, FLASH_SWITCH
from conftest import shared_path

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

HIDDEN = 48


def skip_layer_norm_graph(domain: str, bias: bool, sum_output: bool, skip_shape: list, gamma: int = HIDDEN):
    inputs = ["input", "skip", "gamma", "beta"] + (["bias"] if bias else [])
    outputs = ["output", "", "", "sum"] if sum_output else ["output"]
    rng = np.random.default_rng(5)
    weights = {
        name: rng.standard_normal(gamma if name == "gamma" else HIDDEN).astype(np.float32)
        for name in inputs[2:]
    }
    graph = helper.make_graph(
        [helper.make_node("SkipLayerNormalization", inputs, outputs, domain=domain, epsilon=1e-12)],
        "skip-layer-norm",
        [
            helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", "tokens", HIDDEN]),
            helper.make_tensor_value_info("skip", TensorProto.FLOAT, skip_shape),
        ],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outputs if name],
        initializer=[helper.make_tensor(k, TensorProto.FLOAT, [len(v)], v) for k, v in weights.items()],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(domain, 1)]
    )
    model.ir_version = 8
    return model.SerializeToString()


def clirkit_session(graph: bytes):
    options = ort.SessionOptions()
    custom_ops.register(options)
    return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("sum_output", [False, True])
@pytest.mark.parametrize("broadcast_skip", [False, True])
def test_skip_layer_norm_is_onnxruntimes_bit_for_bit(bias, sum_output, broadcast_skip):
    skip_shape = [1, "tokens", HIDDEN] if broadcast_skip else ["batch", "tokens", HIDDEN]
    theirs = ort.InferenceSession(
        skip_layer_norm_graph("com.microsoft", bias, sum_output, skip_shape),
        providers=["CPUExecutionProvider"],
    )
    ours = clirkit_session(skip_layer_norm_graph(DOMAIN, bias, sum_output, skip_shape))
    rng = np.random.default_rng(7)
    for batch, tokens in ((1, 1), (1, 37), (3, 17)):
        scale = rng.choice([1e-3, 1.0, 40.0], size=(batch, tokens, 1))
        feeds = {
            "input": (rng.standard_normal((batch, tokens, HIDDEN)) * scale).astype(np.float32),
            "skip": rng.standard_normal((1 if broadcast_skip else batch, tokens, HIDDEN)).astype(np.float32),
        }
        for want, got in zip(theirs.run(None, feeds), ours.run(None, feeds), strict=True):
            np.testing.assert_array_equal(got, want)


def test_skip_layer_norm_operands_that_do_not_fit_are_errors():
    session = clirkit_session(
        skip_layer_norm_graph(DOMAIN, False, False, ["batch", "tokens", HIDDEN], gamma=5)
    )
    values = np.ones((1, 3, HIDDEN), dtype=np.float32)
    with pytest.raises(Exception, match="not rows of 5"):
        session.run(None, {"input": values, "skip": values})


def test_nodes_asking_for_the_mean_are_left_to_onnxruntime():
    asks = helper.make_node(
        "SkipLayerNormalization", ["x", "s", "g"], ["y", "mean"], domain="com.microsoft", epsilon=1e-5
    )
    plain = helper.make_node(
        "SkipLayerNormalization", ["y", "s", "g"], ["z"], domain="com.microsoft", epsilon=1e-5
    )
    model = helper.make_model(helper.make_graph([asks, plain], "g", [], []))
    assert custom_ops.adopt_operators(model) == 1
    assert [n.domain for n in model.graph.node] == ["com.microsoft", DOMAIN]
    assert [o.domain for o in model.opset_import].count(DOMAIN) == 1
    assert custom_ops.adopt_operators(model) == 0


def attention_graph(domain: str, heads: int, head: int, value: int, declared: bool = True) -> bytes:
    node = helper.make_node(
        "MultiHeadAttention", ["q", "k", "v"], ["o"], domain=domain, num_heads=heads, scale=head**-0.5
    )
    widths = {"q": heads * head, "k": heads * head, "v": heads * value}
    if not declared:
        widths = {name: f"width_{name}" for name in widths}
    graph = helper.make_graph(
        [node],
        "attention",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["b", "s", w]) for n, w in widths.items()],
        [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(domain, 1)]
    )
    model.ir_version = 8
    return model.SerializeToString()


@pytest.mark.parametrize(
    "batch,tokens,heads,head,value",
    [(1, 2, 12, 32, 32), (1, 37, 12, 32, 32), (2, 100, 4, 64, 64), (1, 700, 2, 32, 32), (1, 9, 2, 16, 48)],
)
def test_attention_is_onnxruntimes_off_its_flash_path_bit_for_bit(batch, tokens, heads, head, value):
    """Scores, softmax and weighted sums as onnxruntime's unfused kernel computes them (MLAS on an
    AVX-512 CPU; elsewhere the same arithmetic in clirkit's portable kernel), 700 tokens crossing
    MLAS's block of 512 keys."""
    with custom_ops.unblocked_attention():
        theirs = ort.InferenceSession(
            attention_graph("com.microsoft", heads, head, value), providers=["CPUExecutionProvider"]
        )
    ours = clirkit_session(attention_graph(DOMAIN, heads, head, value))
    rng = np.random.default_rng(tokens)
    for spread in (0.3, 1.0, 3.0):
        feeds = {
            "q": (rng.standard_normal((batch, tokens, heads * head)) * spread).astype(np.float32),
            "k": (rng.standard_normal((batch, tokens, heads * head)) * spread).astype(np.float32),
            "v": rng.standard_normal((batch, tokens, heads * value)).astype(np.float32),
        }
        want, got = theirs.run(None, feeds)[0], ours.run(None, feeds)[0]
        if not np.array_equal(got, want) and "avx512f" not in _cpu_flags():
            pytest.skip("onnxruntime's kernels on a CPU without AVX-512 round otherwise")
        np.testing.assert_array_equal(got, want)


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def test_attention_operands_that_do_not_fit_are_errors():
    session = clirkit_session(attention_graph(DOMAIN, 5, 4, 4, declared=False))
    values = np.ones((1, 3, 20), dtype=np.float32)
    with pytest.raises(Exception, match="not 3 rows of 5 heads"):
        session.run(None, {"q": np.ones((1, 3, 18), dtype=np.float32), "k": values, "v": values})
    with pytest.raises(Exception, match="do not fit together"):
        session.run(None, {"q": values, "k": np.ones((1, 4, 20), dtype=np.float32), "v": values})


def test_only_attention_clirkit_computes_is_adopted():
    def attention(inputs, **attributes):
        return helper.make_node(
            "MultiHeadAttention", inputs, ["o" + str(len(inputs))], domain="com.microsoft", **attributes
        )

    nodes = [
        attention(["q", "k", "v"], num_heads=2, scale=0.5, unidirectional=0),
        attention(["q", "k", "v", "", "mask"], num_heads=2),
        attention(["q", "k"], num_heads=2),
    ]
    causal = attention(["q", "k", "v"], num_heads=2, unidirectional=1)
    causal.output[0] = "causal"
    model = helper.make_model(helper.make_graph([*nodes, causal], "g", [], []))
    assert custom_ops.adopt_operators(model) == 1
    assert [n.domain for n in model.graph.node] == [DOMAIN] + ["com.microsoft"] * 3


@pytest.mark.parametrize("before", [None, "0"])
def test_unblocked_attention_restores_the_environment(monkeypatch, before):
    if before is None:
        monkeypatch.delenv(FLASH_SWITCH, raising=False)
    else:
        monkeypatch.setenv(FLASH_SWITCH, before)
    with custom_ops.unblocked_attention():
        assert os.environ[FLASH_SWITCH] == "1"
    assert os.environ.get(FLASH_SWITCH) == before


def test_prepared_graph_gives_the_shipped_graphs_vectors_bit_for_bit(tmp_path):
    """Attention fused, layer normalizations clirkit's: the same bits as the shipped graph at
    onnxruntime's default level, one text at a time."""
    model_dir = tiny_transformer.build(tmp_path / "model", layers=3)
    texts = tiny_transformer.texts(12)
    prepared = OnnxEncoder(model_dir, device="cpu", batch_size=1, threads=1)
    assert prepared.graph_optimization.startswith("prepared")
    shipped = OnnxEncoder(model_dir, device="cpu", batch_size=1, threads=1, optimize_graph=False)
    np.testing.assert_array_equal(prepared.encode_passages(texts), shipped.encode_passages(texts))


def test_quantized_encoders_attention_is_clirkits_and_its_vectors_the_shipped_graphs(tmp_path):
    """A dynamically quantized encoder runs one text per call on the unpadded prepared graph, where
    every attention node is clirkit's: its vectors are still the shipped graph's, bit for bit."""
    quantization = pytest.importorskip("onnxruntime.quantization")
    model_dir = tiny_transformer.build(tmp_path / "model", layers=3)
    shipped = model_dir / "model.onnx"
    quantization.quantize_dynamic(str(shipped), str(shipped), weight_type=quantization.QuantType.QInt8)
    texts = tiny_transformer.texts(12)
    prepared = OnnxEncoder(model_dir, device="cpu", threads=1)
    vectors = prepared.encode_passages(texts)
    graphs = list((model_dir / ".clirkit-graphs").glob("model.unpadded*.onnx"))
    assert len(graphs) == 1
    nodes = onnx.load(str(graphs[0]), load_external_data=False).graph.node
    attention = [n.domain for n in nodes if n.op_type == "MultiHeadAttention"]
    assert attention == [DOMAIN] * 3
    reference = OnnxEncoder(model_dir, device="cpu", threads=1, optimize_graph=False)
    np.testing.assert_array_equal(vectors, reference.encode_passages(texts))


@pytest.mark.shared
def test_e5_default_vectors_are_fastembeds_one_text_at_a_time():
    """multilingual-e5-small-int8's default (batch-invariant) vectors are, bit for bit, those of its
    shipped graph at onnxruntime's default level one text at a time: what fastembed gives with
    ``batch_size=1``. Requantization would turn any other rounding into cosine ~0.998."""
    model_dir = shared_path("models", "multilingual-e5-small-int8")
    corpus = shared_path("data", "beir-scifact", "corpus.jsonl")
    with corpus.open(encoding="utf-8") as f:
        docs = [json.loads(line) for _, line in zip(range(6), f)]
    texts = [f"{d['title']} {d['text']}" for d in docs]
    default = OnnxEncoder(model_dir, device="cpu", threads=2)
    shipped = OnnxEncoder(model_dir, device="cpu", threads=2, optimize_graph=False)
    np.testing.assert_array_equal(default.encode_passages(texts), shipped.encode_passages(texts))
