"""benches/encoders/custom_operators.py runs, CI-sized, and finds clirkit's operators equal to
onnxruntime's kernels bit for bit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

SCRIPT = Path(__file__).resolve().parents[2] / "benches" / "encoders" / "custom_operators.py"


@pytest.mark.parametrize("operator", ["layer-norm", "attention"])
def test_bench_runs_and_finds_the_same_bits(operator):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), operator, "--tokens", "40", "--calls", "2", "--rounds", "2"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "bit for bit equal: True" in done.stdout
    assert done.stdout.count("us CPU per call") == 3
