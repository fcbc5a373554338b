"""Systems over precomputed inputs (``embeddings``, ``vectors``, ``tokens`` instead of ``model``): each
run equals the CLI's index + search commands on the same files, byte for byte, whether the task reads
every row of the files in place or the rows of its own documents and queries; stages are keyed by the
files' content; bad keys are errors naming them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from clirkit.cli import main as cli
from clirkit.experiment import Experiment
from clirkit.experiment.toml_source import ExperimentError
from conftest import SAMPLE, run_experiment, sample_experiment_head


def _records(name: str) -> list[dict]:
    return [json.loads(line) for line in (SAMPLE / name).read_text(encoding="utf-8").splitlines()]


DOCS = _records("corpus.jsonl")
QUERIES = _records("queries.jsonl")


def _write_embeddings(prefix: Path, ids: list[str], rng: np.random.Generator, dtype=np.float16) -> None:
    matrix = rng.standard_normal((len(ids), 16)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    np.save(f"{prefix}.npy", matrix.astype(dtype))
    Path(f"{prefix}.ids.txt").write_text("".join(i + "\n" for i in ids), encoding="utf-8")


def _subset(prefix: Path, out: Path, keep) -> None:
    """``out``: the rows of the embeddings ``prefix`` whose id passes ``keep`` (the CLI's input)."""
    ids = Path(f"{prefix}.ids.txt").read_text(encoding="utf-8").splitlines()
    rows = [n for n, i in enumerate(ids) if keep(i)]
    np.save(f"{out}.npy", np.load(f"{prefix}.npy")[rows])
    Path(f"{out}.ids.txt").write_text("".join(ids[n] + "\n" for n in rows), encoding="utf-8")


def _mono_head(name: str, langs) -> str:
    """The sample's ``mono`` tasks: each language's questions against that language's documents."""
    return sample_experiment_head(name, langs).replace('setting = "mlir"', 'setting = "mono"')


def _lang(record_id: str) -> str:
    doc = next((d for d in DOCS if d["_id"] == record_id), None)
    return doc["lang"] if doc else next(q["lang"] for q in QUERIES if q["_id"] == record_id)


def _dense_cli(tmp_path: Path, docs: Path, queries: Path, name: str) -> bytes:
    index, run = tmp_path / f"cli-{name}", tmp_path / f"cli-{name}.trec"
    assert cli(["index", "dense", "--embeddings", f"{docs}.npy", "--ids", f"{docs}.ids.txt",
                "--index", str(index), "--pq", "4", "--quiet"]) == 0  # fmt: skip
    assert cli(["search", "dense", "--index", str(index), "--queries", f"{queries}.npy", "--qids",
                f"{queries}.ids.txt", "--output", str(run), "--k", "50", "--refine", "20",
                "--quiet"]) == 0  # fmt: skip
    return run.read_bytes()


DENSE = """
[systems.dense]
kind = "dense"
embeddings = "emb"
query_embeddings = "q"
pq = 4
refine = 20
hits = 50
"""


def test_dense_embeddings_equal_the_cli_in_place_and_by_language(tmp_path):
    rng = np.random.default_rng(7)
    _write_embeddings(tmp_path / "emb", [d["_id"] for d in DOCS], rng)
    _write_embeddings(tmp_path / "q", [q["_id"] for q in QUERIES], rng)
    # every document, the English questions: the embeddings read in place, the queries' rows kept
    exp = run_experiment(tmp_path, sample_experiment_head("pre", ["en"]), DENSE)
    _subset(tmp_path / "q", tmp_path / "q-en", lambda i: _lang(i) == "en")
    expected = _dense_cli(tmp_path, tmp_path / "emb", tmp_path / "q-en", "all")
    assert (exp.plan.runs["dense"]["mlir/en"].output / "run.trec").read_bytes() == expected
    index = next(s for s in exp.plan.stages if s.kind == "dense-index")
    assert "docs" not in index.identity  # keyed by the embeddings alone
    # a language's documents: the rows of its documents, streamed from the same file
    exp = run_experiment(tmp_path, _mono_head("pre", ["de"]), DENSE, "mono")
    _subset(tmp_path / "emb", tmp_path / "emb-de", lambda i: _lang(i) == "de")
    _subset(tmp_path / "q", tmp_path / "q-de", lambda i: _lang(i) == "de")
    expected = _dense_cli(tmp_path, tmp_path / "emb-de", tmp_path / "q-de", "de")
    assert (exp.plan.runs["dense"]["mono/de"].output / "run.trec").read_bytes() == expected


def test_dense_stages_follow_the_files_content(tmp_path):
    rng = np.random.default_rng(3)
    _write_embeddings(tmp_path / "emb", [d["_id"] for d in DOCS], rng)
    _write_embeddings(tmp_path / "q", [q["_id"] for q in QUERIES], rng)
    run_experiment(tmp_path, sample_experiment_head("pre", ["en"]), DENSE)
    again = Experiment(tmp_path / "exp.toml", tmp_path / "work", quiet=True)
    assert again.plan.counts() == (len(again.plan.stages), 0)
    _write_embeddings(tmp_path / "q", [q["_id"] for q in QUERIES], rng)  # new query vectors
    changed = Experiment(tmp_path / "exp.toml", tmp_path / "work", quiet=True)
    assert changed.plan.counts()[1] == 2  # the search and its evaluation, not the index
    _write_embeddings(tmp_path / "emb", [d["_id"] for d in DOCS], rng)
    changed = Experiment(tmp_path / "exp.toml", tmp_path / "work", quiet=True)
    assert changed.plan.counts()[1] == 3


def test_dense_table_by_language_and_missing_queries(tmp_path):
    rng = np.random.default_rng(5)
    _write_embeddings(tmp_path / "emb", [d["_id"] for d in DOCS], rng)
    _write_embeddings(tmp_path / "q", [q["_id"] for q in QUERIES], rng)
    _subset(tmp_path / "q", tmp_path / "q-de", lambda i: _lang(i) == "de")
    table = DENSE.replace('query_embeddings = "q"', 'query_embeddings = { de = "q-de" }')
    exp = run_experiment(tmp_path, sample_experiment_head("pre", ["de"]), table)
    expected = _dense_cli(tmp_path, tmp_path / "emb", tmp_path / "q-de", "de-all")
    assert (exp.plan.runs["dense"]["mlir/de"].output / "run.trec").read_bytes() == expected
    with pytest.raises(
        ExperimentError, match=r"query_embeddings: task mlir/en asks queries in en; entries: de"
    ):
        run_experiment(tmp_path, sample_experiment_head("pre", ["en"]), table, "en")
    _subset(tmp_path / "q", tmp_path / "q-few", lambda i: _lang(i) == "en" and not i.startswith("5"))
    few = DENSE.replace('"q"', '"q-few"')
    with pytest.raises(ExperimentError, match=r"q-few: no vector for query '5.*' of task mlir/en"):
        run_experiment(tmp_path, sample_experiment_head("pre", ["en"]), few, "few")


def _vectors(rng: np.random.Generator, ids: list[str]) -> list[dict]:
    vocab = [f"t{n}" for n in range(40)]
    out = []
    for i in ids:
        terms = rng.choice(len(vocab), size=int(rng.integers(1, 8)), replace=False)
        out.append({"id": i, "vector": {vocab[t]: round(float(rng.uniform(0.05, 3.0)), 4) for t in terms}})
    return out


def _jsonl(path: Path, records: list[dict], compress: bool = False) -> Path:
    text = "".join(json.dumps(r) + "\n" for r in records).encode("utf-8")
    path.write_bytes(gzip.compress(text) if compress else text)
    return path


def test_impact_vectors_equal_the_cli(tmp_path):
    rng = np.random.default_rng(11)
    docs = _vectors(rng, [d["_id"] for d in DOCS])
    queries = _vectors(rng, [q["_id"] for q in QUERIES])
    _jsonl(tmp_path / "docs.vectors.jsonl.gz", docs, compress=True)  # through the input layer
    _jsonl(tmp_path / "queries.vectors.jsonl", queries)
    systems = """
[systems.splade]
kind = "impact"
vectors = "docs.vectors.jsonl.gz"
query_vectors = "queries.vectors.jsonl"
hits = 50
"""
    for name, head, task, keep_doc, keep_query in [
        ("all", sample_experiment_head("pre", ["en"]), "mlir/en", lambda i: True, lambda i: _lang(i) == "en"),
        ("de", _mono_head("pre", ["de"]), "mono/de", lambda i: _lang(i) == "de", lambda i: _lang(i) == "de"),
    ]:
        exp = run_experiment(tmp_path, head, systems, name)
        doc_file = _jsonl(tmp_path / f"d-{name}.jsonl", [d for d in docs if keep_doc(d["id"])])
        query_file = _jsonl(tmp_path / f"q-{name}.jsonl", [q for q in queries if keep_query(q["id"])])
        index, run = tmp_path / f"cli-{name}", tmp_path / f"cli-{name}.trec"
        assert cli(["index", "impact", "--vectors", str(doc_file), "--index", str(index), "--quiet"]) == 0
        assert cli(["search", "impact", "--index", str(index), "--queries", str(query_file),
                    "--output", str(run), "--k", "50", "--quiet"]) == 0  # fmt: skip
        assert (exp.plan.runs["splade"][task].output / "run.trec").read_bytes() == run.read_bytes(), name


def _tokens(prefix: Path, ids: list[str], rng: np.random.Generator) -> None:
    lengths = rng.integers(2, 7, size=len(ids))
    tokens = rng.standard_normal((int(lengths.sum()), 8)).astype(np.float32)
    tokens /= np.linalg.norm(tokens, axis=1, keepdims=True)
    np.save(f"{prefix}.tokens.npy", tokens)
    np.save(f"{prefix}.offsets.npy", np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
    Path(f"{prefix}.ids.txt").write_text("".join(i + "\n" for i in ids), encoding="utf-8")


def test_multivector_tokens_equal_the_cli(tmp_path):
    rng = np.random.default_rng(13)
    _tokens(tmp_path / "docs", [d["_id"] for d in DOCS], rng)
    en = [q["_id"] for q in QUERIES if q["lang"] == "en"]
    _tokens(tmp_path / "queries", en, rng)
    systems = """
[systems.late]
kind = "multivector"
tokens = "docs"
query_tokens = "queries"
centroids = 16
hits = 50
"""
    exp = run_experiment(tmp_path, sample_experiment_head("pre", ["en"]), systems)
    expected = _multivector_cli(tmp_path, tmp_path / "docs", tmp_path / "queries", 16)
    assert (exp.plan.runs["late"]["mlir/en"].output / "run.trec").read_bytes() == expected


def _multivector_cli(tmp_path: Path, docs: Path, queries: Path, centroids: int) -> bytes:
    """The run of ``clirkit index multivector`` then ``clirkit search multivector`` (k = 50)."""
    index, run = tmp_path / f"cli-{docs.name}", tmp_path / f"cli-{docs.name}.trec"
    assert cli(["index", "multivector", "--embeddings", str(docs), "--index", str(index),
                "--centroids", str(centroids), "--quiet"]) == 0  # fmt: skip
    assert cli(["search", "multivector", "--index", str(index), "--queries", str(queries),
                "--output", str(run), "--k", "50", "--quiet"]) == 0  # fmt: skip
    return run.read_bytes()


def test_multivector_tokens_of_a_language_are_indexed_in_place_as_the_cli_and_the_copying_build(tmp_path):
    from clirkit.encoders.tokens import load_tokens
    from clirkit.experiment.systems.multivector import select_items
    from clirkit.multivector import MultiVectorIndex

    rng = np.random.default_rng(17)
    _tokens(tmp_path / "docs", [d["_id"] for d in DOCS], rng)
    _tokens(tmp_path / "queries", [q["_id"] for q in QUERIES], rng)
    systems = '[systems.late]\nkind = "multivector"\ntokens = "docs"\nquery_tokens = "queries"\ncentroids = 8\nhits = 50\n'
    exp = run_experiment(tmp_path, _mono_head("pre", ["de"]), systems, "mono")
    index = next(s for s in exp.plan.stages if s.kind == "multivector-index").output / "index"
    # the index the experiment wrote before it read token files in place: the language's items copied
    tokens, offsets, ids = load_tokens(tmp_path / "docs")
    kept = select_items(tokens, offsets, ids, [_lang(i) == "de" for i in ids])
    MultiVectorIndex.build(*kept, tmp_path / "copied", centroids=8, quiet=True)
    assert {p.name: p.read_bytes() for p in index.iterdir()} == {
        p.name: p.read_bytes() for p in (tmp_path / "copied").iterdir()
    }
    # and the CLI on the language's token files
    for name in ("docs", "queries"):
        tokens, offsets, ids = load_tokens(tmp_path / name)
        part, part_offsets, part_ids = select_items(tokens, offsets, ids, [_lang(i) == "de" for i in ids])
        np.save(f"{tmp_path / name}-de.tokens.npy", part)
        np.save(f"{tmp_path / name}-de.offsets.npy", part_offsets.astype(np.int64))
        Path(f"{tmp_path / name}-de.ids.txt").write_text(
            "".join(i + "\n" for i in part_ids), encoding="utf-8"
        )
    expected = _multivector_cli(tmp_path, tmp_path / "docs-de", tmp_path / "queries-de", 8)
    assert (exp.plan.runs["late"]["mono/de"].output / "run.trec").read_bytes() == expected


@pytest.mark.parametrize(
    ("body", "where", "message"),
    [
        (
            'embeddings = "nope"\nquery_embeddings = "nope"',
            "systems.x.embeddings",
            "file not found: .*nope.npy",
        ),
        (
            'embeddings = "emb"',
            "systems.x",
            "embeddings and query_embeddings go together: missing query_embeddings",
        ),
        (
            'embeddings = "emb"\nquery_embeddings = "emb"\nmodel = "m"',
            "systems.x.model",
            "give model or embeddings",
        ),
        (
            'embeddings = "emb"\nquery_embeddings = "emb"\nfields = ["text"]',
            "systems.x.fields",
            "applies to encoding with a model",
        ),
        ('embeddings = { de = 3 }\nquery_embeddings = "emb"', "systems.x.embeddings.de", "must be a path"),
        ("pq = 4", "systems.x", "needs model = DIR, or embeddings and query_embeddings"),
    ],
)
def test_bad_precomputed_keys_name_the_key(tmp_path, body, where, message):
    _write_embeddings(tmp_path / "emb", ["a"], np.random.default_rng(0))
    path = tmp_path / "exp.toml"
    path.write_text(
        sample_experiment_head("bad", ["en"]) + f'\n[systems.x]\nkind = "dense"\n{body}\n', encoding="utf-8"
    )
    with pytest.raises(ExperimentError, match=message) as err:
        Experiment(path, tmp_path / "work", quiet=True)
    assert where in str(err.value)
