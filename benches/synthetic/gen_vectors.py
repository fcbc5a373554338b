#!/usr/bin/env python3
"""Seeded clustered unit vectors as float16 ``.npy`` files, for dense index scale benchmarks.

Writes into ``--out``: ``vectors.npy`` (n x d float16), ``ids.txt`` (``v0``, ``v1``, ...), ``queries.npy``
(q x d float32, from the same distribution) and ``qids.txt``. Model: ``--clusters`` centres drawn from a
standard normal; each vector is a uniformly chosen centre plus Gaussian noise (``--noise`` per dimension,
relative to a centre's scale), normalized to unit length. All draws come from one
``numpy.random.Generator(PCG64(seed))`` in chunks of 65,536 rows, so a seed gives byte-identical files,
and memory stays at a few chunks whatever ``--n``: the file is written with ``write()`` a chunk at a time.

Run ``python benches/synthetic/gen_vectors.py --out /work/scratch/scale/v1m --n 1000000 --dim 384``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

CHUNK = 65_536


def unit_rows(rng: np.random.Generator, centres: np.ndarray, rows: int, noise: float) -> np.ndarray:
    """``rows`` clustered unit vectors (float32)."""
    x = centres[rng.integers(0, len(centres), rows)]
    x += noise * rng.standard_normal(size=x.shape, dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def write_npy(path: Path, rng: np.random.Generator, centres: np.ndarray, n: int, noise: float) -> None:
    """An n x d float16 ``.npy`` file, generated and written a chunk at a time."""
    d = centres.shape[1]
    with open(path, "wb") as f:
        header = {
            "descr": np.lib.format.dtype_to_descr(np.dtype(np.float16)),
            "fortran_order": False,
            "shape": (n, d),
        }
        np.lib.format.write_array_header_1_0(f, header)
        for first in range(0, n, CHUNK):
            rows = min(CHUNK, n - first)
            f.write(unit_rows(rng, centres, rows, noise).astype(np.float16).tobytes())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--clusters", type=int, default=1024)
    ap.add_argument("--noise", type=float, default=0.6)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rng = np.random.Generator(np.random.PCG64(args.seed))
    centres = rng.standard_normal(size=(args.clusters, args.dim), dtype=np.float32)
    write_npy(args.out / "vectors.npy", rng, centres, args.n, args.noise)
    with open(args.out / "ids.txt", "w", encoding="utf-8") as f:
        for first in range(0, args.n, CHUNK):
            f.write("".join(f"v{i}\n" for i in range(first, min(first + CHUNK, args.n))))
    np.save(args.out / "queries.npy", unit_rows(rng, centres, args.queries, args.noise))
    (args.out / "qids.txt").write_text("".join(f"q{i}\n" for i in range(args.queries)), encoding="utf-8")


if __name__ == "__main__":
    main()
