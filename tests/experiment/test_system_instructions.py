"""Per-system instructions: ``query_prefix``, ``passage_prefix`` and ``input_values`` (per role) of a
dense system override the model directory's ``config.json``; the experiment's run equals ``clirkit
encode`` + ``clirkit index dense`` + ``clirkit search dense`` with the same options byte for byte, and
each key is in the key of exactly the encode stages it changes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import tiny_transformer
from clirkit.cli import main as cli
from clirkit.experiment import Experiment, ExperimentError

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

INSTRUCTIONS = {
    "query_prefix": "alpha ",
    "passage_prefix": "beta gamma ",
    "input_values": {"query": {"task_id": 1}, "passage": {"task_id": 2}},
}


@pytest.fixture
def collection(tmp_path):
    model = tiny_transformer.with_task_input(tmp_path / "model", {"input_values": {"task_id": 0}})
    data = tmp_path / "beir"
    (data / "qrels").mkdir(parents=True)
    with open(data / "corpus.jsonl", "w", encoding="utf-8") as f:
        for i, text in enumerate(tiny_transformer.texts(40, seed=21)):
            f.write(json.dumps({"_id": f"d{i}", "text": text}) + "\n")
    with open(data / "queries.jsonl", "w", encoding="utf-8") as f:
        for i, text in enumerate(tiny_transformer.texts(6, seed=22)):
            f.write(json.dumps({"_id": f"q{i}", "text": text}) + "\n")
    (data / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(6)), encoding="utf-8"
    )
    return model, data


def toml(value: object) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def experiment(tmp_path: Path, model: Path, data: Path, options: dict) -> Experiment:
    keys = "".join(f"{key} = {toml(value)}\n" for key, value in options.items())
    text = (
        f'[experiment]\nname = "instr"\nhits = 20\nthreads = 1\n\n[collections.c]\npath = "{data}"\n\n'
        f'[systems.dense]\nkind = "dense"\nmodel = "{model}"\nfields = ["text"]\n{keys}\n'
        '[evaluation]\nmeasures = ["nDCG@10"]\n'
    )
    path = tmp_path / "instr.toml"
    path.write_text(text, encoding="utf-8")
    return Experiment(path, tmp_path / "work", quiet=True)


def test_instructions_equal_the_cli_and_key_their_encode_stages(tmp_path, collection):
    model, data = collection
    exp = experiment(tmp_path, model, data, INSTRUCTIONS)
    exp.run(log=io.StringIO())
    run = exp.plan.runs["dense"]["c"].output / "run.trec"

    flags = [
        "--query-prefix",
        INSTRUCTIONS["query_prefix"],
        "--passage-prefix",
        INSTRUCTIONS["passage_prefix"],
    ]
    flags += ["--input-values", json.dumps(INSTRUCTIONS["input_values"]), "--threads", "1", "--quiet"]
    docs, queries, index, out = tmp_path / "docs", tmp_path / "q", tmp_path / "index", tmp_path / "cli.trec"
    encode = ["encode", "--model", str(model), *flags]
    assert (
        cli([*encode, "--corpus", str(data / "corpus.jsonl"), "--fields", "text", "--output", str(docs)]) == 0
    )
    assert cli([*encode, "--queries", str(data / "queries.jsonl"), "--output", str(queries)]) == 0
    assert cli(["index", "dense", "--embeddings", f"{docs}.npy", "--ids", f"{docs}.ids.txt",
                "--index", str(index), "--quiet"]) == 0  # fmt: skip
    assert cli(["search", "dense", "--index", str(index), "--queries", f"{queries}.npy",
                "--qids", f"{queries}.ids.txt", "--k", "20", "--output", str(out), "--quiet"]) == 0  # fmt: skip
    assert run.read_bytes() == out.read_bytes()

    def stages(options: dict) -> dict[str, str]:
        return {s.kind: s.digest for s in experiment(tmp_path, model, data, options).plan.stages}

    plain, given = stages({}), stages(INSTRUCTIONS)
    assert plain != given
    assert plain["encode"] == stages({"query_prefix": "x "})["encode"]  # queries only
    assert plain["encode-queries"] != stages({"query_prefix": "x "})["encode-queries"]
    assert plain["encode-queries"] == stages({"passage_prefix": "x "})["encode-queries"]
    assert plain["encode"] != stages({"passage_prefix": "x "})["encode"]
    changed = stages({"input_values": {"task_id": 4}})
    assert changed["encode"] != plain["encode"] and changed["encode-queries"] != plain["encode-queries"]


def test_bad_input_values_name_the_key(tmp_path, collection):
    model, data = collection
    with pytest.raises(ExperimentError, match=r"systems\.dense\.input_values: .*must be a number"):
        experiment(tmp_path, model, data, {"input_values": {"query": {"task_id": "zero"}}})
