"""An impact system with ``approximate = { ... }``: its search stage key holds the table (the exact
system's does not change), its audit lands beside the run and in results.json and the table."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from clirkit.experiment import Experiment
from clirkit.experiment.toml_source import ExperimentError

SAMPLE = Path(__file__).resolve().parents[2] / "python" / "clirkit" / "data" / "sample"


def _config(tmp_path: Path, model: Path, approximate: str) -> Path:
    text = f"""
[experiment]
name = "approximate"
hits = 20

[collections.sample]
path = "{SAMPLE}"
corpus = "corpus.jsonl"
queries = "queries.jsonl"
qrels = "qrels.tsv"
lang_field = "lang"

[[tasks]]
collection = "sample"
setting = "mlir"
languages = ["en"]

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
