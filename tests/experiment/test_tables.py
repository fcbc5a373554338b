"""The tables papers publish: named averages over any columns (NeuCLIRBench's four-column Avg), two-level
averages (query-weighted within a group, then macro over groups: PosIR's), rank correlation with external
scores from a CSV or JSON file (SciPy parity), seeded query subsampling of a correlation (AIR-Bench's
Fig. 3) and the qrels split of a BEIR collection or group."""

from __future__ import annotations

import io
import json
import random
import statistics
from pathlib import Path

import pytest
from clirkit.experiment import Experiment, ExperimentError, load_config
from clirkit.experiment.config import AverageSpec, SubsampleSpec
from clirkit.experiment.results import (
    correlation_rows,
    external_rows,
    named_average_rows,
    read_external_scores,
)
from conftest import sample_experiment_head


def _rows(values: dict[tuple[str, str], float]) -> list[dict]:
    return [{"system": s, "task": t, "measure": "ndcg_cut_20", "value": v} for (s, t), v in values.items()]


def test_named_and_two_level_averages_by_hand():
    values = {
        ("a", "mono/zh"): 0.8,
        ("a", "mono/ru"): 0.6,
        ("a", "mlir-dt"): 0.9,
        ("b", "mono/zh"): 0.4,
        ("b", "mlir-dt"): 0.5,  # b has no mono/ru: no average needing it
    }
    counts = {("a", "mono/zh"): 100, ("a", "mono/ru"): 50, ("a", "mlir-dt"): 200, ("b", "mono/zh"): 100}
    counts[("b", "mlir-dt")] = 200
    specs = [
        AverageSpec("Avg", ("mono/zh", "mono/ru", "mlir-dt"), "macro", None),
        AverageSpec("qavg", ("mono/zh", "mono/ru"), "query-weighted", None),
        AverageSpec("two", (), "macro", {"g1": ("mono/zh", "mono/ru"), "g2": ("mlir-dt",)}),
        AverageSpec("of-avg", ("Avg", "mlir-dt"), "macro", None),  # an earlier average is a column too
        AverageSpec("b-only", ("mono/zh", "mlir-dt"), "macro", None),
    ]
    rows, names = named_average_rows(_rows(values), ["a", "b"], specs, counts)
    got = {(r["system"], r["task"]): r["value"] for r in rows}
    assert names == ["Avg", "qavg", "two", "of-avg", "b-only"]
    assert got[("a", "Avg")] == pytest.approx((0.8 + 0.6 + 0.9) / 3)
    assert got[("a", "qavg")] == pytest.approx((0.8 * 100 + 0.6 * 50) / 150)
    assert got[("a", "two")] == pytest.approx(((0.8 * 100 + 0.6 * 50) / 150 + 0.9) / 2)
    assert got[("a", "of-avg")] == pytest.approx(((0.8 + 0.6 + 0.9) / 3 + 0.9) / 2)
    assert got[("b", "b-only")] == pytest.approx(0.45)
    assert ("b", "Avg") not in got and ("b", "two") not in got


def test_external_scores_csv_and_json(tmp_path: Path):
    csv_path = tmp_path / "mteb.csv"
    csv_path.write_text("model,system,score,other\nx,a,61.5,1\ny,b,58.0,2\nz,c,63.25,3\n")
    assert read_external_scores(str(csv_path), None) == {"a": 61.5, "b": 58.0, "c": 63.25}
    assert read_external_scores(str(csv_path), "other") == {"a": 1.0, "b": 2.0, "c": 3.0}
    with pytest.raises(ExperimentError, match=r"mteb.csv:1: no column 'nope'"):
        read_external_scores(str(csv_path), "nope")
    csv_path.write_text("system,score\na,61.5\nb,n/a\n")
    with pytest.raises(ExperimentError, match=r"mteb.csv:3: score is not a number"):
        read_external_scores(str(csv_path), None)
    json_path = tmp_path / "mteb.json"
    json_path.write_text(json.dumps({"a": {"avg": 0.5}, "b": {"avg": 0.25}}))
    assert read_external_scores(str(json_path), "avg") == {"a": 0.5, "b": 0.25}
    json_path.write_text(json.dumps({"a": "high"}))
    with pytest.raises(ExperimentError, match=r"mteb.json: system 'a': score 'high' is not a finite number"):
        read_external_scores(str(json_path), None)


