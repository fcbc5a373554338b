"""Index build options of the CLI as experiment keys. ``memory_mb`` of BM25, impact and dense systems is the CLI's ``--memory-mb`` (postings held in memory
before a sorted run is spilled; a dense build's rows read at a time): the experiment's index equals
``clirkit index bm25/impact/dense --memory-mb N``'s, the budget reaches the build, and a BM25 index (whose
manifest records its budget) is keyed by it. ``keep_first_duplicate`` of a BM25 system is ``clirkit index
bm25 --keep-first-duplicate``."""

from __future__ import annotations

import json
from pathlib import Path

import clirkit.impact
from clirkit.cli import main as cli
from clirkit.experiment import Experiment
from conftest import SAMPLE, bm25_system, sample_experiment_head


def _index_files(index: Path) -> dict[str, object]:
    """The index's files, its manifest without the corpus it names (and so its checksum)."""
    files: dict[str, object] = {p.name: p.read_bytes() for p in index.iterdir() if p.name != "meta.json"}
    meta = json.loads((index / "meta.json").read_text(encoding="utf-8"))
    for section in (meta, meta.get("build", {})):
        for name in ("corpus", "vectors", "inputs", "checksum"):
            section.pop(name, None)
    files["meta.json"] = meta
    return files


def _ids(name: str) -> list[str]:
    """The ids of the sample's ``name`` file (``corpus``, ``queries``)."""
    lines = (SAMPLE / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["_id"] for line in lines]


def _budgets(monkeypatch, owner: type, method: str, keyword: str) -> list[int]:
    """The ``keyword`` argument of every call of ``owner.method`` (a static method) from now on."""
    seen: list[int] = []
    real = getattr(owner, method)

    def spy(*args, **kwargs):
        seen.append(kwargs[keyword])
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, method, staticmethod(spy))
    return seen


def _run(tmp_path: Path, name: str, text: str) -> Experiment:
    path = tmp_path / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    exp = Experiment(path, tmp_path / name, quiet=True)
    exp.run()
    return exp


def test_bm25_memory_mb_is_the_cli_budget_and_keys_the_index(tmp_path):
    head = sample_experiment_head("memory", ["en"])
    small = _run(tmp_path, "small", head + bm25_system("bm25") + "memory_mb = 1\n")
    default = _run(tmp_path, "default", head + bm25_system("bm25"))
    (index,) = [s for s in small.plan.stages if s.kind == "bm25-index"]
    (other,) = [s for s in default.plan.stages if s.kind == "bm25-index"]
    assert index.digest != other.digest
    cli_index = tmp_path / "cli"
    assert cli(["index", "bm25", "--corpus", str(SAMPLE / "corpus.jsonl"), "--index", str(cli_index),
                "--lang-field", "lang", "--fields", "text", "--memory-mb", "1", "--quiet"]) == 0  # fmt: skip
    got = _index_files(index.output / "index")
    assert got == _index_files(cli_index)
    assert got["meta.json"]["build"]["memory_budget_bytes"] == 1 << 20


def test_impact_memory_mb_reaches_the_build_and_equals_the_cli(tmp_path, monkeypatch):
    ids, qids = _ids("corpus"), _ids("queries")
    docs = tmp_path / "docs.vectors.jsonl"
    docs.write_text(
        "".join(json.dumps({"id": d, "vector": {f"t{(n * 7 + j) % 31}": 1.0 + j for j in range(n % 5 + 1)}}) + "\n"
                for n, d in enumerate(ids)),
        encoding="utf-8",
    )  # fmt: skip
    queries = tmp_path / "queries.vectors.jsonl"
    queries.write_text(
        "".join(json.dumps({"id": q, "vector": {f"t{n % 31}": 1.0}}) + "\n" for n, q in enumerate(qids)),
        encoding="utf-8",
    )
    budgets = _budgets(monkeypatch, clirkit.impact.ImpactIndex, "build", "memory_budget_mb")
    system = (
        f'[systems.splade]\nkind = "impact"\nvectors = "{docs}"\nquery_vectors = "{queries}"\nmemory_mb = 1\n'
    )
    exp = _run(tmp_path, "impact", sample_experiment_head("memory", ["en"]) + system)
    assert budgets == [1]
    (index,) = [s for s in exp.plan.stages if s.kind == "impact-index"]
    cli_index = tmp_path / "cli"
    assert cli(["index", "impact", "--vectors", str(docs), "--index", str(cli_index), "--memory-mb", "1",
                "--quiet"]) == 0  # fmt: skip
    assert _index_files(index.output / "index") == _index_files(cli_index)


def test_dense_memory_mb_reaches_the_build_and_equals_the_cli(tmp_path, monkeypatch):
    import clirkit.dense
    import numpy as np

    ids, qids = _ids("corpus"), _ids("queries")
    rng = np.random.default_rng(5)
    for prefix, names in (("emb", ids), ("qemb", qids)):
        np.save(tmp_path / f"{prefix}.npy", rng.standard_normal((len(names), 16)).astype(np.float32))
        (tmp_path / f"{prefix}.ids.txt").write_text("".join(n + "\n" for n in names), encoding="utf-8")
    budgets = _budgets(monkeypatch, clirkit.dense.DenseIndex, "build_file", "memory_mb")
    system = (
        f'[systems.dense]\nkind = "dense"\nembeddings = "{tmp_path / "emb"}"\n'
        f'query_embeddings = "{tmp_path / "qemb"}"\npq = 4\nmemory_mb = 1\n'
    )
    exp = _run(tmp_path, "dense", sample_experiment_head("memory", ["en"]) + system)
    assert budgets == [1]
    (index,) = [s for s in exp.plan.stages if s.kind == "dense-index"]
    cli_index = tmp_path / "cli"
    assert cli(["index", "dense", "--embeddings", str(tmp_path / "emb.npy"), "--ids", str(tmp_path / "emb.ids.txt"),
                "--index", str(cli_index), "--pq", "4", "--memory-mb", "1", "--quiet"]) == 0  # fmt: skip
    assert _index_files(index.output / "index") == _index_files(cli_index)


def test_bm25_keep_first_duplicate_is_the_cli_option(tmp_path):
    import shutil

    import pytest
    from clirkit import DuplicateIdError

    coll = tmp_path / "coll"
    shutil.copytree(SAMPLE, coll)
    first = json.loads((coll / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[0])
    with open(coll / "corpus.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({**first, "text": "a later copy, skipped"}) + "\n")
    head = sample_experiment_head("dup", ["en"]).replace(str(SAMPLE), str(coll))
    with pytest.raises(DuplicateIdError, match=f"duplicate id '{first['_id']}'"):
        _run(tmp_path, "strict", head + bm25_system("bm25"))
    exp = _run(tmp_path, "kept", head + bm25_system("bm25") + "keep_first_duplicate = true\n")
    (index,) = [s for s in exp.plan.stages if s.kind == "bm25-index"]
    cli_index = tmp_path / "cli"
    assert cli(["index", "bm25", "--corpus", str(coll / "corpus.jsonl"), "--index", str(cli_index),
                "--lang-field", "lang", "--fields", "text", "--keep-first-duplicate", "--quiet"]) == 0  # fmt: skip
    got = _index_files(index.output / "index")
    assert got == _index_files(cli_index) and got["meta.json"]["build"]["skipped_duplicates"] == 1
