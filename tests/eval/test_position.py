"""Position bias: the format, hand-computed bins/PSI, xquad-pos end to end with the plot."""

from __future__ import annotations

import json
from pathlib import Path

import clirkit
import pytest
from clirkit import position
from clirkit.cli import main
from conftest import shared_path

HEADER = "query-id\tcorpus-id\tspan_start\tspan_end\tdoc_chars\n"


def test_hand_computed_example(tmp_path: Path):
    # 4 bins over [0, 1]. midpoints: q1 0.10 (bin 0), q2 0.30 (bin 1), q3 0.35 (bin 1), q4 0.95 (bin 3),
    # q5 (1000 chars, second bucket) 0.5 (bin 2).
    p = tmp_path / "positions.tsv"
    p.write_text(
        HEADER
        + "q1\td1\t5\t15\t100\nq2\td2\t28\t32\t100\nq3\td3\t30\t40\t100\nq4\td4\t90\t100\t100\n"
        + "q5\td5\t400\t600\t1000\n"
    )
    # nDCG@10 with one relevant doc: rank 1 -> 1, rank 3 -> 0.5, missing -> 0.
    run = {
        "q1": {"d1": 1.0},
        "q2": {"x": 3.0, "y": 2.0, "d2": 1.0},
        "q3": {"d3": 1.0},
        "q4": {"x": 1.0},
        "q5": {"d5": 2.0},
    }
    (t,) = position.position_bias(p, {"bm25": run}, bins=4, edges=[0, 512, 1024])
    assert t.measure == "ndcg_cut_10" and t.length_unit == "chars"
    assert t.overall.counts == [1, 2, 1, 1]
    assert t.overall.means == [pytest.approx(1.0), pytest.approx(0.75), pytest.approx(1.0), 0.0]
    assert t.overall.psi == pytest.approx(1.0)  # 1 - 0/1
    short, long_ = t.buckets
    assert (short.label, long_.label) == ("0-512", "512-1024")
    assert short.means == [pytest.approx(1.0), pytest.approx(0.75), None, 0.0]
    assert long_.psi == pytest.approx(0.0)
    (t,) = position.position_bias(p, {"bm25": run}, bins=4, edges=[0, 512, 1024], min_queries=2)
    assert t.overall.psi == pytest.approx(0.0)  # only bin 1 has 2 queries
    run["q4"] = {"d4": 1.0}
    (t,) = position.position_bias(p, {"bm25": run}, bins=4, edges=[0, 512])
    assert t.overall.psi == pytest.approx(1 - 0.75 / 1.0)
    records = t.to_records()
    assert records[1] == {
        "system": "bm25",
        "bucket": "all",
        "bin": 1,
        "from": 0.25,
        "to": 0.5,
        "queries": 2,
        "ndcg_cut_10": pytest.approx(0.75),
    }


def test_tokens_column_and_bad_rows(tmp_path: Path):
    p = tmp_path / "positions.tsv"
    p.write_text(
        "query-id\tcorpus-id\tspan_start\tspan_end\tdoc_chars\tdoc_tokens\nq1\td1\t0\t10\t5000\t600\n"
    )
    (t,) = position.position_bias(p, {"r": {"q1": {"d1": 1.0}}})
    assert t.length_unit == "tokens" and t.buckets[0].label == "512-1024"
    (t,) = position.position_bias(p, {"r": {"q1": {"d1": 1.0}}}, doc_tokens={"d1": 100})
    assert t.buckets[0].label == "0-512"
    p.write_text(HEADER + "q1\td1\t10\t5\t100\n")
    with pytest.raises(clirkit.ParseError, match="positions.tsv:2: span 10..5"):
        position.position_bias(p, {"r": {}})


def test_xquad_pos_with_a_run_table_and_plot(tmp_path: Path, capsys):
    positions = shared_path("data", "xquad-pos", "qrels", "positions.tsv")
    rows = positions.read_text().splitlines()[1:]
    # A synthetic system that finds answers early in the paragraph and misses late ones.
    run = {}
    for row in rows:
        qid, doc, start, end, chars = row.split("\t")
        rel = (int(start) + int(end)) / 2 / int(chars)
        run[qid] = {"other": 1.0, doc: 2.0 if rel < 0.5 else 0.5}
    run_path = tmp_path / "run.trec"
    clirkit.write_run(run_path, run, "synthetic")
    png = tmp_path / "psi.png"
    assert (
        main(
            ["eval", "position", "--qrels", str(positions), "--run", f"early={run_path}", "--plot", str(png)]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "PSI" in out and "0.00-0.05" in out and "0.95-1.00" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["eval", "position", "--qrels", str(positions), "--run", str(run_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["psi"]["run.trec"]["all"] == pytest.approx(1 - (1 / 1.584962500721156) / 1.0)
    assert sum(r["queries"] for r in data["bins"] if r["bucket"] == "all") == len(rows)


def test_token_lengths_from_a_tokenizer(tmp_path: Path):
    pytest.importorskip("tokenizers")
    tokenizer = shared_path("models", "multilingual-e5-small-int8", "tokenizer.json")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "text": "one two three"}\n{"_id": "d2", "text": ""}\n')
    lengths = position.token_lengths(corpus, tokenizer)
    assert set(lengths) == {"d1", "d2"} and lengths["d2"] == 0 and 3 <= lengths["d1"] <= 6
