"""`clirkit canonicalize` (python/clirkit/commands/canonicalize.py)."""

import subprocess
import sys


def test_cli_canonicalize(tmp_path):
    src = tmp_path / "r.trec"
    src.write_text("q1 Q0 a 9 1 x\nq1 Q0 b 1 2 x\n")
    out = tmp_path / "o.trec"
    subprocess.run(
        [sys.executable, "-m", "clirkit.cli", "canonicalize", str(src), "--output", str(out)], check=True
    )
    assert out.read_text().splitlines()[0] == "q1 Q0 b 1 2 clirkit"
