"""The README's main job: `clirkit demo` on the embedded sample."""

import subprocess
import sys

import clirkit


def test_demo_prints_a_table_per_language(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "clirkit.cli", "demo", "--workdir", str(tmp_path), "--quiet"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    lines = out.splitlines()
    header = next(line.split() for line in lines if line.startswith("measure"))
    assert header == ["measure", "ar", "de", "el", "en", "es", "hi", "ru", "th", "tr", "vi", "zh", "avg"]
    ndcg = next(line.split() for line in lines if line.startswith("nDCG@10"))
    assert all(0.4 < float(v) <= 1.0 for v in ndcg[1:]), ndcg
    run = clirkit.read_run(tmp_path / "bm25.trec")
    assert len(run) == 220 and all(len(docs) <= 100 for docs in run.values())
