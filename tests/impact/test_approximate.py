"""Approximate impact search: opt-in (the CLI and API search exactly unless asked), exact scores in
canonical order, exact when nothing is pruned, and an audit whose figures equal an independent
comparison with exact search."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from clirkit import ImpactIndex, InvalidInputError
from clirkit.cli import main as cli
from clirkit.impact import ApproximateSettings


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def random_vector(rng: random.Random, vocab: int, length: int) -> dict[str, float]:
    return {f"t{int(vocab ** rng.random())}": rng.randint(1, 30) / 10 for _ in range(length)}


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    rng = random.Random(5)
    docs = {f"d{i}": random_vector(rng, 400, rng.randint(1, 40)) for i in range(1500)}
    queries = {f"q{i}": random_vector(rng, 400, 8) for i in range(60)}
    tmp = tmp_path_factory.mktemp("approximate")
    write_jsonl(tmp / "docs.jsonl", [{"id": d, "contents": "", "vector": v} for d, v in docs.items()])
    write_jsonl(tmp / "queries.jsonl", [{"id": q, "contents": "", "vector": v} for q, v in queries.items()])
    index = ImpactIndex.build(tmp / "docs.jsonl", tmp / "idx", threads=2, quiet=True)
    return index, queries, tmp


EVERYTHING = ApproximateSettings(query_terms=0, candidates=10**9)
HARD = ApproximateSettings(query_terms=2, candidates=12)


def test_nothing_pruned_is_exact(collection):
    index, queries, _ = collection
    approx = index.approximate(postings_per_term=0, threads=2)
    assert approx.kept_postings == index.manifest["num_postings"]
    exact = index.batch_search(queries, 50, threads=2).to_dict()
    assert approx.batch_search(queries, 50, settings=EVERYTHING, threads=2).to_dict() == exact


def test_pruned_hits_carry_exact_scores(collection):
    index, queries, _ = collection
    approx = index.approximate(postings_per_term=10, threads=2)
    assert approx.kept_postings < index.manifest["num_postings"]
    for qid, query in queries.items():
        exact = dict(index.search(query, k=index.num_docs))
        hits = approx.search(query, k=10, settings=HARD)
        assert all(exact[doc] == score for doc, score in hits), qid
        assert hits == sorted(hits, key=lambda h: (-h[1], [-b for b in h[0].encode()]))


def test_audit_equals_an_independent_exact_comparison(collection):
    index, queries, _ = collection
    approx = index.approximate(postings_per_term=10, threads=2)
    report = approx.audit(queries, 25, seed=3, k=100, settings=HARD, threads=2)
    assert (report.audited, report.of, report.seed, report.settings) == (25, 60, 3, HARD)
    accuracies, gaps = [], []
    for audited in report.queries:
        query = queries[audited.query]
        exact = index.search(query, k=10)
        got = approx.search(query, k=100, settings=HARD)[:10]
        found = len({d for d, _ in exact} & {d for d, _ in got})
        accuracy = found / len(exact)
        gap = (sum(s for _, s in exact) - sum(s for _, s in got)) / sum(s for _, s in exact)
        assert audited.accuracy_at_10 == accuracy
        assert audited.score_gap == pytest.approx(gap, abs=1e-12)
        accuracies.append(accuracy)
        gaps.append(gap)
    assert len({q.query for q in report.queries}) == 25
    assert report.accuracy_at_10 == pytest.approx(sum(accuracies) / 25)
    assert report.min_accuracy_at_10 == min(accuracies)
    assert report.score_gap == pytest.approx(sum(gaps) / 25)
    assert report.max_score_gap == pytest.approx(max(gaps))
    # Pruned this hard, the audit has something to find.
    assert report.accuracy_at_10 < 1.0
    # The same seed draws the same queries.
    again = approx.audit(queries, 25, seed=3, k=100, settings=HARD, threads=1)
    assert again == report


def test_calibration_reaches_its_target(collection):
    index, queries, tmp = collection
    approx = index.approximate(postings_per_term=0, threads=2)
    calibration = approx.calibrate(tmp / "queries.jsonl", 1.0, sample=60, threads=2)
    # The sample is every query: the bound is the sample's mean itself, and it reaches the target.
    assert calibration.reached and (calibration.sample, calibration.of) == (60, 60)
    assert calibration.lower_bound == calibration.accuracy_at_10 == 1.0 and calibration.confidence == 0.95
    audit = approx.audit(tmp / "queries.jsonl", 60, settings=calibration.settings)
    assert audit.accuracy_at_10 == 1.0
    # From 20 of the 60, a perfect sample does not show a perfect run: the bound stays below 1.0, the
    # target is not reached, and the log says so.
    part = approx.calibrate(tmp / "queries.jsonl", 1.0, sample=20, threads=2)
    assert not part.reached and part.accuracy_at_10 == 1.0 and part.lower_bound < 1.0
    assert "on 20 of 60 queries (seed 0), 95% lower bound 0.99" in part.summary()
    assert part.summary().endswith("falls short of the target 1.0")
    with pytest.raises(InvalidInputError, match="target_accuracy"):
        approx.calibrate(queries, 1.5)


def test_calibration_bound_is_below_the_sample_mean_and_holds_on_the_run(collection):
    index, queries, tmp = collection
    approx = index.approximate(postings_per_term=10, threads=2)
    for target in (0.5, 0.7, 0.9):
        calibration = approx.calibrate(queries, target, sample=25, seed=4, threads=2)
        assert calibration.lower_bound < calibration.accuracy_at_10
        # The sample is the audit's of the same size and seed: its mean is the calibration's.
        sampled = approx.audit(queries, 25, seed=4, settings=calibration.settings, threads=2)
        assert sampled.accuracy_at_10 == pytest.approx(calibration.accuracy_at_10)
        if calibration.reached:
            assert calibration.lower_bound >= target
            whole = approx.audit(queries, len(queries), settings=calibration.settings, threads=2)
            assert whole.accuracy_at_10 >= target


def test_cli_is_exact_unless_asked_and_audits(collection, capsys):
    index, _, tmp = collection
    base = [
        "search",
        "impact",
        "--index",
        str(tmp / "idx"),
        "--queries",
        str(tmp / "queries.jsonl"),
        "--k",
        "20",
    ]
    assert cli([*base, "--output", str(tmp / "exact.trec"), "--quiet"]) == 0
    exact = (tmp / "exact.trec").read_bytes()
    with pytest.raises(SystemExit, match="--audit need --approximate"):
        cli([*base, "--output", str(tmp / "x.trec"), "--audit", "5"])
    args = ["--approximate", "--postings-per-term", "0", "--candidates", "1000000", "--audit", "7"]
    assert cli([*base, "--output", str(tmp / "approx.trec"), *args, "--quiet"]) == 0
    assert (tmp / "approx.trec").read_bytes() == exact
    err = capsys.readouterr().err
    assert "audit: 7 of 60 queries re-run exactly" in err and "Accuracy@10 1.0000" in err
    sidecar = json.loads((tmp / "approx.trec.audit.json").read_text())
    assert sidecar["audited"] == 7 and sidecar["accuracy_at_10"] == 1.0 and sidecar["postings_per_term"] == 0
    hard = [
        "--approximate",
        "--postings-per-term",
        "10",
        "--query-terms",
        "2",
        "--candidates",
        "12",
        "--audit",
        "60",
    ]
    assert cli([*base, "--output", str(tmp / "hard.trec"), *hard, "--quiet"]) == 0
    sidecar = json.loads((tmp / "hard.trec.audit.json").read_text())
    assert sidecar["accuracy_at_10"] < 1.0 and sidecar["settings"] == {"query_terms": 2, "candidates": 12}
    assert sidecar["calibration"] is None
    capsys.readouterr()
    target = ["--approximate", "--target-accuracy", "0.9", "--calibration-sample", "30", "--audit", "60"]
    assert cli([*base, "--output", str(tmp / "target.trec"), *target]) == 0
    err = capsys.readouterr().err
    assert "Accuracy@10" in err and "on 30 of 60 queries (seed 0), 95% lower bound" in err
    calibration = json.loads((tmp / "target.trec.audit.json").read_text())["calibration"]
    assert calibration["sample"] == 30 and calibration["of"] == 60 and calibration["target"] == 0.9
    assert calibration["lower_bound"] <= calibration["accuracy_at_10"]
