"""clirkit.evaluation's API, the `clirkit eval` CLI and bad input."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import clirkit
import pytest
from clirkit import evaluation
from clirkit.cli import main

QRELS = "q1 0 a 2\nq1 0 b 0\nq1 0 c 1\nq2 0 a 1\nq3 0 z 1\n"
RUN = "q1 Q0 b 1 3.0 t\nq1 Q0 a 2 2.0 t\nq1 Q0 x 3 2.0 t\nq2 Q0 a 1 1.0 t\nq9 Q0 a 1 1.0 t\n"


@pytest.fixture
def files(tmp_path: Path):
    q, r = tmp_path / "qrels.trec", tmp_path / "run.trec"
    q.write_text(QRELS)
    r.write_text(RUN)
    return q, r


def test_hand_computed_values(files):
    q, r = files
    res = evaluation.evaluate(
        q, r, ["P@1", "MRR", "map", "num_rel", "num_ret", "Judged@2", "R@2"], per_query=True
    )
    # q1: a and x tie at 2.0 and break on doc id descending (trec_eval), so the ranking is
    # b(0) x(unjudged) a(2); relevant a, c -> P@1 0, RR 1/3, AP (1/3)/2, judged@2 1/2, R@2 0
    assert res["q1"] == {
        "P_1": 0.0,
        "recip_rank": pytest.approx(1 / 3),
        "map": pytest.approx(1 / 6),
        "num_rel": 2.0,
        "num_ret": 3.0,
        "judged_2": 0.5,
        "recall_2": 0.0,
    }
    # q2 retrieved one document, judged: Judged@2 divides by min(2, retrieved) = 1 (ir_measures)
    assert res["q2"]["map"] == 1.0 and res["q2"]["judged_2"] == 1.0
    assert list(res) == ["q1", "q2", "all"]  # q9 has no qrels, q3 is not in the run: both skipped
    assert res["all"]["map"] == pytest.approx((1 / 6 + 1) / 2)
    assert res["all"]["num_ret"] == 4.0  # counts are summed
    full = evaluation.evaluate(q, r, ["map"], complete=True, per_query=True)
    assert full["q3"]["map"] == 0.0 and full["all"]["map"] == pytest.approx((1 / 6 + 1) / 3)


def test_dicts_files_and_evaluator_agree(files):
    q, r = files
    qd, rd = clirkit.read_qrels(q), clirkit.read_run(r)
    a = evaluation.evaluate(q, r, "ndcg_cut", per_query=True)
    b = evaluation.evaluate(qd, rd, "ndcg_cut", per_query=True)
    assert a == b
    per_query = clirkit.RelevanceEvaluator(qd, {"ndcg_cut.10", "map"}).evaluate(rd)
    assert set(per_query) == {"q1", "q2"} and set(per_query["q1"]) == {"ndcg_cut_10", "map"}
    assert clirkit.RelevanceEvaluator(str(q), ["map"]).evaluate(str(r))["q1"]["map"] == pytest.approx(1 / 6)
    assert evaluation.compute_aggregated_measure("num_rel", [1, 2]) == 3.0
    assert evaluation.compute_aggregated_measure("map", [0.5, 1.0]) == 0.75


def test_records_and_dataframe(files):
    q, r = files
    per_query = evaluation.evaluate(q, r, ["map", "P.5"], per_query=True)
    records = evaluation.to_records(per_query)
    assert records[0] == {"qid": "q1", "map": pytest.approx(1 / 6), "P_5": 0.2}
    assert evaluation.to_records(evaluation.evaluate(q, r, ["P.1"])) == [{"qid": "all", "P_1": 0.5}]
    pd = pytest.importorskip("pandas")
    df = evaluation.to_dataframe(per_query)
    assert isinstance(df, pd.DataFrame) and list(df.columns) == ["qid", "map", "P_5"] and len(df) == 3


def test_bad_input_is_named(files, tmp_path: Path):
    q, r = files
    with pytest.raises(clirkit.InvalidInputError, match="unknown measure 'nDGC@10'.*known measures: map"):
        evaluation.evaluate(q, r, ["nDGC@10"])
    dup = tmp_path / "dup.trec"
    dup.write_text("q1 Q0 a 1 1 t\nq1 Q0 b 2 1 t\nq1 Q0 a 3 0 t\n")
    with pytest.raises(
        clirkit.ParseError, match=r"dup.trec:3: duplicate document 'a' for query 'q1' \(first at line 1\)"
    ):
        evaluation.evaluate(q, dup, ["map"])
    bad = tmp_path / "bad.trec"
    bad.write_text("q1 Q0 a 1 1 t\nq1 Q0 b 2\n")
    with pytest.raises(clirkit.ParseError, match="bad.trec:2: expected 6 columns"):
        evaluation.evaluate(q, bad, ["map"])
    badq = tmp_path / "bad.qrels"
    badq.write_text("q1 0 a 1\nq1 0 b x\n")
    with pytest.raises(clirkit.ParseError, match="bad.qrels:2: relevance 'x'"):
        evaluation.evaluate(badq, r, ["map"])
    with pytest.raises(clirkit.InvalidInputError, match="not finite"):
        evaluation.evaluate(q, {"q1": {"a": float("nan")}}, ["map"])


def test_no_overlap_warns(files, tmp_path: Path, capsys):
    q, _ = files
    other = tmp_path / "other.trec"
    other.write_text("x1 Q0 a 1 1 t\n")
    with pytest.warns(evaluation.EvaluationWarning, match="none of the run's 1 query ids"):
        assert evaluation.evaluate(q, other, ["map"]) == {"map": 0.0}
    empty = tmp_path / "empty.trec"
    empty.write_text("")
    with pytest.warns(evaluation.EvaluationWarning, match="the run has no queries"):
        assert evaluation.evaluate(q, empty, ["map", "num_ret"]) == {"map": 0.0, "num_ret": 0.0}
    assert main(["eval", "--qrels", str(q), "--run", str(other), "-m", "map"]) == 0
    out = capsys.readouterr()
    assert "clirkit: warning: none of the run's 1 query ids" in out.err
    assert out.out == "map                   \tall\t0.0000\n"


def test_cli_trec_eval_format(files, capsys):
    q, r = files
    assert (
        main(["eval", "--qrels", str(q), "--run", str(r), "-m", "map", "-m", "num_rel", "--per-query"]) == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "map                   \tq1\t0.1667"
    assert lines[1] == "num_rel               \tq1\t2"
    assert lines[-2:] == ["map                   \tall\t0.5833", "num_rel               \tall\t3"]
    assert main(["eval", "--qrels", str(q), "--run", str(r), "-m", "nDCG@10", "--json", "-c"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"ndcg_cut_10"}
    assert main(["eval", "--qrels", str(q), "--run", str(r), "-m", "bogus"]) == 2
    assert "unknown measure 'bogus'" in capsys.readouterr().err


def test_cli_pairs_table(files, tmp_path: Path, capsys):
    q, r = files
    r2 = tmp_path / "run2.trec"
    r2.write_text("q1 Q0 a 1 3.0 t\nq1 Q0 c 2 2.0 t\n")
    args = ["eval", "--pair", f"zh={q},{r}", "--pair", f"fa={q},{r2}", "-m", "map", "-m", "judged.2"]
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["measure", "zh", "fa", "average"]
    assert lines[1].split() == ["map", "0.5833", "1.0000", "0.7917"]
    assert main(args + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["average"]["judged_2"] == pytest.approx(
        ((0.5 + 1.0) / 2 + 1.0) / 2
    )
    assert main(["eval", "--pair", "zh=onlyone"]) == 2


def test_sample_collection_runs(sample_dir: Path):
    """The embedded sample's qrels load and evaluate a trivial run without warnings."""
    qrels = clirkit.read_qrels(sample_dir / "qrels.tsv")
    run = {q: {d: 1.0 for d in docs} for q, docs in list(qrels.items())[:20]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = evaluation.evaluate(qrels, run, ["ndcg_cut.10", "P.1"])
    assert res["ndcg_cut_10"] == pytest.approx(1.0)


def test_a_zero_prints_as_trec_eval_prints_it():
    table = evaluation.format_trec_eval({"q1": {"ndcg_cut_10": -0.0, "map": 0.25}})
    assert table == "ndcg_cut_10           \tq1\t0.0000\nmap                   \tq1\t0.2500\n"


def test_runs_and_qrels_skip_a_byte_order_mark_and_read_compressed_files(tmp_path: Path):
    import gzip

    qrels, run = tmp_path / "q.trec.gz", tmp_path / "r.trec"
    qrels.write_bytes(gzip.compress("\ufeffq1 0 d1 1\n".encode()))
    run.write_text("\ufeffq1 Q0 d1 1 2.0 x\n", encoding="utf-8")
    assert evaluation.evaluate(qrels, run, ["P_1"]) == {"P_1": 1.0}


def test_internal_errors_are_clirkit_errors():
    assert issubclass(clirkit.InternalError, clirkit.ClirkitError)
    assert issubclass(clirkit.InternalError, ValueError)
