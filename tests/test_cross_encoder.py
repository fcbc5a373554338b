"""The cross-encoder scorer, against a numpy computation of the same head on the base model's outputs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from clirkit import ClirkitError, InvalidInputError
from clirkit.encoders import CrossEncoder
from clirkit.encoders.cross_encoder import _positive_index
from clirkit.encoders.tokenization import encode_truncated
from conftest import shared_path

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")
onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402

BASE = "all-MiniLM-L6-v2-int8"
QUERY = "Do statins reduce the risk of heart attacks?"
PASSAGES = [
    "Statin therapy lowers LDL cholesterol and reduces major cardiovascular events.",
    "",
    "The mitochondrial genome encodes thirteen proteins of the respiratory chain.",
    "A randomized trial of 10,000 patients. " * 40,
    "heart",
]


def with_head(dst: Path, classes: int, config: dict | None = None) -> tuple[Path, np.ndarray, np.ndarray]:
    """MiniLM with a classification head appended: first token's hidden state · W + b -> (batch,
    classes) logits; returns the directory, W and b."""
    src = shared_path("models", BASE)
    model = onnx.load(str(src / "model.onnx"))
    rng = np.random.default_rng(11)
    weight = rng.standard_normal((384, classes)).astype(np.float32)
    bias = rng.standard_normal(classes).astype(np.float32)
    hidden = model.graph.output[0].name
    model.graph.initializer.extend(
        [
            numpy_helper.from_array(np.array(0, dtype=np.int64), "head_first"),
            numpy_helper.from_array(weight, "head_weight"),
            numpy_helper.from_array(bias, "head_bias"),
        ]
    )
    model.graph.node.extend(
        [
            helper.make_node("Gather", [hidden, "head_first"], ["head_cls"], axis=1),
            helper.make_node("MatMul", ["head_cls", "head_weight"], ["head_product"]),
            helper.make_node("Add", ["head_product", "head_bias"], ["logits"]),
        ]
    )
    del model.graph.output[:]
    model.graph.output.append(
        helper.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, ["batch", classes])
    )
    dst.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(dst / "model.onnx"))
    shutil.copy(src / "tokenizer.json", dst)
    base_config = json.loads((src / "config.json").read_text())
    (dst / "config.json").write_text(json.dumps({**base_config, **(config or {})}))
    return dst, weight, bias


def reference_scores(ce: CrossEncoder, pairs, weight, bias, column: int) -> np.ndarray:
    """The head in numpy over the base model's hidden states, one pair at a time, same pair encoding."""
    session = ort.InferenceSession(
        str(shared_path("models", BASE, "model.onnx")), providers=["CPUExecutionProvider"]
    )
    scores = []
    for encoding in encode_truncated(ce.tokenizer, pairs, ce.max_length):
        ids = np.array([encoding.ids], dtype=np.int64)
        feeds = {
            "input_ids": ids,
            "attention_mask": np.ones_like(ids),
            "token_type_ids": np.array([encoding.type_ids], dtype=np.int64),
        }
        hidden = session.run(None, feeds)[0]
        scores.append((hidden[:, 0] @ weight + bias)[0, column])
    return np.array(scores, dtype=np.float32)


@pytest.fixture(scope="module")
def one_logit(tmp_path_factory):
    return with_head(tmp_path_factory.mktemp("ce") / "one", 1)


def test_scores_equal_the_head_computed_on_the_base_model(one_logit):
    model_dir, weight, bias = one_logit
    ce = CrossEncoder(model_dir, max_length=64, provider="cpu")
    got = ce.score(QUERY, PASSAGES)
    assert got.dtype == np.float32 and got.shape == (len(PASSAGES),)
    expected = reference_scores(ce, [(QUERY, p) for p in PASSAGES], weight, bias, 0)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)  # float rounding of the prepared graph
    np.testing.assert_array_equal(ce.score_pairs([(QUERY, p) for p in PASSAGES]), got)


def test_batching_does_not_change_scores(one_logit):
    model_dir, _, _ = one_logit
    alone = CrossEncoder(model_dir, max_length=64, batch_size=1, threads=1, provider="cpu").score(
        QUERY, PASSAGES
    )
    batched = CrossEncoder(model_dir, max_length=64, batch_size=4, provider="cpu").score(QUERY, PASSAGES)
    np.testing.assert_array_equal(alone, batched)
    assert CrossEncoder(model_dir, provider="cpu").score(QUERY, []).shape == (0,)


def test_pair_truncation_keeps_the_query(one_logit):
    model_dir, _, _ = one_logit
    ce = CrossEncoder(model_dir, max_length=32, provider="cpu")
    (encoding,) = encode_truncated(ce.tokenizer, [(QUERY, PASSAGES[3])], 32)
    query_ids = ce.tokenizer.encode(QUERY, add_special_tokens=False).ids
    assert len(encoding.ids) == 32
    assert [i for i, s in zip(encoding.ids, encoding.sequence_ids) if s == 0] == query_ids


def test_two_class_heads_score_the_positive_class(tmp_path):
    model_dir, weight, bias = with_head(
        tmp_path / "two", 2, {"id2label": {"0": "relevant", "1": "irrelevant"}}
    )
    ce = CrossEncoder(model_dir, max_length=64, provider="cpu")
    assert ce.positive_index == 0
    expected = reference_scores(ce, [(QUERY, p) for p in PASSAGES[:3]], weight, bias, 0)
    np.testing.assert_allclose(
        ce.score(QUERY, PASSAGES[:3]), expected, rtol=1e-5, atol=1e-5
    )  # float rounding of the prepared graph
    assert _positive_index({"label2id": {"no": 0, "yes": 1}}) == 1
    assert _positive_index({}) == 1


def test_bad_models_give_clirkit_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidInputError, match="lacks model.onnx"):
        CrossEncoder(tmp_path / "empty")
    with pytest.raises(ClirkitError, match=r"shape .*\(batch, 1\) or \(batch, 2\)"):
        CrossEncoder(shared_path("models", BASE), provider="cpu")  # a bi-encoder: token states, not logits
    model_dir, _, _ = with_head(tmp_path / "three", 3)
    with pytest.raises(ValueError, match="shape"):
        CrossEncoder(model_dir, provider="cpu")
    with pytest.raises(InvalidInputError, match="max_length"):
        CrossEncoder(tmp_path / "three", max_length=2)
