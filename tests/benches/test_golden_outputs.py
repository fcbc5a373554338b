"""The embedded sample's outputs (BM25 index files and runs, dense runs, RRF, eval text) stay byte
for byte what they were before the architecture clean-up; benches/golden_outputs.py also checks
SciFact next to ../shared."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_sample_outputs_are_unchanged():
    done = subprocess.run(
        [sys.executable, str(ROOT / "benches" / "golden_outputs.py"), "--only", "sample"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FAIL" not in done.stdout
