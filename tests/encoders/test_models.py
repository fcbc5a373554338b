"""Encoder models as people export them: external-data weights, float16 graphs, extra inputs fed from
config.json, and long documents cut before tokenizing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from clirkit import InvalidInputError
from clirkit.encoders import OnnxEncoder
from clirkit.encoders.tokenization import CHARS_PER_TOKEN_BOUND, bounded_text, encode_truncated
from conftest import shared_path

ort = pytest.importorskip("onnxruntime")
tokenizers = pytest.importorskip("tokenizers")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

MINILM = "all-MiniLM-L6-v2-int8"
E5 = "multilingual-e5-small-int8"


def scifact_queries(limit: int | None = None) -> list[str]:
    lines = shared_path("data", "beir-scifact", "queries.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["text"] for line in lines[:limit]]


def external_data_copy(src: Path, dst: Path) -> Path:
    """``src``'s model re-saved with every tensor in one external-data file beside the graph."""
    dst.mkdir(parents=True, exist_ok=True)
    onnx.save_model(
        onnx.load(str(src / "model.onnx")),
        str(dst / "model.onnx"),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="weights.bin",
        size_threshold=0,
    )
    for name in ("tokenizer.json", "config.json"):
        shutil.copy(src / name, dst / name)
    return dst


def test_external_data_model_encodes_like_the_single_file_model(tmp_path):
    src = shared_path("models", E5)
    dst = external_data_copy(src, tmp_path / "e5-external")
    assert (dst / "model.onnx").stat().st_size < 1_000_000 < (dst / "weights.bin").stat().st_size
    queries = scifact_queries(50)
    single = OnnxEncoder(src, device="cpu").encode_queries(queries)
    external = OnnxEncoder(dst, device="cpu").encode_queries(queries)
    assert float(np.abs(single - external).max()) <= 1e-6

    # Resumable encodings key on the fingerprint: new weights alone must change it.
    before = OnnxEncoder(dst, device="cpu").fingerprint()
    with (dst / "weights.bin").open("ab") as weights:
        weights.write(b"\0")
    assert OnnxEncoder(dst, device="cpu").fingerprint() != before


def tiny_model(dst: Path, config: dict, extra_input: bool = True) -> tuple[Path, np.ndarray, np.ndarray]:
    """A float16 graph over MiniLM's tokenizer: int32 ``input_ids`` -> embedding rows, plus the row of
    a scalar ``task_id`` input; returns the directory, the embedding table and the task table."""
    vocab = tokenizers.Tokenizer.from_file(
        str(shared_path("models", MINILM, "tokenizer.json"))
    ).get_vocab_size()
    rng = np.random.default_rng(7)
    table = rng.standard_normal((vocab, 4)).astype(np.float16)
    tasks = rng.standard_normal((3, 4)).astype(np.float16)
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT32, ["batch", "sequence"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"]),
    ]
    nodes = [helper.make_node("Gather", ["table", "input_ids"], ["rows"])]
    if extra_input:
        inputs.append(helper.make_tensor_value_info("task_id", TensorProto.INT64, []))
        nodes += [
            helper.make_node("Gather", ["tasks", "task_id"], ["task"]),
            helper.make_node("Add", ["rows", "task"], ["hidden"]),
        ]
    else:
        nodes.append(helper.make_node("Identity", ["rows"], ["hidden"]))
    graph = helper.make_graph(
        nodes,
        "tiny",
        inputs,
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT16, ["batch", "sequence", 4])],
        initializer=[numpy_helper.from_array(table, "table"), numpy_helper.from_array(tasks, "tasks")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    dst.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(dst / "model.onnx"))
    shutil.copy(shared_path("models", MINILM, "tokenizer.json"), dst)
    (dst / "config.json").write_text(
        json.dumps({"vocab_size": vocab, "pooling": "mean", "normalize": False, **config})
    )
    return dst, table, tasks


def test_float16_graph_with_an_extra_input_fed_from_config(tmp_path):
    model_dir, table, tasks = tiny_model(tmp_path / "tiny", {"input_values": {"task_id": 2}})
    enc = OnnxEncoder(model_dir, device="cpu")
    texts = ["Cross-language retrieval", "a", "", "Dense retrievers encode queries " * 5]
    got = enc.encode(texts)
    assert got.dtype == np.float32
    for text, row in zip(texts, got):
        ids = enc.tokenizer.encode(text).ids
        hidden = (table[ids] + tasks[2]).astype(np.float32)  # added in float16, as the graph does
        np.testing.assert_allclose(row, hidden.mean(axis=0), rtol=0, atol=1e-6)


def test_an_input_that_cannot_be_fed_is_named(tmp_path):
    model_dir, _, _ = tiny_model(tmp_path / "tiny", {})
    with pytest.raises(InvalidInputError, match="task_id.*input_values"):
        OnnxEncoder(model_dir, device="cpu")
    model_dir, _, _ = tiny_model(tmp_path / "bad", {"input_values": [1]})
    with pytest.raises(InvalidInputError, match="input_values"):
        OnnxEncoder(model_dir, device="cpu")


def test_long_documents_are_cut_before_tokenizing_with_the_same_vector(monkeypatch):
    enc = OnnxEncoder(shared_path("models", MINILM), device="cpu", max_length=128)
    paragraph = "Dense retrievers encode queries and documents into one vector space, cheaply. "
    document = paragraph * 60_000  # about 4.7 MB
    seen: list[int] = []
    tokenizer = enc.tokenizer

    class Recording:
        def encode_batch(self, texts):
            seen.extend(len(t) for t in texts)
            return tokenizer.encode_batch(texts)

        def encode(self, text):
            seen.append(len(text))
            return tokenizer.encode(text)

    monkeypatch.setattr(enc, "tokenizer", Recording())
    by_hand = document[:2000]  # about 400 tokens: still over max_length
    vectors = enc.encode([document, by_hand])
    assert max(seen) == len(bounded_text(document, 128)) == 128 * CHARS_PER_TOKEN_BOUND
    np.testing.assert_array_equal(vectors[0], vectors[1])
    assert enc.truncated == 2


@pytest.mark.parametrize(
    "text",
    [
        "start " + " " * 50_000 + "middle words here " * 100,  # whitespace the tokenizer drops
        "x" * 40_000 + " then words",  # one long word: one [UNK]
        "\u0301" * 30_000 + " accents stripped away " * 50,  # combining marks the normalizer drops
        "short text",
    ],
)
def test_cutting_before_tokenizing_never_changes_the_tokens(text):
    tokenizer = tokenizers.Tokenizer.from_file(str(shared_path("models", MINILM, "tokenizer.json")))
    tokenizer.enable_truncation(64)
    (got,) = encode_truncated(tokenizer, [text], 64)
    assert got.ids == tokenizer.encode(text).ids
    (pair,) = encode_truncated(tokenizer, [("a query", text)], 64)
    assert pair.ids == tokenizer.encode("a query", text).ids
