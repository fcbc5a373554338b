#!/usr/bin/env python3
"""Scale benchmark (issue 17): build and search a NeuCLIR-shaped BM25 index and PQ dense indexes of
synthetic data at a given size (10M by default), reporting time, peak RSS and disk per phase.

Phases (each generates its data, measures, and removes its files before the next, so the disk never holds
more than one phase; free disk is checked against an estimate first and a phase that does not fit is refused):

* ``bm25``: ``gen_zipf_corpus.py --langs zh,fa,ru --doc-median 300`` -> ``clirkit index bm25 --lang-field
  lang`` -> ``clirkit search bm25`` (``--queries`` queries, k=1000).
* ``dense384`` / ``dense768``: ``gen_vectors.py`` (float16 .npy) -> ``clirkit index dense --pq d/2`` (4-bit,
  re-scoring vectors stored) -> ``clirkit search dense`` (k=100) -> 10-recall@10 against exact search on the
  first ``--recall-queries`` queries (exact scores computed a chunk of the .npy at a time).

Every command runs under ``/usr/bin/time -v``: peak RSS is the whole process's maximum resident set
(touched pages of mapped files included). Results are appended as JSON lines to ``--results``.

Run ``python benches/scale_10m.py --work /work/scratch/scale --docs 10000000 --vectors 10000000``.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

BENCHES = Path(__file__).resolve().parent
# Disk per item, rounded up from the runs recorded in benches/RESULTS.md (bytes): JSONL corpus and index per
# NeuCLIR-shaped document; .npy (float16) and index (float32 vectors + 4-bit codes) per vector dimension.
CORPUS_BYTES_PER_DOC = 2_800
BM25_INDEX_BYTES_PER_DOC = 700
NPY_BYTES_PER_DIM = 2
DENSE_INDEX_BYTES_PER_DIM = 4.25
SAFETY_BYTES = 3 << 30


def timed(cmd: list[str], log: Path) -> dict[str, float]:
    """Run ``cmd`` under ``/usr/bin/time -v``; its wall seconds, CPU seconds and peak RSS (MiB)."""
    with open(log, "w") as err:
        done = subprocess.run(["/usr/bin/time", "-v", *cmd], stderr=err, stdout=subprocess.DEVNULL)
    text = log.read_text()
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{text[-3000:]}")

    def field(name: str) -> str:
        return re.search(rf"{re.escape(name)}: (.+)", text).group(1).strip()

    wall = 0.0
    for part in field("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":"):
        wall = wall * 60 + float(part)
    return {
        "wall_s": round(wall, 1),
        "cpu_s": round(float(field("User time (seconds)")) + float(field("System time (seconds)")), 1),
        "peak_rss_mib": round(int(field("Maximum resident set size (kbytes)")) / 1024, 1),
    }


def disk(path: Path) -> int:
    """Bytes under ``path``."""
    return (
        sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        if path.is_dir()
        else path.stat().st_size
    )


def need_free(work: Path, need: float, phase: str) -> None:
    free = shutil.disk_usage(work).free
    if free < need + SAFETY_BYTES:
        sys.exit(
            f"{phase}: needs about {need / 2**30:.1f} GiB (+{SAFETY_BYTES / 2**30:.0f} GiB margin), "
            f"{free / 2**30:.1f} GiB free under {work}; give a smaller size or free disk"
        )


def clirkit(args: argparse.Namespace) -> list[str]:
    return [args.python, "-m", "clirkit.cli"]


def bm25_phase(args: argparse.Namespace, report: dict) -> None:
    work = args.work / "bm25"
    need_free(args.work, args.docs * (CORPUS_BYTES_PER_DOC + BM25_INDEX_BYTES_PER_DOC), "bm25")
    data, index, run = work / "data", work / "index", work / "run.trec"
    work.mkdir(parents=True, exist_ok=True)
    report["generate"] = timed(
        [args.python, str(BENCHES / "gen_zipf_corpus.py"), "--out", str(data), "--docs", str(args.docs),
         "--queries", str(args.queries), "--langs", "zh,fa,ru", "--doc-median", "300", "--vocab", "300000",
         "--quiet"], work / "generate.log")  # fmt: skip
    report["corpus_bytes"] = disk(data / "corpus.jsonl")
    report["build"] = timed(
        [*clirkit(args), "index", "bm25", "--corpus", str(data / "corpus.jsonl"), "--index", str(index),
         "--lang-field", "lang", "--threads", str(args.threads), "--memory-mb", str(args.bm25_memory_mb),
         "--quiet"], work / "build.log")  # fmt: skip
    report["index_bytes"] = disk(index)
    report["search"] = timed(
        [*clirkit(args), "search", "bm25", "--index", str(index), "--queries", str(data / "queries.jsonl"),
         "--k", "1000", "--threads", str(args.threads), "--output", str(run), "--quiet"],
        work / "search.log")  # fmt: skip
    report["search"]["qps"] = round(args.queries / report["search"]["wall_s"], 1)
    shutil.rmtree(work)


def exact_top10(npy: Path, queries: np.ndarray) -> np.ndarray:
    """Exact inner-product top 10 of each query, a chunk of the (float16) matrix at a time."""
    x = np.load(npy, mmap_mode="r")
    best_scores = np.full((len(queries), 10), -np.inf, dtype=np.float32)
    best_ids = np.zeros((len(queries), 10), dtype=np.int64)
    step = 262_144
    for first in range(0, len(x), step):
        scores = queries @ np.asarray(x[first : first + step], dtype=np.float32).T
        scores = np.concatenate([best_scores, scores], axis=1)
        ids = np.concatenate([best_ids, np.broadcast_to(np.arange(first, first + scores.shape[1] - 10), (len(queries), scores.shape[1] - 10))], axis=1)  # fmt: skip
        top = np.argpartition(-scores, 9, axis=1)[:, :10]
        best_scores = np.take_along_axis(scores, top, axis=1)
        best_ids = np.take_along_axis(ids, top, axis=1)
    return best_ids


def recall_at_10(run: Path, truth: np.ndarray) -> float:
    """10-recall@10 of a TREC run whose doc ids are ``v{row}`` against exact top-10 row ids."""
    found: dict[str, list[int]] = {}
    with open(run) as f:
        for line in f:
            qid, _, doc, rank, *_ = line.split()
            if int(rank) <= 10:
                found.setdefault(qid, []).append(int(doc[1:]))
    hits = [len(set(found.get(f"q{i}", [])) & set(t.tolist())) for i, t in enumerate(truth)]
    return round(float(np.mean(hits)) / 10, 4)


def dense_phase(args: argparse.Namespace, dim: int, report: dict) -> None:
    work = args.work / f"dense{dim}"
    need_free(args.work, args.vectors * dim * (NPY_BYTES_PER_DIM + DENSE_INDEX_BYTES_PER_DIM), f"dense{dim}")
    data, index, run = work / "data", work / "index", work / "run.trec"
    work.mkdir(parents=True, exist_ok=True)
    report["generate"] = timed(
        [args.python, str(BENCHES / "gen_vectors.py"), "--out", str(data), "--n", str(args.vectors),
         "--dim", str(dim), "--queries", str(args.dense_queries)], work / "generate.log")  # fmt: skip
    report["npy_bytes"] = disk(data / "vectors.npy")
    report["build"] = timed(
        [*clirkit(args), "index", "dense", "--embeddings", str(data / "vectors.npy"), "--ids",
         str(data / "ids.txt"), "--index", str(index), "--pq", str(dim // 2), "--threads", str(args.threads),
         "--memory-mb", str(args.dense_memory_mb), "--quiet"], work / "build.log")  # fmt: skip
    report["index_bytes"] = disk(index)
    report["search"] = timed(
        [*clirkit(args), "search", "dense", "--index", str(index), "--queries", str(data / "queries.npy"),
         "--qids", str(data / "qids.txt"), "--k", "100", "--threads", str(args.threads), "--output", str(run),
         "--quiet"], work / "search.log")  # fmt: skip
    report["search"]["qps"] = round(args.dense_queries / report["search"]["wall_s"], 1)
    queries = np.load(data / "queries.npy")[: args.recall_queries]
    report["recall_10_at_10"] = recall_at_10(run, exact_top10(data / "vectors.npy", queries))
    report["recall_queries"] = len(queries)
    shutil.rmtree(work)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True, help="scratch directory (emptied phase by phase)")
    ap.add_argument("--phases", default="bm25,dense384,dense768")
    ap.add_argument("--docs", type=int, default=10_000_000)
    ap.add_argument("--queries", type=int, default=5_000)
    ap.add_argument("--vectors", type=int, default=10_000_000)
    ap.add_argument("--dense-queries", type=int, default=1_000)
    ap.add_argument("--recall-queries", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bm25-memory-mb", type=int, default=1024)
    ap.add_argument("--dense-memory-mb", type=int, default=256)
    ap.add_argument("--python", default=sys.executable, help="the Python with clirkit installed")
    ap.add_argument(
        "--results", type=Path, default=None, help="JSON lines to append (default WORK/results.jsonl)"
    )
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    results = args.results or args.work / "results.jsonl"
    for phase in [p for p in args.phases.split(",") if p]:
        report: dict = {"phase": phase, "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
        if phase == "bm25":
            report |= {"docs": args.docs, "queries": args.queries}
            bm25_phase(args, report)
        elif phase.startswith("dense"):
            report |= {"vectors": args.vectors, "queries": args.dense_queries}
            dense_phase(args, int(phase[len("dense") :]), report)
        else:
            sys.exit(f"unknown phase {phase!r} (bm25, dense384, dense768)")
        print(json.dumps(report), flush=True)
        with open(results, "a") as f:
            f.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    main()
