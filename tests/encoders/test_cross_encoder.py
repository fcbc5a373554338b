"""The cross-encoder scorer, against a numpy computation of the same head on the base model's outputs."""

from __future__ import annotations

import numpy as np
import pytest
from clirkit import ClirkitError, InvalidInputError
from clirkit.encoders import CrossEncoder
from clirkit.encoders.cross_encoder import _positive_index
from clirkit.encoders.tokenization import encode_truncated
from conftest import shared_path
from model_builders import BASE, with_head

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")
onnx = pytest.importorskip("onnx")

QUERY = "Do statins reduce the risk of heart attacks?"
PASSAGES = [
    "Statin therapy lowers LDL cholesterol and reduces major cardiovascular events.",
    "",
    "The mitochondrial genome encodes thirteen proteins of the respiratory chain.",
    "A randomized trial of 10,000 patients. " * 40,
    "heart",
]


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
