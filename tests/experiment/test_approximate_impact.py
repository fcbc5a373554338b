"""An impact system with ``approximate = { ... }``: its search stage key holds the table (the exact
system's does not change), its audit lands beside the run and in results.json and the table."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest
from clirkit.cli import main as cli
from clirkit.experiment import Experiment
from clirkit.experiment.toml_source import ExperimentError
from conftest import sample_experiment_head

SAMPLE = Path(__file__).resolve().parents[2] / "python" / "clirkit" / "data" / "sample"


def _config(tmp_path: Path, model: Path, approximate: str) -> Path:
    text = (
        sample_experiment_head("approximate", ["en"], hits=20)
        + f"""
[systems.exact]
kind = "impact"
model = "{model}"

[systems.approx]
kind = "impact"
model = "{model}"
approximate = {approximate}

[evaluation]
measures = ["nDCG@10"]
"""
    )
    path = tmp_path / "approximate.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_approximate_impact_system_is_audited_in_the_results(tmp_path, shared):
    model = shared("models", "splade-tiny-en")
    table = "{ postings_per_term = 3, query_terms = 2, candidates = 10, audit = 15, seed = 4 }"
    exp = Experiment(_config(tmp_path, model, table), tmp_path / "work", quiet=True)
    exact_run = exp.plan.runs["exact"]["mlir/en"]
    approx_run = exp.plan.runs["approx"]["mlir/en"]
    assert "approximate" not in exact_run.params
    assert approx_run.params["approximate"]["postings_per_term"] == 3
    results = exp.run(log=io.StringIO())
    audit = json.loads((approx_run.output / "audit.json").read_text())
    assert audit["audited"] == 15 and audit["seed"] == 4
    assert not (exact_run.output / "audit.json").exists()
    rows = json.loads((tmp_path / "work" / "results.json").read_text())
    audited = {(r["system"], r["measure"]): r["value"] for r in rows if r["measure"].startswith("audit")}
    assert audited == {
        ("approx", "audit Accuracy@10"): audit["accuracy_at_10"],
        ("approx", "audit score gap"): audit["score_gap"],
    }
    assert audit["accuracy_at_10"] < 1.0  # pruned to 3 postings a term, it misses documents
    assert "### audit Accuracy@10" in (tmp_path / "work" / "table.md").read_text()
    assert results.value("approx", "mlir/en", "audit Accuracy@10") == audit["accuracy_at_10"]


def test_a_bad_approximate_table_names_its_key(tmp_path, shared):
    model = shared("models", "splade-tiny-en")
    for table, key in (
        ("{ target_accuracy = 1.5 }", "target_accuracy"),
        ("{ heap_factor = 0.9 }", "heap_factor"),
        ("{ candidates = 0 }", "candidates"),
    ):
        with pytest.raises(ExperimentError, match=key):
            Experiment(_config(tmp_path, model, table), tmp_path / "work", quiet=True)


@pytest.mark.parametrize(
    ("table", "flags"),
    [
        ("candidates = 60", ["--candidates", "60"]),
        # Calibrated: the same settings chosen, the calibration recorded beside the audit.
        (
            "target_accuracy = 0.8, calibration_sample = 10",
            ["--target-accuracy", "0.8", "--calibration-sample", "10"],
        ),
    ],
)
def test_precomputed_vectors_approximate_run_and_audit_equal_the_cli(tmp_path, table, flags):
    rng = random.Random(3)
    vocab = [f"t{n}" for n in range(40)]

    def vectors(ids: list[str]) -> str:
        rows = [
            {"id": i, "vector": {t: rng.randint(1, 300) / 100 for t in rng.sample(vocab, 6)}} for i in ids
        ]
        return "".join(json.dumps(r) + "\n" for r in rows)

    docs = [json.loads(line)["_id"] for line in (SAMPLE / "corpus.jsonl").read_text().splitlines()]
    queries = [
        r["_id"]
        for r in map(json.loads, (SAMPLE / "queries.jsonl").read_text().splitlines())
        if r["lang"] == "en"
    ]
    (tmp_path / "docs.vectors.jsonl").write_text(vectors(docs), encoding="utf-8")
    (tmp_path / "queries.vectors.jsonl").write_text(vectors(queries), encoding="utf-8")
    systems = """
[systems.splade]
kind = "impact"
vectors = "docs.vectors.jsonl"
query_vectors = "queries.vectors.jsonl"
hits = 50
approximate = { postings_per_term = 4, TABLE, audit = 12, seed = 9 }
""".replace("TABLE", table)
    path = tmp_path / "pre.toml"
    path.write_text(
        sample_experiment_head("pre", ["en"]) + systems + '\n[evaluation]\nmeasures = ["nDCG@10"]\n'
    )
    exp = Experiment(path, tmp_path / "work", quiet=True)
    exp.run(log=io.StringIO())
    stage = exp.plan.runs["splade"]["mlir/en"]
    index, run = tmp_path / "cli-index", tmp_path / "cli.trec"
    assert (
        cli(["index", "impact", "--vectors", str(tmp_path / "docs.vectors.jsonl"), "--index", str(index)])
        == 0
    )
    assert cli(["search", "impact", "--index", str(index), "--queries", str(tmp_path / "queries.vectors.jsonl"),
                "--output", str(run), "--k", "50", "--quiet", "--approximate", "--postings-per-term", "4",
                *flags, "--audit", "12", "--audit-seed", "9"]) == 0  # fmt: skip
    assert (stage.output / "run.trec").read_bytes() == run.read_bytes()
    audit = json.loads((stage.output / "audit.json").read_text())
    sidecar = json.loads(Path(f"{run}.audit.json").read_text())
    assert {k: sidecar[k] for k in audit} == audit
    assert audit["accuracy_at_10"] < 1.0
    calibration = audit["calibration"]
    if "--target-accuracy" in flags:
        assert calibration["sample"] == 10 and calibration["seed"] == 9 and calibration["target"] == 0.8
    else:
        assert calibration is None
