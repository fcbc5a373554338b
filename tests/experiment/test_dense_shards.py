"""``shards = N`` and ``ray`` on dense systems are ``clirkit index dense --shards N [--ray]`` and
``clirkit search dense [--ray]``: over precomputed embeddings and over a tiny model's encodings, the
experiment's sharded index holds the CLI's files byte for byte and its run is the CLI's; a task whose
rows are a selection of a file (a language's documents) or span several files is sharded as the CLI
shards one file holding those rows; a sharded ``clirkit encode --ray`` directory gives one index shard
per embedding shard; ``shards`` is in the index stage's key, ``ray`` in none; bad values are errors
naming the key. The Ray tests start a two-CPU local cluster and skip without Ray."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from clirkit.cli import main as cli
from clirkit.dense import DenseIndex
from clirkit.distributed.sharded import read_manifest
from clirkit.experiment import Experiment
from clirkit.experiment.toml_source import ExperimentError
from conftest import SAMPLE, run_experiment, sample_experiment_head

DOCS = [json.loads(line) for line in (SAMPLE / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
QUERIES = [json.loads(line) for line in (SAMPLE / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
LANG = {r["_id"]: r["lang"] for r in DOCS + QUERIES}


def _write(prefix: Path, ids: list[str], seed: int) -> None:
    matrix = np.random.default_rng(seed).standard_normal((len(ids), 16)).astype(np.float32)
    np.save(f"{prefix}.npy", matrix.astype(np.float16))
    Path(f"{prefix}.ids.txt").write_text("".join(i + "\n" for i in ids), encoding="utf-8")


def _subset(prefix: Path, out: Path, lang: str) -> None:
    """``out``: the rows of ``prefix`` in language ``lang``, in order (what the CLI is given)."""
    ids = Path(f"{prefix}.ids.txt").read_text(encoding="utf-8").splitlines()
    rows = [n for n, i in enumerate(ids) if LANG[i] == lang]
    np.save(f"{out}.npy", np.load(f"{prefix}.npy")[rows])
    Path(f"{out}.ids.txt").write_text("".join(ids[n] + "\n" for n in rows), encoding="utf-8")


@pytest.fixture
def embeddings(tmp_path):
    _write(tmp_path / "emb", [d["_id"] for d in DOCS], 1)
    _write(tmp_path / "q", [q["_id"] for q in QUERIES], 2)
    return tmp_path


def _files(index: Path) -> dict[str, bytes]:
    """Every file of a (sharded) index, by its path inside it."""
    return {str(p.relative_to(index)): p.read_bytes() for p in sorted(index.rglob("*")) if p.is_file()}


SYSTEM = """
[systems.dense]
kind = "dense"
embeddings = "emb"
query_embeddings = "q"
pq = 4
train_size = 150
refine = 20
hits = 50
"""


def _cli(tmp_path: Path, docs: Path, queries: Path, name: str, index: list[str], search: list[str]) -> Path:
    """``clirkit index dense`` (``index`` flags) then ``search dense``; returns the index directory."""
    built, run = tmp_path / f"cli-{name}", tmp_path / f"cli-{name}.trec"
    assert cli(["index", "dense", "--embeddings", f"{docs}.npy", "--ids", f"{docs}.ids.txt", "--index", str(built),
                "--pq", "4", "--train-size", "150", *index, "--quiet"]) == 0  # fmt: skip
    assert cli(["search", "dense", "--index", str(built), "--queries", f"{queries}.npy", "--qids",
                f"{queries}.ids.txt", "--output", str(run), "--k", "50", "--refine", "20", *search,
                "--quiet"]) == 0  # fmt: skip
    return built


def _same_as_cli(exp: Experiment, run: str, cli_index: Path) -> None:
    (index,) = [s for s in exp.plan.stages if s.kind == "dense-index"]
    assert _files(index.output / "index") == _files(cli_index)
    got = (exp.plan.runs["dense"][run].output / "run.trec").read_bytes()
    assert got and got == cli_index.with_suffix(".trec").read_bytes()


def test_precomputed_shards_equal_the_cli_in_place_and_for_a_language(embeddings):
    tmp = embeddings
    exp = run_experiment(tmp, sample_experiment_head("shards", ["en"]), SYSTEM + "shards = 3\n")
    _subset(tmp / "q", tmp / "q-en", "en")
    _same_as_cli(exp, "mlir/en", _cli(tmp, tmp / "emb", tmp / "q-en", "all", ["--shards", "3"], []))
    (index,) = [s for s in exp.plan.stages if s.kind == "dense-index"]
    assert index.params["shards"] == 3 and len(list((index.output / "index").glob("shard-*"))) == 3
    again = Experiment(tmp / "exp.toml", tmp / "work", quiet=True)
    assert again.plan.counts() == (len(again.plan.stages), 0)  # everything reused

    # A language's documents: a selection of the file's rows, sharded as the CLI shards those rows.
    mono = sample_experiment_head("shards", ["de"]).replace('setting = "mlir"', 'setting = "mono"')
    exp = run_experiment(tmp, mono, SYSTEM + "shards = 2\n", "mono")
    _subset(tmp / "emb", tmp / "emb-de", "de")
    _subset(tmp / "q", tmp / "q-de", "de")
    _same_as_cli(exp, "mono/de", _cli(tmp, tmp / "emb-de", tmp / "q-de", "de", ["--shards", "2"], []))


def test_shards_span_several_documents_files(tmp_path):
    """A NeuCLIR MLIR task over three documents files, each with its embeddings: the rows of the three,
    one file after another, sharded as the CLI shards one file holding them."""
    langs = ("de", "ru", "zh")
    root = tmp_path / "c"
    (root / "docs").mkdir(parents=True)
    docs: dict[str, list[str]] = {}
    for n, lang in enumerate(langs):
        mine = [d for d in DOCS if d["lang"] == lang]
        docs[lang] = [d["_id"] for d in mine]
        lines = "".join(json.dumps({"id": d["_id"], "text": d["text"], "lang": lang}) + "\n" for d in mine)
        (root / "docs" / f"{lang}.jsonl").write_text(lines, encoding="utf-8")
        _write(tmp_path / f"emb-{lang}", docs[lang], 10 + n)
    english = [q for q in QUERIES if q["lang"] == "en"]
    topics = [{"topic_id": q["_id"], "topics": [{"lang": "eng", "topic_title": q["text"]}]} for q in english]
    (root / "topics.jsonl").write_text("".join(json.dumps(t) + "\n" for t in topics), encoding="utf-8")
    (root / "mlir.txt").write_text(f"{english[0]['_id']} 0 {docs['de'][0]} 1\n", encoding="utf-8")
    _write(tmp_path / "q", [q["_id"] for q in english], 3)
    paths = ", ".join(f'{lang} = "{root}/docs/{lang}.jsonl"' for lang in langs)
    head = (
        f'[experiment]\nname = "files"\n\n[collections.c]\nformat = "neuclir"\ndocs = {{ {paths} }}\n'
        f'topics = "{root}/topics.jsonl"\nqrels = {{ mlir = "{root}/mlir.txt" }}\n\n'
        '[[tasks]]\ncollection = "c"\nsetting = "mlir"\n'
    )
    table = ", ".join(f'{lang} = "emb-{lang}"' for lang in langs)
    system = SYSTEM.replace('embeddings = "emb"', f"embeddings = {{ {table} }}", 1) + "shards = 4\n"
    exp = run_experiment(tmp_path, head, system)
    (task,) = exp.tasks
    order = [Path(s.path).name.split(".")[0] for s in task.docs.sources]
    assert sorted(order) == list(langs)
    np.save(tmp_path / "all.npy", np.concatenate([np.load(tmp_path / f"emb-{lang}.npy") for lang in order]))
    (tmp_path / "all.ids.txt").write_text("".join(i + "\n" for lang in order for i in docs[lang]))
    _same_as_cli(
        exp, task.label, _cli(tmp_path, tmp_path / "all", tmp_path / "q", "all", ["--shards", "4"], [])
    )


def test_a_sharded_encoding_gives_one_index_shard_per_embedding_shard(embeddings):
    """A ``clirkit encode --ray`` directory (written here as that command writes it) with ``shards``
    equal to its shard count is ``clirkit index dense --embeddings DIR``; another count cuts its rows."""
    tmp = embeddings
    ids = [d["_id"] for d in DOCS]
    matrix = np.load(tmp / "emb.npy")
    enc = tmp / "enc"
    enc.mkdir()
    bounds = [0, 100, 101, len(ids)]  # unequal, so that one shard per file differs from an even cut
    records = []
    for s, (a, b) in enumerate(zip(bounds, bounds[1:])):
        np.save(enc / f"shard-{s:04d}.npy", matrix[a:b])
        (enc / f"shard-{s:04d}.ids.txt").write_text("".join(i + "\n" for i in ids[a:b]), encoding="utf-8")
        records.append({"start": a, "end": b, "line": a, "rows": b - a, "done": True})
    state = {"format": "clirkit-encoded-shards", "version": 1, "shards": records}
    (enc / "encode.json").write_text(json.dumps(state), encoding="utf-8")
    _subset(tmp / "q", tmp / "q-en", "en")
    system = SYSTEM.replace('embeddings = "emb"', 'embeddings = "enc"', 1)
    exp = run_experiment(tmp, sample_experiment_head("enc", ["en"]), system + "shards = 3\n")
    built, run = tmp / "cli-enc", tmp / "cli-enc.trec"
    assert cli(["index", "dense", "--embeddings", str(enc), "--index", str(built), "--pq", "4",
                "--train-size", "150", "--quiet"]) == 0  # fmt: skip
    assert cli(["search", "dense", "--index", str(built), "--queries", str(tmp / "q-en.npy"), "--qids",
                str(tmp / "q-en.ids.txt"), "--output", str(run), "--k", "50", "--refine", "20", "--quiet"]) == 0  # fmt: skip
    _same_as_cli(exp, "mlir/en", built)
    (index,) = [s for s in exp.plan.stages if s.kind == "dense-index"]
    sizes = [shard.num_docs for shard in read_manifest(index.output / "index").shards]
    assert sizes == [100, 1, len(ids) - 101]

    exp = run_experiment(tmp, sample_experiment_head("enc", ["en"]), system + "shards = 2\n", "two")
    (index,) = [s for s in exp.plan.stages if s.kind == "dense-index"]
    _same_as_cli(exp, "mlir/en", _cli(tmp, tmp / "emb", tmp / "q-en", "two", ["--shards", "2"], []))


@pytest.mark.parametrize(
    "extra, key, message",
    [
        ("ray = true\n", "ray", "builds and searches a sharded index: give shards = N"),
        ('shards = 2\nray = " "\n', "ray", "must be true or a cluster address"),
        ("shards = 0\n", "shards", "must be > 0"),
        ("shards = 2\nray = 3\n", "ray", "must be bool or str"),
    ],
)
def test_bad_shard_keys_name_the_key(embeddings, extra, key, message):
    with pytest.raises(ExperimentError, match=rf"systems\.dense\.{key}: .*{message}"):
        run_experiment(embeddings, sample_experiment_head("bad", ["en"]), SYSTEM + extra)


def test_more_shards_than_rows_is_an_error_naming_the_key(embeddings):
    many = f"shards = {len(DOCS) + 1}\n"
    with pytest.raises(
        ExperimentError, match=rf"systems\.dense\.shards: {len(DOCS) + 1} shards for the {len(DOCS)} rows"
    ):
        run_experiment(embeddings, sample_experiment_head("many", ["en"]), SYSTEM + many)


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    # Two CPUs: the shard actors ask for a fraction of a CPU each.
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_ray_builds_and_searches_as_the_cli(embeddings, local_ray, monkeypatch):
    import clirkit.distributed.cluster as cluster

    entered = []
    real = cluster.connected

    def connected(address):
        entered.append(address)
        return real(address)

    monkeypatch.setattr(cluster, "connected", connected)
    tmp = embeddings
    exp = run_experiment(
        tmp, sample_experiment_head("ray", ["de", "en"]), SYSTEM + "shards = 3\nray = true\n"
    )
    assert entered == [True]  # one connection for the build and both searches
    _subset(tmp / "q", tmp / "q-en", "en")
    _same_as_cli(
        exp, "mlir/en", _cli(tmp, tmp / "emb", tmp / "q-en", "ray", ["--shards", "3", "--ray"], ["--ray"])
    )
    local = Experiment(tmp / "exp.toml", tmp / "work", quiet=True)
    assert local.plan.counts() == (len(local.plan.stages), 0)
    # Without Ray the same stages are found done: where the shards ran is not in any key.
    (tmp / "local.toml").write_text((tmp / "exp.toml").read_text().replace("ray = true\n", ""))
    assert Experiment(tmp / "local.toml", tmp / "work", quiet=True).plan.counts()[1] == 0


@pytest.fixture
def model_collection(tmp_path):
    """The tiny ONNX encoder and a BEIR folder of 300 documents and 6 queries in its vocabulary."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    import tiny_transformer

    model = tiny_transformer.build(tmp_path / "model")
    data = tmp_path / "beir"
    (data / "qrels").mkdir(parents=True)
    texts = tiny_transformer.texts(300, seed=21)
    (data / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts))
    )
    questions = tiny_transformer.texts(6, seed=22)
    (data / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": t}) + "\n" for i, t in enumerate(questions))
    )
    (data / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(6))
    )
    return model, data


