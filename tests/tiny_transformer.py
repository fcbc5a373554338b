"""A small BERT-style encoder built in the tests: random weights, attention spelled out op by op as
``torch.onnx`` exports it, a word-level tokenizer, optionally BGE-M3's three heads (dense CLS, sparse token
weights, ColBERT token vectors) as extra graph outputs. Needs no shared data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
tokenizers = pytest.importorskip("tokenizers")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

WORDS = [f"w{i}" for i in range(60)] + ["alpha", "beta", "gamma", "delta", "retrieval", "encoder", "."]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
HIDDEN, HEADS, COLBERT_DIM = 16, 4, 8


def tokenizer_json(dst: Path) -> int:
    """A word-level tokenizer ([CLS] text [SEP]) saved as ``dst/tokenizer.json``; its vocabulary size."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = {t: i for i, t in enumerate(SPECIALS + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])]
    )
    tok.add_special_tokens(SPECIALS)
    tok.save(str(dst / "tokenizer.json"))
    return len(vocab)


def save_graph(dst: Path, name: str, nodes: list, outputs: list, initializers: list) -> None:
    """``dst/model.onnx``: ``nodes`` over the inputs ``input_ids`` and ``attention_mask`` (batch, sequence),
    opset 17."""
    graph = helper.make_graph(
        nodes,
        name,
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"]),
        ],
        outputs,
        initializer=initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save_model(model, str(dst / "model.onnx"))


def build(
    dst: Path,
    *,
    layers: int = 2,
    heads: bool = False,
    seed: int = 3,
    config: dict | None = None,
    dynamo: bool = False,
    causal: bool = False,
) -> Path:
    """Write ``model.onnx``, ``tokenizer.json`` and ``config.json`` of the tiny encoder into ``dst``.

    Outputs: ``last_hidden_state`` (batch, sequence, HIDDEN); with ``heads`` also ``sparse_weights``
    (batch, sequence, 1) = relu(hidden @ w + b) and ``colbert_vecs`` (batch, sequence, COLBERT_DIM) =
    hidden @ W, as BGE-M3's ONNX exports give them. With ``dynamo`` attention is spelled as
    ``torch.export`` exports ``scaled_dot_product_attention`` (:func:`dynamo_attention`); ``causal``
    (dynamo only) adds a causal mask to the padding mask."""
    dst.mkdir(parents=True, exist_ok=True)
    vocab = tokenizer_json(dst)
    rng = np.random.default_rng(seed)
    inits: list = []

    def weight(name: str, *shape: int, scale: float = 0.5) -> str:
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(value, name))
        return name

    size = HIDDEN // HEADS
    const("split", np.array([0, 0, HEADS, size], dtype=np.int64))
    const("merge", np.array([0, 0, HIDDEN], dtype=np.int64))
    const("scale", np.array(1 / np.sqrt(size), dtype=np.float32))
    const("one", np.array(1.0, dtype=np.float32))
    const("neg", np.array(-10000.0, dtype=np.float32))
    const("axes12", np.array([1, 2], dtype=np.int64))
    nodes = [
        helper.make_node("Gather", [weight("emb", vocab, HIDDEN), "input_ids"], ["x0"]),
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=1),
        helper.make_node("Sub", ["one", "mask_f"], ["mask_inv"]),
        helper.make_node("Mul", ["mask_inv", "neg"], ["mask_neg"]),
        helper.make_node("Unsqueeze", ["mask_neg", "axes12"], ["mask_bias"]),
    ]
    if dynamo:
        nodes += dynamo_shapes_and_mask(const, causal)
    x = "x0"
    for i in range(layers):
        p = f"l{i}_"
        if dynamo:
            nodes += dynamo_attention(p, x, weight)
        for part in "qkv" if not dynamo else "":
            nodes += [
                helper.make_node("MatMul", [x, weight(p + part + "_w", HIDDEN, HIDDEN)], [p + part + "_mm"]),
                helper.make_node("Add", [p + part + "_mm", weight(p + part + "_b", HIDDEN)], [p + part]),
                helper.make_node("Reshape", [p + part, "split"], [p + part + "_r"]),
                helper.make_node(
                    "Transpose",
                    [p + part + "_r"],
                    [p + part + "_t"],
                    perm=[0, 2, 3, 1] if part == "k" else [0, 2, 1, 3],
                ),
            ]
        if not dynamo:
            nodes += [
                helper.make_node("MatMul", [p + "q_t", p + "k_t"], [p + "scores"]),
                helper.make_node("Mul", [p + "scores", "scale"], [p + "scaled"]),
                helper.make_node("Add", [p + "scaled", "mask_bias"], [p + "masked"]),
                helper.make_node("Softmax", [p + "masked"], [p + "probs"], axis=-1),
                helper.make_node("MatMul", [p + "probs", p + "v_t"], [p + "ctx"]),
                helper.make_node("Transpose", [p + "ctx"], [p + "ctx_t"], perm=[0, 2, 1, 3]),
                helper.make_node("Reshape", [p + "ctx_t", "merge"], [p + "ctx_m"]),
            ]
        nodes += [
            helper.make_node("MatMul", [p + "ctx_m", weight(p + "o_w", HIDDEN, HIDDEN)], [p + "o_mm"]),
            helper.make_node("Add", [p + "o_mm", weight(p + "o_b", HIDDEN)], [p + "o"]),
            helper.make_node("Add", [p + "o", x], [p + "res"]),
            helper.make_node(
                "LayerNormalization",
                [p + "res", weight(p + "ln_g", HIDDEN, scale=0.1), weight(p + "ln_b", HIDDEN, scale=0.1)],
                [p + "out"],
                axis=-1,
            ),
        ]
        x = p + "out"
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    outputs = [
        helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", HIDDEN])
    ]
    if heads:
        nodes += [
            helper.make_node("MatMul", [x, weight("sparse_w", HIDDEN, 1)], ["sparse_mm"]),
            helper.make_node("Add", ["sparse_mm", weight("sparse_b", 1)], ["sparse_lin"]),
            helper.make_node("Relu", ["sparse_lin"], ["sparse_weights"]),
            helper.make_node("MatMul", [x, weight("colbert_w", HIDDEN, COLBERT_DIM)], ["colbert_vecs"]),
        ]
        outputs += [
            helper.make_tensor_value_info("sparse_weights", TensorProto.FLOAT, ["batch", "sequence", 1]),
            helper.make_tensor_value_info(
                "colbert_vecs", TensorProto.FLOAT, ["batch", "sequence", COLBERT_DIM]
            ),
        ]
    save_graph(dst, "tiny-transformer", nodes, outputs, inits)
    settings = {"vocab_size": vocab, "max_position_embeddings": 64, "pooling": "mean", "normalize": True}
    (dst / "config.json").write_text(json.dumps({**settings, **(config or {})}), encoding="utf-8")
    return dst


