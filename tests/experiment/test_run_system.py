"""``kind = "run"`` systems: an existing TREC run read instead of searching, fused and evaluated like
any system, with the CLI's outputs; bad keys, missing files and unserved tasks are errors naming the key
when the experiment is read."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from clirkit.cli import main as cli
from clirkit.experiment import Experiment
from clirkit.experiment.toml_source import ExperimentError
from conftest import SAMPLE, sample_experiment_head


def _bm25_run(tmp_path: Path, lang: str, k1: str = "1.2", b: str = "0.75") -> Path:
    """A BM25 run of the sample's ``lang`` questions made by the CLI (the "existing run")."""
    index = tmp_path / "cli-index"
    if not index.exists():
        assert cli(["index", "bm25", "--corpus", str(SAMPLE / "corpus.jsonl"), "--index", str(index),
                    "--lang-field", "lang", "--fields", "text", "--quiet"]) == 0  # fmt: skip
    queries = [
        json.loads(line) for line in (SAMPLE / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    qfile = tmp_path / f"queries-{lang}.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in queries if q["lang"] == lang), encoding="utf-8")
    run = tmp_path / f"external-{lang}.trec"
    assert cli(["search", "bm25", "--index", str(index), "--queries", str(qfile), "--output", str(run),
                "--k1", k1, "--b", b, "--quiet"]) == 0  # fmt: skip
    return run


def _write(tmp_path: Path, langs, systems: str) -> Path:
    text = (
        sample_experiment_head("runs", langs) + systems + '\n[evaluation]\nmeasures = ["nDCG@10", "R@100"]\n'
    )
    path = tmp_path / "exp.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _experiment(path: Path, work: Path) -> Experiment:
    exp = Experiment(path, work, quiet=True)
    exp.run(log=io.StringIO())
    return exp


def _cli_eval(run: Path) -> dict:
    out = io.StringIO()
    sys_stdout, sys.stdout = sys.stdout, out
    try:
        assert cli(["eval", "--qrels", str(SAMPLE / "qrels.tsv"), "--run", str(run),
                    "-m", "nDCG@10", "-m", "R@100", "--json"]) == 0  # fmt: skip
    finally:
        sys.stdout = sys_stdout
    return json.loads(out.getvalue())


def test_run_system_fuses_and_evaluates_as_the_cli_does(tmp_path):
    external = _bm25_run(tmp_path, "en")
    (tmp_path / "runs").mkdir()
    relative = tmp_path / "runs" / "given.trec"  # paths are relative to the experiment file
    relative.write_bytes(external.read_bytes())
    systems = """
[systems.given]
kind = "run"
run = "runs/given.trec"

[systems.bm25]
kind = "bm25"
fields = ["text"]

[fusion.rrf]
inputs = ["bm25", "given"]
"""
    exp = _experiment(_write(tmp_path, ["en"], systems), tmp_path / "work")
    runs = exp.plan.runs
    assert (runs["given"]["mlir/en"].output / "run.trec").read_bytes() == external.read_bytes()
    fused = tmp_path / "cli-rrf.trec"
    bm25 = runs["bm25"]["mlir/en"].output / "run.trec"
    assert cli(["fuse", str(bm25), str(external), "--k", "60", "--output", str(fused)]) == 0
    assert (runs["rrf"]["mlir/en"].output / "run.trec").read_bytes() == fused.read_bytes()
    results = exp.results
    assert results is not None
    expected = _cli_eval(external)
    for measure in ("ndcg_cut_10", "recall_100"):
        assert results.value("given", "mlir/en", measure) == expected[measure]
    assert results.value("rrf", "mlir/en", "ndcg_cut_10") == _cli_eval(fused)["ndcg_cut_10"]
    # the stage is keyed by the file's content: new bytes make a new stage, the same bytes reuse it
    again = Experiment(tmp_path / "exp.toml", tmp_path / "work", quiet=True)
    assert again.plan.counts() == (len(again.plan.stages), 0)
    relative.write_bytes(_bm25_run(tmp_path, "en", k1="0.5").read_bytes())
    changed = Experiment(tmp_path / "exp.toml", tmp_path / "work", quiet=True)
    assert changed.plan.counts()[1] == 4  # the run, its evaluation, the fusion and its evaluation


def test_runs_map_serves_each_task(tmp_path):
    files = {lang: _bm25_run(tmp_path, lang) for lang in ("en", "de")}
    systems = f"""
[systems.given]
kind = "run"
runs = {{ "mlir/en" = "{files["en"].name}", "mlir/de" = "{files["de"].name}" }}
"""
    exp = _experiment(_write(tmp_path, ["en", "de"], systems), tmp_path / "work")
    for lang, path in files.items():
        assert (exp.plan.runs["given"][f"mlir/{lang}"].output / "run.trec").read_bytes() == path.read_bytes()
        assert exp.results is not None
        assert exp.results.value("given", f"mlir/{lang}", "ndcg_cut_10") == _cli_eval(path)["ndcg_cut_10"]


@pytest.mark.parametrize(
    ("langs", "body", "names"),
    [
        (["en"], 'run = "missing.trec"', ("systems.given.run", "file not found: missing.trec")),
        (["en"], 'run = "external-en.trec"\nmodel = "x"', ("systems.given.model", "unknown key")),
        (["en"], "", ("systems.given", "needs exactly one of run = PATH or runs")),
        (["en"], 'runs = { "mlir/en" = "nope.trec" }', ("systems.given.runs.mlir/en", "file not found")),
        (["en", "de"], 'run = "external-en.trec"', ("systems.given.run", "mlir/en, mlir/de")),
        (["en", "de"], 'runs = { "mlir/en" = "external-en.trec" }', ("systems.given.runs", "'mlir/de'")),
        (
            ["en"],
            'runs = { "mlir/en" = "external-en.trec", "mlir/fr" = "external-en.trec" }',
            ("systems.given.runs.mlir/fr", "'mlir/fr' is not a task"),
        ),
    ],
)
def test_bad_run_systems_are_errors_naming_the_key(tmp_path, langs, body, names):
    (tmp_path / "external-en.trec").write_text("q 0 d 1 1.0 x\n", encoding="utf-8")
    path = _write(tmp_path, langs, f'\n[systems.given]\nkind = "run"\n{body}\n')
    with pytest.raises(ExperimentError) as err:
        Experiment(path, tmp_path / "work", quiet=True)  # read and planned: no stage has run
    assert str(err.value).startswith(f"{path}:")
    for name in names:
        assert name in str(err.value)
    assert not (tmp_path / "work" / "store").exists() or not any(
        (tmp_path / "work" / "store").rglob("run.trec")
    )
