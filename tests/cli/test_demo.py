"""The README's main job: `clirkit demo` on the embedded sample, an experiment's table."""

import json
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
    assert lines[0] == "nDCG@10"
    header = lines[1].split()
    langs = ["ar", "de", "el", "en", "es", "hi", "ru", "th", "tr", "vi", "zh"]
    assert header == ["system", *(f"mlir/{lang}" for lang in langs), "mlir/avg"]
    ndcg = lines[2].split()
    assert ndcg[0] == "bm25" and all(0.4 < float(v) <= 1.0 for v in ndcg[1:]), ndcg
    rows = json.loads((tmp_path / "results.json").read_text())
    assert {r["measure"] for r in rows} == {"ndcg_cut_10", "recall_100", "recip_rank"}
    runs = [clirkit.read_run(tmp_path / "runs" / "bm25" / "mlir" / f"{lang}.trec") for lang in langs]
    assert sum(len(r) for r in runs) == 220 and all(len(d) <= 100 for r in runs for d in r.values())