def dynamo_shapes_and_mask(const, causal: bool) -> list:
    """The shapes a dynamo export computes from the input's (``dyn_split`` = (batch, tokens, -1, head
    size), ``dyn_flat`` = (-1, tokens, head size), ``dyn_keys`` = (batch, heads, head size, tokens),
    ``dyn_merge`` = (batch, tokens, -1)) and its additive mask ``dyn_mask``: ``Where(keep, 0, -FLT_MAX)``,
    ``keep`` the padding mask (and, with ``causal``, key position <= query position)."""
    size = HIDDEN // HEADS
    for name, value in (("d_size", [size]), ("d_heads", [HEADS]), ("d_minus1", [-1]), ("d_axes12", [1, 2])):
        const(name, np.array(value, dtype=np.int64))
    const("d_zero", np.array(0.0, dtype=np.float32))
    const("d_lowest", np.array(np.finfo(np.float32).min, dtype=np.float32))
    const("d_start", np.array(0, dtype=np.int64))
    const("d_step", np.array(1, dtype=np.int64))
    const("d_axis1", np.array([1], dtype=np.int64))
    nodes = [
        helper.make_node("Shape", ["input_ids"], ["d_batch"], start=0, end=1),
        helper.make_node("Shape", ["input_ids"], ["d_tokens"], start=1, end=2),
        helper.make_node("Concat", ["d_batch", "d_tokens", "d_minus1", "d_size"], ["dyn_split"], axis=0),
        helper.make_node("Concat", ["d_minus1", "d_tokens", "d_size"], ["dyn_flat"], axis=0),
        helper.make_node("Concat", ["d_batch", "d_heads", "d_size", "d_tokens"], ["dyn_keys"], axis=0),
        helper.make_node("Concat", ["d_batch", "d_tokens", "d_minus1"], ["dyn_merge"], axis=0),
        helper.make_node("Cast", ["attention_mask"], ["d_mask_b"], to=TensorProto.BOOL),
        helper.make_node("Unsqueeze", ["d_mask_b", "d_axes12"], ["d_keep_pad"]),
    ]
    keep = "d_keep_pad"
    if causal:
        nodes += [
            helper.make_node("Squeeze", ["d_tokens"], ["d_count"]),
            helper.make_node("Range", ["d_start", "d_count", "d_step"], ["d_positions"]),
            helper.make_node("Unsqueeze", ["d_positions", "d_axis1"], ["d_queries"]),
            helper.make_node("GreaterOrEqual", ["d_queries", "d_positions"], ["d_causal"]),
            helper.make_node("And", ["d_keep_pad", "d_causal"], ["d_keep"]),
        ]
        keep = "d_keep"
    return nodes + [helper.make_node("Where", [keep, "d_zero", "d_lowest"], ["dyn_mask"])]


