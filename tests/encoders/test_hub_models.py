"""Models by Hub id (clirkit.sources.models), resolved offline from a Hugging Face cache laid out here."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from clirkit import InvalidInputError
from clirkit.sources.models import is_model_id, resolve_model
from conftest import shared_path
from hub_layout import lay_snapshot, use_hub_cache

pytest.importorskip("onnxruntime")
pytest.importorskip("huggingface_hub")
pytestmark = pytest.mark.shared

REPO = "sentence-transformers/all-MiniLM-L6-v2"
COMMIT = "c" * 40
TEXTS = ["what purrs?", "Cats purr when they are content, and sometimes when they are hurt."]
MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
]


@pytest.fixture
def hub(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("CLIRKIT_CACHE_DIR", str(tmp_path / "clirkit-cache"))
    use_hub_cache(monkeypatch, tmp_path / "hf")
    return tmp_path / "hf"


def _minilm() -> Path:
    return shared_path("models", "all-MiniLM-L6-v2-int8")


def _same_vectors(a, b) -> None:
    assert np.array_equal(a.encode_queries(TEXTS), b.encode_queries(TEXTS))
    assert np.array_equal(a.encode_passages(TEXTS), b.encode_passages(TEXTS))


def test_model_ids_are_told_from_paths(tmp_path):
    assert is_model_id("intfloat/multilingual-e5-small")
    assert is_model_id("intfloat/multilingual-e5-small@abc/onnx")
    assert not is_model_id(str(tmp_path))  # an existing directory is a path
    assert not is_model_id("model-dir")


def test_hub_id_encodes_like_the_same_files_by_path(hub):
    from clirkit.encoders import OnnxEncoder

    model = _minilm()
    files = {name: model / name for name in ("config.json", "tokenizer.json", "model.onnx")}
    lay_snapshot(hub, "model", REPO, COMMIT, files)
    by_id = OnnxEncoder(REPO, threads=1)
    by_path = OnnxEncoder(model, threads=1)
    assert (by_id.pooling, by_id.normalize, by_id.max_length) == (by_path.pooling, by_path.normalize, 512)
    _same_vectors(by_id, by_path)
    # the same commit named explicitly resolves to the same directory
    assert resolve_model(f"{REPO}@{COMMIT}") == str(by_id.model_dir)


def test_graph_in_a_subfolder_with_external_data(hub, tmp_path):
    import onnx
    from clirkit.encoders import OnnxEncoder

    model = _minilm()
    graph = onnx.load(str(model / "model.onnx"))
    saved = tmp_path / "external"
    saved.mkdir()
    onnx.save_model(graph, str(saved / "model.onnx"), save_as_external_data=True, location="model.onnx_data")
    files = {
        "config.json": model / "config.json",
        "tokenizer.json": model / "tokenizer.json",
        "onnx/model.onnx": saved / "model.onnx",
        "onnx/model.onnx_data": saved / "model.onnx_data",
        "onnx/model_O4.onnx": saved / "model.onnx",
    }
    lay_snapshot(hub, "model", REPO, COMMIT, files)
    by_id = OnnxEncoder(f"{REPO}/onnx", threads=1)
    assert (by_id.model_dir / "model.onnx_data").is_file()
    _same_vectors(by_id, OnnxEncoder(model, threads=1))
    # a named file is taken as it is; a folder with several graphs and no model.onnx is an error
    named = Path(resolve_model(f"{REPO}/onnx/model_O4.onnx"), "model.onnx")
    assert os.readlink(named).endswith("onnx/model_O4.onnx")
    lay_snapshot(
        hub,
        "model",
        "org/two-graphs",
        COMMIT,
        {
            "onnx/a.onnx": saved / "model.onnx",
            "onnx/b.onnx": saved / "model.onnx",
            "tokenizer.json": model / "tokenizer.json",
        },
    )
    with pytest.raises(InvalidInputError, match="onnx/a.onnx, onnx/b.onnx"):
        resolve_model("org/two-graphs")


def test_sentence_transformers_files_give_pooling_prompts_and_limit(hub):
    from clirkit.encoders import OnnxEncoder

    model = _minilm()
    files = {
        "config.json": model / "config.json",  # a transformers config: no clirkit keys
        "tokenizer.json": model / "tokenizer.json",
        "onnx/model.onnx": model / "model.onnx",
        "modules.json": json.dumps(MODULES),
        "1_Pooling/config.json": json.dumps(
            {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}
        ),
        "config_sentence_transformers.json": json.dumps(
            {"prompts": {"query": "query: ", "document": "passage: "}}
        ),
        "sentence_bert_config.json": json.dumps({"max_seq_length": 128}),
    }
    lay_snapshot(hub, "model", REPO, COMMIT, files)
    by_id = OnnxEncoder(REPO, threads=1)
    assert (by_id.pooling, by_id.normalize) == ("cls", False)  # no Normalize module
    assert (by_id.query_prefix, by_id.passage_prefix, by_id.max_length) == ("query: ", "passage: ", 128)
    expected = OnnxEncoder(
        model,
        pooling="cls",
        normalize=False,
        query_prefix="query: ",
        passage_prefix="passage: ",
        max_length=128,
        threads=1,
    )
    _same_vectors(by_id, expected)

    # a Normalize module and mean pooling, in another revision
    modules = [
        *MODULES,
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    files.update(
        {
            "modules.json": json.dumps(modules),
            "1_Pooling/config.json": json.dumps({"pooling_mode_mean_tokens": True}),
        }
    )
    lay_snapshot(hub, "model", REPO, "d" * 40, files, ref="v2")
    v2 = OnnxEncoder(f"{REPO}@v2", threads=1)
    assert (v2.pooling, v2.normalize) == ("mean", True) and v2.model_dir != by_id.model_dir


def test_unsupported_pooling_and_absent_models_are_named(hub):
    model = _minilm()
    files = {
        "config.json": model / "config.json",
        "tokenizer.json": model / "tokenizer.json",
        "model.onnx": model / "model.onnx",
        "modules.json": json.dumps(MODULES),
        "1_Pooling/config.json": json.dumps({"pooling_mode_max_tokens": True}),
    }
    lay_snapshot(hub, "model", REPO, COMMIT, files)
    with pytest.raises(InvalidInputError, match="pooling_mode_max_tokens"):
        resolve_model(REPO)
    with pytest.raises(InvalidInputError, match="org/absent"):
        resolve_model("org/absent")


def test_cli_encode_takes_a_hub_id(hub, tmp_path):
    from clirkit.cli import main

    model = _minilm()
    lay_snapshot(
        hub, "model", REPO, COMMIT, {n: model / n for n in ("config.json", "tokenizer.json", "model.onnx")}
    )
    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps({"_id": f"q{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    for name, given in (("id", REPO), ("path", str(model))):
        out = tmp_path / name
        assert (
            main(["encode", "--model", given, "--queries", str(queries), "--output", str(out), "--quiet"])
            == 0
        )
    assert np.array_equal(np.load(tmp_path / "id.npy"), np.load(tmp_path / "path.npy"))
    assert (tmp_path / "id.ids.txt").read_text() == (tmp_path / "path.ids.txt").read_text() == "q0\nq1\n"


def test_experiment_files_take_a_hub_model_id(hub, tmp_path):
    from clirkit.experiment.config import load_config
    from conftest import SAMPLE

    model = _minilm()
    lay_snapshot(
        hub, "model", REPO, COMMIT, {n: model / n for n in ("config.json", "tokenizer.json", "model.onnx")}
    )
    experiment = tmp_path / "hub.toml"
    experiment.write_text(
        f'[collections.sample]\npath = "{SAMPLE}"\nqrels = "qrels.tsv"\n'
        f'[systems.dense]\nkind = "dense"\nmodel = "{REPO}"\n[rerank.cosine]\ninput = "dense"\nmodel = "{REPO}@{COMMIT}"\n'
    )
    config = load_config(experiment)
    assert config.systems["dense"].options["model"] == resolve_model(REPO)
    assert config.rerank["cosine"].options["model"] == resolve_model(REPO)
    experiment.write_text(experiment.read_text().replace(f'"{REPO}"', '"org/absent"'))
    with pytest.raises(ValueError, match=r"hub.toml:\d+.*model.*org/absent"):
        load_config(experiment)
