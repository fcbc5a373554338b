"""A dense system's keys are ``clirkit encode``/``index dense``/``search dense``'s options: per-system
instructions (``query_prefix``, ``passage_prefix`` and per-role ``input_values``, over the model
directory's ``config.json``) and the index and search options (``pq``, ``nbits``, ``ivf``, ``nprobe``,
``metric``, ``train_size``, ``seed``, ``no_vectors``, ``vector_dtype``, ``refine``); with each, the
experiment's run equals the three commands' with the same options byte for byte, and each key is in the
key of exactly the stages it changes."""

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
        for i, text in enumerate(tiny_transformer.texts(300, seed=21)):
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


def experiment(tmp_path: Path, model: Path, data: Path, options: dict, kind: str = "dense") -> Experiment:
    keys = "".join(f"{key} = {toml(value)}\n" for key, value in options.items())
    text = (
        f'[experiment]\nname = "instr"\nhits = 20\nthreads = 1\n\n[collections.c]\npath = "{data}"\n\n'
        f'[systems.{kind}]\nkind = "{kind}"\nmodel = "{model}"\nfields = ["text"]\n{keys}\n'
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
    flags += ["--input-values", json.dumps(INSTRUCTIONS["input_values"])]
    assert run.read_bytes() == cli_run(tmp_path, model, data, flags, [], [])

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


def cli_run(
    tmp_path: Path, model: Path, data: Path, encode: list, index: list, search: list, documents: tuple = ()
) -> bytes:
    """The run of ``clirkit encode`` (documents, with ``documents`` too, and queries), ``index dense`` and
    ``search dense``."""
    docs, queries, built, out = tmp_path / "docs", tmp_path / "q", tmp_path / "index", tmp_path / "cli.trec"
    common = ["--threads", "1", "--quiet"]
    encoding = ["encode", "--model", str(model), *encode, *common]
    assert (
        cli(
            [
                *encoding,
                *documents,
                "--corpus",
                str(data / "corpus.jsonl"),
                "--fields",
                "text",
                "--output",
                str(docs),
            ]
        )
        == 0
    )
    assert cli([*encoding, "--queries", str(data / "queries.jsonl"), "--output", str(queries)]) == 0
    assert cli(["index", "dense", "--embeddings", f"{docs}.npy", "--ids", f"{docs}.ids.txt",
                "--index", str(built), *index, *common]) == 0  # fmt: skip
    assert cli(["search", "dense", "--index", str(built), "--queries", f"{queries}.npy",
                "--qids", f"{queries}.ids.txt", "--k", "20", "--output", str(out), *search, *common]) == 0  # fmt: skip
    return out.read_bytes()


@pytest.mark.parametrize(
    "options, index, search",
    [
        ({"pq": 4, "nbits": 8, "seed": 3, "train_size": 260}, ["--pq", "4", "--nbits", "8", "--seed", "3",
         "--train-size", "260"], []),
        ({"pq": 4, "ivf": 3, "nprobe": 2, "vector_dtype": "float16", "refine": 7},
         ["--pq", "4", "--ivf", "3", "--vector-dtype", "float16"], ["--nprobe", "2", "--refine", "7"]),
        ({"pq": 8, "no_vectors": True, "refine": 0}, ["--pq", "8", "--no-vectors"], ["--refine", "0"]),
        ({"metric": "l2"}, ["--metric", "l2"], []),
    ],
    ids=["nbits-seed", "ivf-float16-refine", "no-vectors", "l2"],
)  # fmt: skip
def test_index_and_search_keys_equal_the_cli(tmp_path, collection, options, index, search):
    model, data = collection
    exp = experiment(tmp_path, model, data, options)
    exp.run(log=io.StringIO())
    run = exp.plan.runs["dense"]["c"].output / "run.trec"
    assert run.read_bytes() == cli_run(tmp_path, model, data, [], index, search)
    plain = {s.kind: s.digest for s in experiment(tmp_path, model, data, {}).plan.stages}
    given = {s.kind: s.digest for s in exp.plan.stages}
    assert given["encode"] == plain["encode"] and given["encode-queries"] == plain["encode-queries"]
    assert given["dense-index"] != plain["dense-index"]


@pytest.mark.parametrize(
    "options, key, message",
    [
        ({"nbits": 8}, "nbits", "applies to a PQ index"),
        ({"pq": 4, "nbits": 5}, "nbits", "must be 4 or 8"),
        ({"nprobe": 2}, "nprobe", "applies to an IVF index"),
        ({"pq": 4, "no_vectors": True, "refine": 5}, "refine", "no_vectors"),
        ({"vector_dtype": "float64"}, "vector_dtype", "not one of"),
    ],
)
def test_bad_index_keys_name_the_key(tmp_path, collection, options, key, message):
    model, data = collection
    with pytest.raises(ExperimentError, match=rf"systems\.dense\.{key}: .*{message}"):
        experiment(tmp_path, model, data, options)


def test_float16_encodings_equal_the_cli_and_key_the_document_encoding(tmp_path, collection):
    model, data = collection
    exp = experiment(tmp_path, model, data, {"dtype": "float16", "pq": 4})
    exp.run(log=io.StringIO())
    run = exp.plan.runs["dense"]["c"].output / "run.trec"
    assert run.read_bytes() == cli_run(tmp_path, model, data, [], ["--pq", "4"], [], ("--dtype", "float16"))
    plain = {s.kind: s.digest for s in experiment(tmp_path, model, data, {"pq": 4}).plan.stages}
    given = {s.kind: s.digest for s in exp.plan.stages}
    assert given["encode"] != plain["encode"] and given["encode-queries"] == plain["encode-queries"]


def test_multivector_build_and_search_keys_equal_the_cli(tmp_path, collection):
    model, data = collection
    options = {"centroids": 8, "kmeans_iterations": 2, "kmeans_sample": 200, "seed": 5, "keep_vectors": True,
               "ncells": 2, "ndocs": 16, "rerank": 12, "refine": True}  # fmt: skip
    exp = experiment(tmp_path, model, data, options, kind="multivector")
    exp.run(log=io.StringIO())
    run = exp.plan.runs["multivector"]["c"].output / "run.trec"
    docs, queries, built, out = tmp_path / "docs", tmp_path / "q", tmp_path / "index", tmp_path / "cli.trec"
    common = ["--threads", "1", "--quiet"]
    encoding = ["encode", "--multivector", "--model", str(model), *common]
    assert (
        cli([*encoding, "--corpus", str(data / "corpus.jsonl"), "--fields", "text", "--output", str(docs)])
        == 0
    )
    assert cli([*encoding, "--queries", str(data / "queries.jsonl"), "--output", str(queries)]) == 0
    assert (
        cli(
            [
                "index",
                "multivector",
                "--embeddings",
                str(docs),
                "--index",
                str(built),
                "--centroids",
                "8",
                "--kmeans-iterations",
                "2",
                "--kmeans-sample",
                "200",
                "--seed",
                "5",
                "--keep-vectors",
                *common,
            ]
        )
        == 0
    )
    assert (
        cli(
            [
                "search",
                "multivector",
                "--index",
                str(built),
                "--queries",
                str(queries),
                "--k",
                "20",
                "--ncells",
                "2",
                "--ndocs",
                "16",
                "--rerank",
                "12",
                "--refine",
                "--output",
                str(out),
                *common,
            ]
        )
        == 0
    )
    assert run.read_bytes() == out.read_bytes()  # fmt: skip
    with pytest.raises(ExperimentError, match=r"systems\.multivector\.exact: .*keep_vectors"):
        experiment(tmp_path, model, data, {"exact": True}, kind="multivector")


def test_bad_input_values_name_the_key(tmp_path, collection):
    model, data = collection
    with pytest.raises(ExperimentError, match=r"systems\.dense\.input_values: .*must be a number"):
        experiment(tmp_path, model, data, {"input_values": {"query": {"task_id": "zero"}}})