def dynamo_attention(p: str, x: str, weight) -> list:
    """Layer ``p``'s attention over ``x`` as a dynamo export spells it, ending in ``{p}ctx_m``: queries
    and keys each scaled by ``size ** -0.25``, the keys transposed through a reshape to three
    dimensions, shapes from :func:`dynamo_shapes_and_mask`."""
    size = HIDDEN // HEADS
    root = p + "sqrt_scale"
    nodes = [
        helper.make_node(
            "Constant", [], [root], value=numpy_helper.from_array(np.array(size**-0.25, dtype=np.float32))
        )
    ]
    for part in "qkv":
        nodes += [
            helper.make_node("MatMul", [x, weight(p + part + "_w", HIDDEN, HIDDEN)], [p + part + "_mm"]),
            helper.make_node("Add", [p + part + "_mm", weight(p + part + "_b", HIDDEN)], [p + part]),
            helper.make_node("Reshape", [p + part, "dyn_split"], [p + part + "_r"]),
            helper.make_node("Transpose", [p + part + "_r"], [p + part + "_t"], perm=[0, 2, 1, 3]),
        ]
    return nodes + [
        helper.make_node("Reshape", [p + "k_t", "dyn_flat"], [p + "k_flat"]),
        helper.make_node("Transpose", [p + "k_flat"], [p + "k_swapped"], perm=[0, 2, 1]),
        helper.make_node("Reshape", [p + "k_swapped", "dyn_keys"], [p + "k_tt"]),
        helper.make_node("Mul", [p + "q_t", root], [p + "q_s"]),
        helper.make_node("Mul", [p + "k_tt", root], [p + "k_s"]),
        helper.make_node("MatMul", [p + "q_s", p + "k_s"], [p + "scores"]),
        helper.make_node("Add", [p + "scores", "dyn_mask"], [p + "masked"]),
        helper.make_node("Softmax", [p + "masked"], [p + "probs"], axis=-1),
        helper.make_node("MatMul", [p + "probs", p + "v_t"], [p + "ctx"]),
        helper.make_node("Transpose", [p + "ctx"], [p + "ctx_t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", [p + "ctx_t", "dyn_merge"], [p + "ctx_m"]),
    ]


def padded(rng: np.random.Generator, lengths: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """A padded batch of random token ids of ``lengths``: (input ids, attention mask)."""
    ids = np.zeros((len(lengths), max(lengths)), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, length in enumerate(lengths):
        ids[row, :length] = rng.integers(5, 60, size=length)
        mask[row, :length] = 1
    return ids, mask


def run(model, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``last_hidden_state`` of the ``onnx.ModelProto`` ``model`` (a prepared graph may name clirkit's
    operators) for a padded batch, on onnxruntime's CPU provider."""
    import onnxruntime as ort
    from clirkit.encoders.custom_ops import register

    options = ort.SessionOptions()
    register(options)
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask})[0]


def texts(count: int, seed: int = 0) -> list[str]:
    """``count`` texts of 1 to 30 words from the tokenizer's vocabulary (an unknown word now and then)."""
    rng = np.random.default_rng(seed)
    words = WORDS + ["unknownword"]
    return [" ".join(rng.choice(words, size=int(rng.integers(1, 31)))) for _ in range(count)]


def with_task_input(dst: Path, config: dict | None = None) -> Path:
    """The tiny encoder with an extra int64 graph input ``task_id`` (a scalar) added to every hidden
    state, so each task id gives other vectors."""
    build(dst, config=config)
    model = onnx.load(str(dst / "model.onnx"))
    graph = model.graph
    graph.input.append(helper.make_tensor_value_info("task_id", TensorProto.INT64, []))
    for node in graph.node:
        if list(node.output) == ["last_hidden_state"]:
            node.output[0] = "hidden_plain"
    graph.node.extend(
        [
            helper.make_node("Cast", ["task_id"], ["task_f"], to=TensorProto.FLOAT),
            helper.make_node("Add", ["hidden_plain", "task_f"], ["last_hidden_state"]),
        ]
    )
    onnx.save_model(model, str(dst / "model.onnx"))
    return dst
