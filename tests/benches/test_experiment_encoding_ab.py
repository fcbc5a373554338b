"""benches/encoders/experiment_encoding_ab.py in CI form: an experiment over a small BEIR folder (paths
relative to the file) with a BM25 and a dense system (the small graph of tests/tiny_transformer.py), run
A B B A under the same checkout on its first documents; every run's stages and the sums are printed."""

from __future__ import annotations

import importlib.machinery
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


def test_ab_runs_each_checkout_twice_on_the_first_documents(tmp_path):
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
    cmd = [sys.executable, str(SCRIPT), "--a", str(REPO), "--b", str(REPO), "--experiment", str(experiment)]
    done = subprocess.run(
        [*cmd, "--docs", "12", "--scratch", str(tmp_path)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert [m.group(1) for m in re.finditer(r"^run \d ([AB]) ", out, flags=re.M)] == list("ABBA")
    # The subset holds the first 12 documents and the qrels of those (4 queries ask about them).
    assert out.count("encode beir-12/corpus.jsonl") == 4
    assert out.count("encode 4 queries of c") == 4
    assert re.search(r"^encoding stages: A [\d.]+ s, B [\d.]+ s .*A/B = [\d.]+x$", out, flags=re.M)
    assert list(tmp_path.glob("exp-ab-*")) == []  # the scratch directory is removed
