"""What the search progress bar costs: the same batch searches timed three ways, their order rotated
from repeat to repeat: ``off`` (``quiet``: no counter, no drawing thread), ``counted`` (the core adds to
a ``ProgressCounter`` that nothing reads: the core's share of the cost) and ``drawn`` (the counter and
the thread that reads it every 0.2 s and draws on a stream that says it is a terminal: what a user on a
terminal gets). Prints the median wall and process CPU seconds of each and the ratios to ``off``, on
seeded synthetic data:

* dense flat, 50,000 x 128, 1,000 queries (query chunks of 64 counted as they finish);
* dense PQ 4-bit (M = 64), 100,000 x 128, 10,000 queries: the general path (above 65,536 vectors);
* multi-vector (2-bit residuals), 20,000 documents of 32 tokens (d = 64), 1,000 queries of 16 tokens
  (counted per query).

The searches call the native index as ``DenseIndex.search`` and ``MultiVectorIndex.search`` do (through
``clirkit._progress.searching``), so the three modes differ only in the progress work.

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
from clirkit import _native
from clirkit._progress import searching
from clirkit.dense import DenseIndex
from clirkit.multivector import MultiVectorIndex


class Terminal(io.StringIO):
    """Where the bar draws: a stream that says it is a terminal, so the bar and its thread run."""

    def isatty(self) -> bool:
        return True


def unit(rows: int, dim: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def timed(search, mode: str) -> tuple[float, float]:
    """Wall and process CPU seconds of one ``search(quiet, counter)`` in ``mode``."""
    sys.stderr = Terminal()
    try:
        start, cpu = time.perf_counter(), time.process_time()
        if mode == "counted":
            search(True, _native.ProgressCounter())
        else:
            search(mode == "off", None)
        return time.perf_counter() - start, time.process_time() - cpu
    finally:
        sys.stderr = sys.__stderr__


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    t = args.threads
    with tempfile.TemporaryDirectory() as tmp:
        data = unit(100_000, 128, 1)
        ids = [str(i) for i in range(len(data))]
        flat = DenseIndex.build(data[:50_000], ids[:50_000], threads=t)
        pq = DenseIndex.build(data, ids, pq=64, threads=t, keep_vectors=False)
        docs = unit(20_000 * 32, 64, 3)
        doc_offsets = np.arange(0, len(docs) + 1, 32, dtype=np.uint64)
        mv = MultiVectorIndex.build(
            docs, doc_offsets, [str(i) for i in range(20_000)], Path(tmp) / "mv", threads=t
        )
        flat_queries, pq_queries = unit(1_000, 128, 2), unit(10_000, 128, 5)
        q_tokens, q_offsets = unit(1_000 * 16, 64, 4), np.arange(0, 1_000 * 16 + 1, 16, dtype=np.uint64)
        mv_options = _native.MultiVectorSearchOptions(100, threads=t)
        searches = {
            "dense flat 50k x 128, 1,000 queries, k=100": (
                1_000,
                lambda progress: flat.native.search(flat_queries, 100, 1, 0, t, progress=progress),
            ),
            "dense PQ64x4 100k x 128 (general path), 10,000 queries, k=100": (
                10_000,
                lambda progress: pq.native.search(pq_queries, 100, 1, 0, t, progress=progress),
            ),
            "multi-vector 20k x 32 tokens (d=64, 2 bits), 1,000 queries of 16 tokens, k=100": (
                1_000,
                lambda progress: mv.native.search(q_tokens, q_offsets, mv_options, progress=progress),
            ),
        }
        modes = ("off", "counted", "drawn")
        for name, (nq, call) in searches.items():

            def search(quiet: bool, counter, nq=nq, call=call) -> None:
                """As ``DenseIndex.search`` / ``MultiVectorIndex.search`` call the core."""
                if counter is not None:
                    call(counter)
                    return
                with searching(nq, quiet) as progress:
                    call(progress)

            search(True, None)  # warm
            seconds: dict[str, list[tuple[float, float]]] = {mode: [] for mode in modes}
            for r in range(args.repeats):
                for mode in modes[r % 3 :] + modes[: r % 3]:
                    seconds[mode].append(timed(search, mode))
            for what, i in (("wall", 0), ("CPU", 1)):
                m = {mode: statistics.median(s[i] for s in seconds[mode]) for mode in modes}
                print(
                    f"{name}, {what}: off {m['off']:.3f} s, counted {m['counted']:.3f} s "
                    f"({m['counted'] / m['off']:.3f}), drawn {m['drawn']:.3f} s ({m['drawn'] / m['off']:.3f}) "
                    f"(medians of {args.repeats})",
                    flush=True,
                )


if __name__ == "__main__":
    main()