def _model_experiment(tmp_path: Path, model: Path, data: Path, keys: str) -> Path:
    path = tmp_path / "model.toml"
    path.write_text(
        f'[experiment]\nname = "enc"\nhits = 20\nthreads = 1\n\n[collections.c]\npath = "{data}"\n\n'
        f'[systems.dense]\nkind = "dense"\nmodel = "{model}"\nfields = ["text"]\n{keys}\n'
        '[evaluation]\nmeasures = ["nDCG@10"]\n',
        encoding="utf-8",
    )
    return path


def test_encoded_shards_equal_the_cli(tmp_path, model_collection):
    model, data = model_collection
    keys = 'pq = 4\nvector_dtype = "float16"\nshards = 2\n'
    exp = Experiment(_model_experiment(tmp_path, model, data, keys), tmp_path / "work", quiet=True)
    exp.run(log=io.StringIO())
    common = ["--threads", "1", "--quiet"]
    for what, out in (("--corpus", "docs"), ("--queries", "q")):
        file = data / ("corpus.jsonl" if out == "docs" else "queries.jsonl")
        assert cli(["encode", "--model", str(model), what, str(file), "--fields", "text", "--output",
                    str(tmp_path / out), *common]) == 0  # fmt: skip
    built, run = tmp_path / "cli", tmp_path / "cli.trec"
    assert cli(["index", "dense", "--embeddings", str(tmp_path / "docs.npy"), "--ids", str(tmp_path / "docs.ids.txt"),
                "--index", str(built), "--pq", "4", "--vector-dtype", "float16", "--shards", "2", *common]) == 0  # fmt: skip
    assert cli(["search", "dense", "--index", str(built), "--queries", str(tmp_path / "q.npy"), "--qids",
                str(tmp_path / "q.ids.txt"), "--k", "20", "--output", str(run), *common]) == 0  # fmt: skip
    (index,) = [s for s in exp.plan.stages if s.kind == "dense-index"]
    assert _files(index.output / "index") == _files(built)
    assert DenseIndex.open(built / "shard-0001").vector_dtype == "float16"
    assert (exp.plan.runs["dense"]["c"].output / "run.trec").read_bytes() == run.read_bytes()
    # The sharding is in the index stage's key only: the encodings are shared with an unsharded system.
    plain = Experiment(
        _model_experiment(tmp_path, model, data, 'pq = 4\nvector_dtype = "float16"\n'),
        tmp_path / "work",
        quiet=True,
    )
    digests = {s.kind: s.digest for s in plain.plan.stages}
    assert {s.kind: s.digest for s in exp.plan.stages if s.kind.startswith("encode")} == {
        k: v for k, v in digests.items() if k.startswith("encode")
    }
    assert index.digest != digests["dense-index"] and plain.plan.counts()[1] > 0


def test_shards_with_passages_is_refused(tmp_path, model_collection):
    model, data = model_collection
    path = _model_experiment(tmp_path, model, data, "passages = [16, 8]\nshards = 2\n")
    with pytest.raises(ExperimentError, match=r"systems\.dense\.shards: a sharded index has no MaxP search"):
        Experiment(path, tmp_path / "work", quiet=True)
