"""Orchestration overhead of sliding-window reranking per window, the backend excluded.

Q queries (default 5,000) x 100 candidates, plan 100/20/10 (9 windows per query, 45,000 in
all), passages of ~60 words. The backend answers instantly with a fixed permutation and times
itself; the overhead is (wall time of ``clirkit.rerank.rerank`` - backend time) / windows, which
includes loading the run, queries and passages, building every request, the Rust window state,
the cache and the final result. Three settings: no cache, a cold SQLite cache (every answer
committed), and the warm cache (a rerun served entirely from it).

    python benches/rerank/rerank_overhead.py [--queries 5000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import tempfile
import time
from pathlib import Path
from typing import Iterator, Sequence, Tuple

from clirkit import __version__, write_run
from clirkit.rerank import Backend, WindowRequest, WindowResult, rerank


class InstantBackend(Backend):
    """Reverses every window; counts the time spent producing answers."""

    identity = "instant-reverse"

    def __init__(self) -> None:
        self.seconds = 0.0

    def rank(self, requests: Sequence[WindowRequest]) -> Iterator[Tuple[int, WindowResult]]:
        for i, req in enumerate(requests):
            t = time.perf_counter()
            result = WindowResult(list(range(len(req.doc_ids), 0, -1)))
            self.seconds += time.perf_counter() - t
            yield i, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=5000)
    ap.add_argument("--candidates", type=int, default=100)
    args = ap.parse_args()
    rng = random.Random(1)
    words = [f"w{i}" for i in range(5000)]
    n_docs = 200_000
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        corpus, queries = tmp_path / "corpus.jsonl", tmp_path / "queries.jsonl"
        run_path = tmp_path / "run.trec"
        with open(corpus, "w") as f:
            for d in range(n_docs):
                f.write(json.dumps({"_id": f"d{d}", "text": " ".join(rng.choices(words, k=60))}) + "\n")
        with open(queries, "w") as f:
            for q in range(args.queries):
                f.write(json.dumps({"_id": f"q{q}", "text": " ".join(rng.choices(words, k=8))}) + "\n")
        run = {
            f"q{q}": {
                f"d{d}": float(args.candidates - i)
                for i, d in enumerate(rng.sample(range(n_docs), args.candidates))
            }
            for q in range(args.queries)
        }
        write_run(run_path, run)
        print(
            f"# {platform.node()} {platform.machine()}, {os.cpu_count()} cores; clirkit {__version__}; "
            f"{args.queries} queries x {args.candidates} candidates, plan 100/20/10"
        )
        print(f"{'setting':24} {'windows':>8} {'wall s':>8} {'backend s':>10} {'overhead/window':>16}")
        cache = tmp_path / "cache.sqlite"
        settings = [("no cache", None), ("cold SQLite cache", cache), ("warm cache (rerun)", cache)]
        for name, cache_path in settings:
            backend = InstantBackend()
            t = time.perf_counter()
            _, stats = rerank(run_path, queries, corpus, backend, cache=cache_path, progress=False)
            wall = time.perf_counter() - t
            per_window = (wall - backend.seconds) / stats.windows
            print(
                f"{name:24} {stats.windows:8d} {wall:8.2f} {backend.seconds:10.3f} "
                f"{per_window * 1e3:13.3f} ms"
            )


if __name__ == "__main__":
    main()
