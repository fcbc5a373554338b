"""benches/encoders/fast_mode_quality.py runs end to end on a few SciFact documents (../shared)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import shared_path

pytest.importorskip("onnxruntime")

SCRIPT = Path(__file__).resolve().parents[2] / "benches" / "encoders" / "fast_mode_quality.py"


@pytest.mark.shared
def test_fast_mode_quality_reports_both_modes_and_the_tests():
    shared = shared_path("models", "multilingual-e5-small-int8").parents[1]
    cmd = [sys.executable, str(SCRIPT), "--shared", str(shared), "--docs", "20", "--threads", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "20 documents, 300 judged queries" in out
    assert re.search(r"^default \(prepared-v\d+\): .* ndcg_cut_10 0\.\d{4}, recall_100 0\.\d{4}$", out, re.M)
    assert re.search(r"^fast \(prepared-v\d+\S*\): .* ndcg_cut_10 0\.\d{4}", out, re.M)
    cosine = float(re.search(r"cosine min (\d\.\d+)", out).group(1))
    assert 0.99 <= cosine <= 1.0
    assert re.search(
        r"^ndcg_cut_10: fast - default [+-]\d\.\d{4} over 300 queries, randomization p = ", out, re.M
    )
