"""A build from token files never holds their matrix: the peak resident memory of a process that builds
an index from a 192 MiB token file stays far below that file's size above the same process having only
read the file's offsets and ids (the copying path it replaces held the matrix, twice over with its
concatenation)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

ROWS, DIM = 1_572_864, 32  # 192 MiB of float32

CHILD = """
import resource, sys
from clirkit.encoders.tokens import token_items
from clirkit.multivector import MultiVectorIndex
prefix, index = sys.argv[1], sys.argv[2]
token_items(prefix)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
MultiVectorIndex.build_files([prefix], index, centroids=16, kmeans_sample=4096, threads=1, quiet=True)
print(before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _peak_kib(prefix: Path, index: str) -> tuple[int, int]:
    """Peak resident KiB of a child process after reading the offsets and ids of ``prefix``, then after
    building ``index`` from it."""
    done = subprocess.run([sys.executable, "-c", CHILD, str(prefix), index], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    before, after = map(int, done.stdout.split())
    return before, after


def test_a_build_from_files_does_not_hold_their_matrix(tmp_path):
    prefix = tmp_path / "docs"
    rng = np.random.default_rng(0)
    with open(f"{prefix}.tokens.npy", "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": "<f4", "fortran_order": False, "shape": (ROWS, DIM)}
        )
        for _ in range(ROWS // 65_536):
            f.write(rng.standard_normal((65_536, DIM), dtype=np.float32).tobytes())
    np.save(f"{prefix}.offsets.npy", np.arange(0, ROWS + 1, 32, dtype=np.int64))
    Path(f"{prefix}.ids.txt").write_text("".join(f"d{i}\n" for i in range(ROWS // 32)), encoding="utf-8")
    matrix_kib = ROWS * DIM * 4 // 1024
    before, after = _peak_kib(prefix, str(tmp_path / "index"))
    assert (tmp_path / "index" / "meta.json").exists()
    # The build's own memory: a 32 MiB chunk, 2 bytes of code per token (3 MiB), the sample, the ids.
    assert after - before < matrix_kib // 2, (before, after, matrix_kib)
