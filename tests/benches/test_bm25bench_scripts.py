"""The BM25 benchmark drivers run end to end against the current clirkit API (benches/bm25/bm25_peers.py,
benches/bm25/bm25_effectiveness.py), and their evaluation and verdict helpers are right."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from conftest import BENCHES, bench_module


@pytest.fixture(scope="module")
def bc():
    return bench_module("bench_common")


def test_evaluate_counts_missing_queries_as_zero(bc):
    pytest.importorskip("pytrec_eval")
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}}
    run = {"q1": {"d1": 2.0, "d3": 1.0}}
    mean = bc.evaluate(qrels, run)["mean"]
    assert mean["ndcg_cut_10"] == pytest.approx(0.5)  # q1 perfect, q2 absent = 0
    assert mean["recall_100"] == pytest.approx(0.5)


def test_qrels_reader_takes_beir_tsv_and_trec(bc, tmp_path):
    (tmp_path / "a.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\n", encoding="utf-8")
    (tmp_path / "b.trec").write_text("q1 0 d1 1\nq2 0 d9 2\n", encoding="utf-8")
    assert bc.read_qrels_tsv(tmp_path / "a.tsv") == {"q1": {"d1": 1, "d2": 0}}
    assert bc.read_qrels_tsv(tmp_path / "b.trec") == {"q1": {"d1": 1}, "q2": {"d9": 2}}


def test_trec_round_trip_in_canonical_order(bc, tmp_path):
    bc.write_trec(tmp_path / "r.trec", {"q": {"a": 1.0, "b": 1.0, "c": 3.0}}, "t")
    lines = (tmp_path / "r.trec").read_text(encoding="utf-8").splitlines()
    assert [ln.split()[2] for ln in lines] == ["c", "b", "a"]  # score desc, then doc id desc
    assert bc.read_trec(tmp_path / "r.trec") == {"q": {"c": 3.0, "b": 1.0, "a": 1.0}}


def test_timed_passes_stops_on_time_and_pass_count(bc):
    calls = []

    def nap(seconds: float):
        calls.append(1)
        time.sleep(seconds)
        return len(calls)

    times, result = bc.timed_passes(lambda: nap(0.02), 0.01, 3, 10)
    assert len(times) == 3 and result == 3  # time reached after 1 pass, passes after 3
    times, _ = bc.timed_passes(lambda: None, 1e9, 1, 4)
    assert len(times) == 4  # capped
    times, _ = bc.timed_passes(lambda: nap(0.05), 0.001, 3, 10)
    assert len(times) == 1  # one pass longer than 10x min_seconds is enough for a slow system
    assert len(bc.timed_passes(lambda: None, 0.0, 0, 5)[0]) == 1  # always at least one pass


def test_musts_verdicts(capsys):
    peers = bench_module("bm25/bm25_peers")
    results = {
        "clirkit": {"qps_k1000": 1000.0, "docs_per_s": 30000.0, "rss_loaded_mib": 50.0},
        "pisa": {"qps_k1000": 2500.0},
        "bm25s": {"qps_k1000": 100.0, "rss_loaded_mib": 60.0},
        "pyserini": {"skipped": "not installed"},
    }
    lines = peers.musts("x", results, 1000)
    assert "0.40× (target ≥ 0.5×) FAIL" in lines[0]
    assert "10.00× (target ≥ 5.0×) PASS" in lines[1]
    assert lines[2].endswith("not measured")
    assert "PASS" in lines[3]


def test_peers_driver_end_to_end_with_clirkit(tmp_path):
    """The driver builds, searches and reports clirkit on a tiny generated corpus; unknown peers are skipped."""
    gen = bench_module("synthetic/gen_zipf_corpus")
    gen.generate(tmp_path / "zipf", docs=400, queries=30, seed=5, vocab=3000, quiet=True)
    cmd = [
        sys.executable,
        str(BENCHES / "bm25" / "bm25_peers.py"),
        "--datasets",
        "zipf",
        "--zipf-dir",
        str(tmp_path / "zipf"),
        "--systems",
        "clirkit,pisa",
        "--peers-python",
        str(tmp_path / "none"),
        "--workdir",
        str(tmp_path / "work"),
        "--min-seconds",
        "0",
        "--min-passes",
        "1",
        "--warmup",
        "5",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads((tmp_path / "work" / "results.json").read_text(encoding="utf-8"))
    ours = report["zipf"]["results"]["clirkit"]
    assert not ours["errors"] and ours["docs"] == 400 and ours["queries"] == 30
    assert ours["qps_k1000"] > 0 and ours["docs_per_s"] > 0 and ours["rss_loaded_mib"] > 0
    assert "skipped" in report["zipf"]["results"]["pisa"]
    run = (tmp_path / "work" / "zipf" / "runs" / "clirkit.k10.trec").read_text(encoding="utf-8").splitlines()
    assert run and all(int(line.split()[3]) <= 10 for line in run)
    assert "| clirkit |" in proc.stdout and "| pisa | skipped" in proc.stdout


def test_effectiveness_driver_on_two_xquad_languages(tmp_path, shared):
    shared_root = shared("data", "xquad-r").parent.parent
    pytest.importorskip("pytrec_eval")
    cmd = [
        sys.executable,
        str(BENCHES / "bm25" / "bm25_effectiveness.py"),
        "--shared",
        str(shared_root),
        "--skip-scifact",
        "--langs",
        "th,zh",
        "--pyserini-python",
        "",
        "--workdir",
        str(tmp_path),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    rows = {
        line.split("|")[1].strip(): line
        for line in proc.stdout.splitlines()
        if line.startswith(("| th", "| zh"))
    }
    assert set(rows) == {"th", "zh"}, proc.stdout + proc.stderr[-2000:]
    # Thai has no Lucene reference: its must is the absolute 0.75.
    assert "≥ 0.7500" in rows["th"]
    assert proc.returncode == (0 if all(line.endswith("PASS |") for line in rows.values()) else 1)


def test_query_caps_can_name_a_dataset():
    peers = bench_module("bm25/bm25_peers")
    caps = peers.parse_caps("bm25s=500, zipf:bm25s=100,pyserini=500")
    assert caps == {(None, "bm25s"): 500, ("zipf", "bm25s"): 100, (None, "pyserini"): 500}
    with pytest.raises(SystemExit, match="expected"):
        peers.parse_caps("zipf:bm25s")
