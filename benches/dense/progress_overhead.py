"""What the search progress bar costs: the same batch searches timed with the bar off (``quiet``: no
counter, no drawing thread) and on (the core's counter and the thread that reads it every 0.2 s and
draws on a stream that says it is a terminal), alternating off/on within each repeat. Prints the
median seconds of each and the ratio on/off per search, on seeded synthetic data:

* dense flat, 100,000 x 128, 2,000 queries (query chunks of 64 counted as they finish);
* dense PQ 4-bit (M = 64), 100,000 x 128, 2,000 queries: the general path (above 65,536 vectors);
* multi-vector (2-bit residuals), 20,000 documents of 32 tokens (d = 64), 2,000 queries of 16 tokens
  (counted per query).

    python benches/dense/progress_overhead.py --repeats 7 --threads 2
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from clirkit.dense import DenseIndex
from clirkit.multivector import MultiVectorIndex


class Terminal(io.StringIO):
    """Where the bar draws: a stream that says it is a terminal, so the bar and its thread run."""

    def isatty(self) -> bool:
        return True


def unit(rows: int, dim: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def timed(search, quiet: bool) -> float:
    sys.stderr = Terminal()
    try:
        start = time.perf_counter()
        search(quiet)
        return time.perf_counter() - start
    finally:
        sys.stderr = sys.__stderr__


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    t = args.threads
    with tempfile.TemporaryDirectory() as tmp:
        data, queries = unit(100_000, 128, 1), unit(2_000, 128, 2)
        ids = [str(i) for i in range(len(data))]
        flat = DenseIndex.build(data, ids, threads=t)
        pq = DenseIndex.build(data, ids, pq=64, threads=t, keep_vectors=False)
        docs = unit(20_000 * 32, 64, 3)
        doc_offsets = np.arange(0, len(docs) + 1, 32, dtype=np.uint64)
        mv = MultiVectorIndex.build(
            docs, doc_offsets, [str(i) for i in range(20_000)], Path(tmp) / "mv", threads=t
        )
        q_tokens, q_offsets = unit(2_000 * 16, 64, 4), np.arange(0, 2_000 * 16 + 1, 16, dtype=np.uint64)
        searches = {
            "dense flat 100k x 128, 2,000 queries, k=100": lambda quiet: flat.search(
                queries, 100, threads=t, quiet=quiet
            ),
            "dense PQ64x4 100k x 128, 2,000 queries, k=100": lambda quiet: pq.search(
                queries, 100, threads=t, quiet=quiet
            ),
            "multi-vector 20k x 32 tokens, 2,000 queries, k=100": lambda quiet: mv.search(
                q_tokens, q_offsets, 100, threads=t, quiet=quiet
            ),
        }
        for name, search in searches.items():
            search(True)  # warm
            off, on = [], []
            for r in range(args.repeats):
                for quiet in (True, False) if r % 2 == 0 else (False, True):
                    (off if quiet else on).append(timed(search, quiet))
            a, b = statistics.median(off), statistics.median(on)
            print(
                f"{name}: off {a:.3f} s, on {b:.3f} s, on/off {b / a:.3f} (medians of {args.repeats})",
                flush=True,
            )


if __name__ == "__main__":
    main()