def test_correlation_with_external_scores_equals_scipy():
    stats = pytest.importorskip("scipy.stats")
    systems = ["s1", "s2", "s3", "s4", "s5", "s6"]
    ours = [0.61, 0.55, 0.70, 0.42, 0.55, 0.66]
    external = {"s1": 60.1, "s2": 57.0, "s3": 58.2, "s4": 50.0, "s5": 61.0, "s6": 65.5, "other": 1.0}
    rows = _rows({(s, "task"): v for s, v in zip(systems, ours)}) + external_rows("MTEB", external, systems)
    (row,) = correlation_rows(rows, systems, [("task", "MTEB")], ["ndcg_cut_20", "external"])
    y = [external[s] for s in systems]
    assert row["systems"] == 6 and row["measure"] == "ndcg_cut_20 vs external"
    assert row["spearman"] == pytest.approx(stats.spearmanr(ours, y).statistic, abs=1e-12)
    assert row["spearman_p"] == pytest.approx(stats.spearmanr(ours, y).pvalue, rel=1e-9)
    assert row["kendall"] == pytest.approx(stats.kendalltau(ours, y).statistic, abs=1e-12)
    assert row["kendall_p"] == pytest.approx(stats.kendalltau(ours, y).pvalue, rel=1e-9)


def test_seeded_subsampling_of_a_correlation():
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(11)
    systems = [f"s{i}" for i in range(5)]
    qids = [f"q{i:02d}" for i in range(20)]
    per_query = {
        (s, "task"): {q: {"m": rng.random()} for q in qids if (s, q) != ("s1", "q03")} for s in systems
    }
    rows = [
        {"system": s, "task": "task", "measure": "m", "value": statistics.fmean(v["m"] for v in pq.values())}
        for (s, _), pq in per_query.items()
    ]
    external = {s: float(i * i) for i, s in enumerate(systems)}
    rows += external_rows("ext", external, systems)
    spec = SubsampleSpec(samples=7, queries=5, seed=3)
    (row,) = correlation_rows(rows, systems, [("task", "ext")], ["m", "external"], per_query, spec)
    sub = row["subsampled"]
    # by hand: the same seeded samples of the sorted queries; s1 scores 0 on q03, which it did not return
    draw = random.Random(3)
    rhos, taus = [], []
    y = [external[s] for s in systems]
    for _ in range(7):
        chosen = draw.sample(sorted(qids), 5)
        x = [
            statistics.fmean(per_query[(s, "task")].get(q, {}).get("m", 0.0) for q in chosen) for s in systems
        ]
        rhos.append(stats.spearmanr(x, y).statistic)
        taus.append(stats.kendalltau(x, y).statistic)
    assert (sub["samples"], sub["queries"], sub["seed"]) == (7, 5, 3)
    assert sub["spearman"]["mean"] == pytest.approx(statistics.fmean(rhos), abs=1e-12)
    assert sub["spearman"]["std"] == pytest.approx(statistics.stdev(rhos), abs=1e-12)
    assert sub["kendall"]["mean"] == pytest.approx(statistics.fmean(taus), abs=1e-12)
    assert (sub["spearman"]["min"], sub["spearman"]["max"]) == pytest.approx((min(rhos), max(rhos)))
    again = correlation_rows(rows, systems, [("task", "ext")], ["m", "external"], per_query, spec)
    assert again[0]["subsampled"] == sub  # seeded: the same samples every time
    with pytest.raises(ExperimentError, match="21 queries asked, the column has 20"):
        correlation_rows(
            rows, systems, [("task", "ext")], ["m", "external"], per_query, SubsampleSpec(2, 21, 0)
        )


# three BM25 systems with different parameters, so that three orderings can be correlated
SYSTEMS = "".join(
    f'\n[systems.{name}]\nkind = "bm25"\nfields = ["text"]\n{params}'
    for name, params in (("bm25", ""), ("bm25-k12", "k1 = 1.2\nb = 0.3\n"), ("bm25-b1", "b = 1.0\n"))
)


