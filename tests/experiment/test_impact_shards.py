"""``shards = N`` (and ``ray``) on impact systems are ``clirkit index impact --shards N [--ray]`` and
``clirkit search impact [--ray]``: over precomputed vectors, the exact run is the CLI's sharded run
and the single index's, the approximate run and its audit are the CLI's; ``shards`` is in the index
stage's key; bad values are errors naming the key."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest
from clirkit.cli import main as cli
from clirkit.distributed.sharded import read_manifest
from clirkit.experiment import Experiment
from clirkit.experiment.toml_source import ExperimentError
from conftest import SAMPLE, sample_experiment_head


def _vectors(tmp_path: Path) -> None:
    rng = random.Random(7)
    vocab = [f"t{n}" for n in range(30)]

    def lines(ids: list[str]) -> str:
        rows = [{"id": i, "vector": {t: rng.randint(1, 6) / 2 for t in rng.sample(vocab, 5)}} for i in ids]
        return "".join(json.dumps(r) + "\n" for r in rows)

    records = [json.loads(line) for line in (SAMPLE / "corpus.jsonl").read_text().splitlines()]
    queries = [json.loads(line) for line in (SAMPLE / "queries.jsonl").read_text().splitlines()]
    (tmp_path / "docs.vectors.jsonl").write_text(lines([r["_id"] for r in records]), encoding="utf-8")
    english = [r["_id"] for r in queries if r["lang"] == "en"]
    (tmp_path / "queries.vectors.jsonl").write_text(lines(english), encoding="utf-8")


def _experiment(tmp_path: Path, extra: str) -> Path:
    systems = f"""
[systems.splade]
kind = "impact"
vectors = "docs.vectors.jsonl"
query_vectors = "queries.vectors.jsonl"
hits = 30
{extra}
"""
    path = tmp_path / "shards.toml"
    path.write_text(
        sample_experiment_head("shards", ["en"]) + systems + '\n[evaluation]\nmeasures = ["nDCG@10"]\n'
    )
    return path


def test_sharded_exact_and_approximate_runs_equal_the_cli(tmp_path):
    _vectors(tmp_path)
    docs, queries = str(tmp_path / "docs.vectors.jsonl"), str(tmp_path / "queries.vectors.jsonl")
    assert cli(["index", "impact", "--vectors", docs, "--index", str(tmp_path / "single"), "--quiet"]) == 0
    assert cli(["index", "impact", "--vectors", docs, "--index", str(tmp_path / "sharded"), "--shards", "3",
                "--quiet"]) == 0  # fmt: skip
    search = ["search", "impact", "--queries", queries, "--k", "30", "--quiet"]
    assert cli([*search, "--index", str(tmp_path / "single"), "--output", str(tmp_path / "single.trec")]) == 0
    assert (
        cli([*search, "--index", str(tmp_path / "sharded"), "--output", str(tmp_path / "sharded.trec")]) == 0
    )
    approximate = ["--approximate", "--postings-per-term", "3", "--candidates", "40", "--audit", "8",
                   "--audit-seed", "5"]  # fmt: skip
    assert cli([*search, "--index", str(tmp_path / "sharded"), "--output", str(tmp_path / "approx.trec"),
                *approximate]) == 0  # fmt: skip

    exact = Experiment(_experiment(tmp_path, "shards = 3"), tmp_path / "work", quiet=True)
    exact.run(log=io.StringIO())
    stage = exact.plan.runs["splade"]["mlir/en"]
    index = stage.inputs[0]
    assert index.params["shards"] == 3
    assert read_manifest(index.output / "index").kind == "impact"
    assert (stage.output / "run.trec").read_bytes() == (tmp_path / "sharded.trec").read_bytes()
    assert (stage.output / "run.trec").read_bytes() == (tmp_path / "single.trec").read_bytes()

    table = "approximate = { postings_per_term = 3, candidates = 40, audit = 8, seed = 5 }"
    approx = Experiment(_experiment(tmp_path, f"shards = 3\n{table}"), tmp_path / "work2", quiet=True)
    approx.run(log=io.StringIO())
    stage = approx.plan.runs["splade"]["mlir/en"]
    assert (stage.output / "run.trec").read_bytes() == (tmp_path / "approx.trec").read_bytes()
    audit = json.loads((stage.output / "audit.json").read_text())
    sidecar = json.loads((tmp_path / "approx.trec.audit.json").read_text())
    assert {k: sidecar[k] for k in audit} == audit
    assert audit["audited"] == 8 and audit["accuracy_at_10"] < 1.0


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ("ray = true", "ray"),
        ("shards = 0", "shards"),
        ('shards = 2\nray = " "', "ray"),
        ("shards = 2\napproximate = { target_accuracy = 0.9 }", "approximate"),
    ],
)
def test_bad_shard_keys_name_the_key(tmp_path, extra, key):
    _vectors(tmp_path)
    with pytest.raises(ExperimentError, match=key):
        Experiment(_experiment(tmp_path, extra), tmp_path / "work", quiet=True)
