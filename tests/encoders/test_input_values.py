"""Per-role instructions of an encoder: ``input_values`` for both roles or per role (Jina v3's task ids:
``{"query": {"task_id": 0}, "passage": {"task_id": 1}}``), from ``config.json`` or the encoder's
argument, in the Python encoders and on ``clirkit encode``; a graph input given for one role only is an
error naming it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tiny_transformer
from clirkit._native import InvalidInputError
from clirkit.cli import main as cli

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

PER_ROLE = {"query": {"task_id": 0}, "passage": {"task_id": 3}}


def encoder(model: Path, **options):
    from clirkit.encoders import OnnxEncoder

    return OnnxEncoder(model, normalize=False, optimize_graph=False, threads=1, **options)


def test_per_role_input_values_feed_queries_and_passages_their_own(tmp_path):
    model = tiny_transformer.with_task_input(tmp_path / "m", {"input_values": {"task_id": 7}})
    texts = ["alpha beta", "w1 w2 w3"]
    per_role = encoder(model, input_values=PER_ROLE)
    both_zero, both_three = (
        encoder(model, input_values={"task_id": 0}),
        encoder(model, input_values={"task_id": 3}),
    )
    config_only = encoder(model)
    assert np.array_equal(per_role.encode_queries(texts), both_zero.encode_queries(texts))
    assert np.array_equal(per_role.encode_passages(texts), both_three.encode_passages(texts))
    assert not np.array_equal(per_role.encode_queries(texts), per_role.encode_passages(texts))
    # the argument replaces config.json's value (7) for the inputs it names
    assert not np.array_equal(config_only.encode_queries(texts), both_zero.encode_queries(texts))
    assert per_role.fingerprint() != both_zero.fingerprint()
    # per role in config.json works the same
    in_config = tiny_transformer.with_task_input(tmp_path / "c", {"input_values": PER_ROLE})
    assert np.array_equal(encoder(in_config).encode_queries(texts), per_role.encode_queries(texts))


def test_an_input_given_for_one_role_only_is_an_error_naming_it(tmp_path):
    model = tiny_transformer.with_task_input(tmp_path / "m")
    with pytest.raises(InvalidInputError, match="needs input 'task_id' for passage texts"):
        encoder(model, input_values={"query": {"task_id": 1}})
    with pytest.raises(InvalidInputError, match="input 'task_id' must be a number"):
        encoder(model, input_values={"task_id": "one"})


def test_clirkit_encode_takes_input_values(tmp_path):
    model = tiny_transformer.with_task_input(tmp_path / "m")
    queries = tmp_path / "queries.jsonl"
    texts = tiny_transformer.texts(5, seed=4)
    queries.write_text("".join(json.dumps({"_id": f"q{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    out = tmp_path / "q"
    argv = ["encode", "--model", str(model), "--queries", str(queries), "--output", str(out), "--quiet"]
    assert cli([*argv, "--input-values", json.dumps(PER_ROLE), "--threads", "1"]) == 0
    from clirkit.encoders import OnnxEncoder

    expected = OnnxEncoder(model, input_values=PER_ROLE, threads=1).encode_queries(texts)
    assert np.array_equal(np.load(f"{out}.npy"), expected)