def test_an_experiment_with_named_averages_external_scores_and_subsampling(tmp_path: Path):
    scores = tmp_path / "leaderboard.csv"
    scores.write_text("system,score\nbm25,3\nbm25-k12,1\nbm25-b1,2\n")
    text = (
        sample_experiment_head("tables", ["en", "de"])
        + SYSTEMS
        + f"""
[evaluation]
measures = ["nDCG@10"]
correlations = [["mlir/en", "board"], ["both", "board"]]
subsample = {{ samples = 4, queries = 10, seed = 1 }}

[evaluation.average.both]
columns = ["mlir/en", "mlir/de"]
weighting = "query-weighted"

[evaluation.external.board]
file = "{scores}"
"""
    )
    path = tmp_path / "exp.toml"
    path.write_text(text)
    results = Experiment(path, tmp_path / "work", quiet=True).run(log=io.StringIO())
    assert "both" in results.columns
    en, de = (results.value("bm25", c, "ndcg_cut_10") for c in ("mlir/en", "mlir/de"))
    assert en is not None and de is not None
    report = json.loads((tmp_path / "work" / "report.json").read_text())
    by_pair = {(c["a"], c["b"]): c for c in report["correlations"]}
    assert by_pair[("mlir/en", "board")]["subsampled"]["samples"] == 4
    assert "subsampled" not in by_pair[("both", "board")]  # an average has no queries to sample
    assert "over 4 samples of 10 queries (seed 1)" in (tmp_path / "work" / "table.md").read_text()


def test_unknown_columns_in_averages_and_correlations_are_errors(tmp_path: Path):
    text = (
        sample_experiment_head("t", ["en", "de"])
        + SYSTEMS
        + '\n[evaluation.average.Avg]\ncolumns = ["mlir/xx"]\n'
    )
    path = tmp_path / "exp.toml"
    path.write_text(text)
    with pytest.raises(
        ExperimentError, match=r"exp.toml:\d+: evaluation.average.Avg.columns: 'mlir/xx' is not a task"
    ):
        Experiment(path, tmp_path / "work")
    path.write_text(
        text.replace('columns = ["mlir/xx"]', 'columns = ["mlir/en"]\ngroups = { a = ["mlir/en"] }')
    )
    with pytest.raises(ExperimentError, match=r"evaluation.average.Avg: give columns or groups, not both"):
        load_config(path)


def _beir(root: Path, name: str, split: str) -> Path:
    d = root / name
    (d / "qrels").mkdir(parents=True)
    (d / "corpus.jsonl").write_text('{"_id": "d1", "text": "a"}\n')
    (d / "queries.jsonl").write_text('{"_id": "q1", "text": "a"}\n')
    (d / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    return d


def test_qrels_split_of_a_collection_and_of_a_group(tmp_path: Path):
    _beir(tmp_path / "air", "law", "dev")
    _beir(tmp_path / "air", "news", "dev")
    _beir(tmp_path / "air", "old", "test")
    one = _beir(tmp_path, "miracl", "dev")
    head = '[experiment]\nname = "s"\n\n[systems.bm25]\nkind = "bm25"\n'
    path = tmp_path / "exp.toml"
    path.write_text(
        head
        + f'[collections.air]\nformat = "beir-group"\npath = "{tmp_path / "air"}"\nsplit = "dev"\n'
        + f'[collections.miracl]\npath = "{one}"\nsplit = "dev"\n'
    )
    config = load_config(path)
    assert sorted(c for c in config.collections if config.collections[c].group == "air") == ["law", "news"]
    assert config.collections["law"].qrels == str(tmp_path / "air" / "law" / "qrels" / "dev.tsv")
    assert config.collections["miracl"].qrels == str(one / "qrels" / "dev.tsv")
    path.write_text(head + f'[collections.miracl]\npath = "{one}"\n')
    with pytest.raises(ExperimentError, match=r"collections.miracl.qrels: file not found: qrels/test.tsv"):
        load_config(path)
