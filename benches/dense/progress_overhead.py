"""What the search progress bar costs: the same batch searches timed three ways, their order rotated
from repeat to repeat: ``off`` (``quiet``: no counter, no drawing thread), ``counted`` (the core adds to
a ``ProgressCounter`` that nothing reads: the core's share of the cost) and ``drawn`` (the counter and
the thread that reads it every 0.2 s and draws on a stream that says it is a terminal: what a user on a
terminal gets). Prints the median wall and process CPU seconds of each and the ratios to ``off``, on
seeded synthetic data:

* dense flat, 50,000 x 128, 1,000 queries (query chunks of 64 counted as they finish);
* dense PQ 4-bit (M = 64), 100,000 x 128, 10,000 queries: the general path (above 65,536 vectors);
* multi-vector (2-bit residuals), 20,000 documents of 32 tokens (d = 64), 1,000 queries of 16 tokens
  (counted per query);
* BM25, 100,000 documents of 40 Zipf-drawn words (vocabulary 30,000), 20,000 queries of 3 words
  (counted per query);
* impact, 50,000 documents of 40 weighted Zipf-drawn terms (vocabulary 30,000), 20,000 queries of 8
  terms (counted per query).

The searches call the native index as ``DenseIndex.search``, ``MultiVectorIndex.search``,
``BM25Index.batch_search`` and ``ImpactIndex.batch_search`` do (through ``clirkit._progress.searching``),
so the three modes differ only in the progress work. ``--kinds`` picks some of them.

    python benches/dense/progress_overhead.py --repeats 7 --threads 2 [--kinds bm25 impact]
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from clirkit import _native
from clirkit._progress import searching
from clirkit.bm25 import BM25Index
from clirkit.dense import DenseIndex
from clirkit.impact import ImpactIndex
from clirkit.multivector import MultiVectorIndex

KINDS = ("dense", "multivector", "bm25", "impact")


class Terminal(io.StringIO):
    """Where the bar draws: a stream that says it is a terminal, so the bar and its thread run."""

    def isatty(self) -> bool:
        return True


def unit(rows: int, dim: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def zipf_words(rng: np.random.Generator, rows: int, per_row: int, vocab: int) -> np.ndarray:
    """``rows`` x ``per_row`` word numbers below ``vocab``, Zipf-like (small numbers frequent)."""
    return np.minimum(rng.zipf(1.2, size=(rows, per_row)) - 1, vocab - 1)


def dense_searches(tmp: Path, t: int) -> dict[str, tuple[int, Callable[[Any], Any]]]:
    data = unit(100_000, 128, 1)
    ids = [str(i) for i in range(len(data))]
    flat = DenseIndex.build(data[:50_000], ids[:50_000], threads=t)
    pq = DenseIndex.build(data, ids, pq=64, threads=t, keep_vectors=False)
    flat_queries, pq_queries = unit(1_000, 128, 2), unit(10_000, 128, 5)
    return {
        "dense flat 50k x 128, 1,000 queries, k=100": (
            1_000,
            lambda progress: flat.native.search(flat_queries, 100, 1, 0, t, progress=progress),
        ),
        "dense PQ64x4 100k x 128 (general path), 10,000 queries, k=100": (
            10_000,
            lambda progress: pq.native.search(pq_queries, 100, 1, 0, t, progress=progress),
        ),
    }


def multivector_searches(tmp: Path, t: int) -> dict[str, tuple[int, Callable[[Any], Any]]]:
    docs = unit(20_000 * 32, 64, 3)
    doc_offsets = np.arange(0, len(docs) + 1, 32, dtype=np.uint64)
    mv = MultiVectorIndex.build(docs, doc_offsets, [str(i) for i in range(20_000)], tmp / "mv", threads=t)
    q_tokens, q_offsets = unit(1_000 * 16, 64, 4), np.arange(0, 1_000 * 16 + 1, 16, dtype=np.uint64)
    mv_options = _native.MultiVectorSearchOptions(100, threads=t)
    return {
        "multi-vector 20k x 32 tokens (d=64, 2 bits), 1,000 queries of 16 tokens, k=100": (
            1_000,
            lambda progress: mv.native.search(q_tokens, q_offsets, mv_options, progress=progress),
        ),
    }


def bm25_searches(tmp: Path, t: int) -> dict[str, tuple[int, Callable[[Any], Any]]]:
    rng = np.random.default_rng(6)
    corpus = tmp / "corpus.jsonl"
    with open(corpus, "w", encoding="utf-8") as f:
        for i, row in enumerate(zipf_words(rng, 100_000, 40, 30_000)):
            f.write(json.dumps({"_id": f"d{i}", "text": " ".join(f"w{w}" for w in row)}) + "\n")
    bm25 = BM25Index.build(corpus, tmp / "bm25", lang="en", threads=t, quiet=True)
    words = zipf_words(rng, 20_000, 3, 300)
    triples = [(f"q{i}", " ".join(f"w{w}" for w in row), None) for i, row in enumerate(words)]
    return {
        "BM25 100k docs, 20,000 queries of 3 words, k=100": (
            len(triples),
            lambda progress: bm25.native.batch_search(triples, 100, t, progress=progress),
        ),
    }


def impact_searches(tmp: Path, t: int) -> dict[str, tuple[int, Callable[[Any], Any]]]:
    rng = np.random.default_rng(7)
    vectors = tmp / "vectors.jsonl"
    with open(vectors, "w", encoding="utf-8") as f:
        for i, row in enumerate(zipf_words(rng, 50_000, 40, 30_000)):
            vector = {f"t{w}": 1 + (int(w) * 7 + i) % 30 / 10 for w in row}
            f.write(json.dumps({"id": f"d{i}", "vector": vector}) + "\n")
    impact = ImpactIndex.build(vectors, tmp / "impact", threads=t, quiet=True)
    terms = zipf_words(rng, 20_000, 8, 300)
    pairs = [(f"q{i}", [(f"t{w}", 1.0) for w in sorted(set(row))]) for i, row in enumerate(terms)]
    return {
        "impact 50k docs, 20,000 queries of 8 terms, k=100": (
            len(pairs),
            lambda progress: impact.native.batch_search(pairs, 100, t, progress),
        ),
    }


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
    ap.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    args = ap.parse_args()
    t = args.threads
    makers = {
        "dense": dense_searches,
        "multivector": multivector_searches,
        "bm25": bm25_searches,
        "impact": impact_searches,
    }
    with tempfile.TemporaryDirectory() as tmp:
        searches: dict[str, tuple[int, Callable[[Any], Any]]] = {}
        for kind in args.kinds:
            searches.update(makers[kind](Path(tmp), t))
        modes = ("off", "counted", "drawn")
        for name, (nq, call) in searches.items():

            def search(quiet: bool, counter, nq=nq, call=call) -> None:
                """As the index classes' searches call the core."""
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
