"""benches/encoders/experiment_encoding_ab.py in CI form: an experiment over a small BEIR folder (paths
relative to the file) with a BM25 and a dense system (the small graph of tests/tiny_transformer.py), run
A B B A (or in the ``--order`` asked) under the same checkout on its first documents; every run's stages and
the sums are printed."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tiny_transformer

pytest.importorskip("onnxruntime")

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benches" / "encoders" / "experiment_encoding_ab.py"


def _experiment(tmp_path: Path) -> Path:
    """A small BEIR folder and an experiment file over it (BM25 and a dense system of the tiny graph)."""
    package = REPO / "python" / "clirkit"
    if not any((package / f"_native{suffix}").exists() for suffix in importlib.machinery.EXTENSION_SUFFIXES):
        pytest.skip(
            "the A/B script runs each checkout's in-tree build (python/clirkit/_native*), and this "
            "checkout has none (clirkit was installed with pip)"
        )
    tiny_transformer.build(tmp_path / "model")
    data = tmp_path / "beir"
    (data / "qrels").mkdir(parents=True)
    texts = tiny_transformer.texts(30, seed=2)
    (data / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": f"d{i}", "title": "", "text": t}) + "\n" for i, t in enumerate(texts)),
        encoding="utf-8",
    )
    (data / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": texts[i]}) + "\n" for i in range(0, 30, 3)),
        encoding="utf-8",
    )
    (data / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(0, 30, 3)),
        encoding="utf-8",
    )
    experiment = tmp_path / "exp.toml"
    experiment.write_text(
        '[experiment]\nname = "ab"\nhits = 10\n\n[collections.c]\npath = "beir"\n\n[[tasks]]\ncollection = "c"\n\n'
        '[systems.bm25]\nkind = "bm25"\nfields = ["text"]\n\n'
        '[systems.dense]\nkind = "dense"\nmodel = "model"\nfields = ["text"]\nmax_length = 32\n\n'
        '[evaluation]\nmeasures = ["nDCG@10"]\n',
        encoding="utf-8",
    )
    return experiment


def _ab(tmp_path: Path, *options: str) -> subprocess.CompletedProcess:
    experiment = _experiment(tmp_path)
    cmd = [sys.executable, str(SCRIPT), "--a", str(REPO), "--b", str(REPO), "--experiment", str(experiment)]
    return subprocess.run(
        [*cmd, "--docs", "12", "--scratch", str(tmp_path), *options],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_ab_runs_each_checkout_twice_on_the_first_documents(tmp_path):
    done = _ab(tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert [m.group(1) for m in re.finditer(r"^run \d ([AB]) ", out, flags=re.M)] == list("ABBA")
    # The subset holds the first 12 documents and the qrels of those (4 queries ask about them).
    assert out.count("encode beir-12/corpus.jsonl") == 4
    assert out.count("encode 4 queries of c") == 4
    assert re.search(
        r"^encoding stages: A [\d.]+ s, B [\d.]+ s \(sums of 2 and 2 runs\): A/B = [\d.]+x$", out, flags=re.M
    )
    assert list(tmp_path.glob("exp-ab-*")) == []  # the scratch directory is removed


def test_order_ab_runs_each_checkout_once(tmp_path):
    """``--order AB``: one run of each, a quick trial that the script works on a file."""
    done = _ab(tmp_path, "--order", "ab")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert [m.group(1) for m in re.finditer(r"^run \d ([AB]) ", out, flags=re.M)] == ["A", "B"]
    assert out.count("encode beir-12/corpus.jsonl") == 2
    assert re.search(
        r"^whole run: A [\d.]+ s, B [\d.]+ s \(sums of 1 and 1 runs\): A/B = [\d.]+x$", out, flags=re.M
    )


@pytest.mark.parametrize("order", ["AA", "BB", "ABC", ""])
def test_order_must_name_both_checkouts_and_only_them(order):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--a", ".", "--b", ".", "--order", order],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "a sequence of A and B runs naming each" in done.stderr


def test_a_stage_kind_only_one_side_runs_gets_no_ratio():
    """A shared ``encode-heads`` stage under B in place of ``encode`` and ``encode-tokens`` under A: those
    kinds are marked as one side's, not given a ratio against zero."""
    spec = importlib.util.spec_from_file_location("experiment_encoding_ab", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run_a = {"stages": [["encode", "e", 30.0], ["encode-tokens", "t", 20.0], ["search", "s", 2.0]]}
    run_b = {"stages": [["encode-heads", "h", 25.0], ["search", "s", 1.0]]}
    lines = module.kind_lines({"A": [run_a, run_a], "B": [run_b, run_b]})
    assert [line.split()[0] for line in lines] == ["encode", "encode-heads", "encode-tokens", "search"]
    assert lines[0].endswith("A only") and "A     60.0 s" in lines[0] and "B      0.0 s" in lines[0]
    assert lines[1].endswith("B only") and "B     50.0 s" in lines[1]
    assert lines[3].endswith("A/B 2.00x")
