"""Whole-process workloads of BM25 search, dense (flat and PQ) search and fusion, one per call,
for timing two builds of clirkit side by side (a change against the commit before it).

    python benches/search_speed.py prepare                 # once: corpus, indexes, vectors, runs
    python benches/search_speed.py bm25 --k 10 --repeat 3  # --collection zipf|scifact, --strategy
    python benches/search_speed.py dense --kind pq         # --kind flat|pq
    python benches/search_speed.py fusion --method rrf     # --method rrf|combmnz

Each workload runs on one thread, so a busy machine disturbs it less, and prints a digest of
its results: two builds that agree print the same line. To compare builds, run the same command
with each build's package first on the path (`PYTHONPATH=<checkout>/python`) under a timer that
alternates the two; indexes and runs come from `prepare` and are read by both.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
from pathlib import Path

import clirkit._native as native
import numpy as np
from clirkit.dense import DenseIndex
from clirkit.fusion import fuse_native

BENCHES = Path(__file__).resolve().parent
WORK = BENCHES / ".work" / "search_speed"
SCIFACT = BENCHES.parent.parent / "shared" / "data" / "beir-scifact"
DENSE_DOCS, DENSE_QUERIES, DIM = 200_000, 1_000, 64


def prepare() -> None:
    sys.path.insert(0, str(BENCHES))
    from fusion_vs_ranx import make_runs
    from golden_outputs import vectors

    WORK.mkdir(parents=True, exist_ok=True)
    zipf = WORK / "zipf"
    if not (zipf / "corpus.jsonl").exists():
        subprocess.run(
            [sys.executable, str(BENCHES / "synthetic" / "gen_zipf_corpus.py"), "--out", str(zipf)]
            + ["--docs", "200000", "--queries", "2000", "--seed", "42"],
            check=True,
        )
    collections = {"zipf": zipf / "corpus.jsonl"}
    if SCIFACT.is_dir():
        collections["scifact"] = SCIFACT / "corpus.jsonl"
    for name, corpus in collections.items():
        index = WORK / f"bm25-{name}"
        if not index.exists():
            native.Bm25Index.build(str(corpus), str(index), lang="en", quiet=True)
    if not (WORK / "queries.npy").exists():
        np.save(WORK / "docs.npy", vectors(DENSE_DOCS, DIM, 1))
        np.save(WORK / "queries.npy", vectors(DENSE_QUERIES, DIM, 2))
    docs = np.load(WORK / "docs.npy")
    ids = [f"d{i}" for i in range(len(docs))]
    for kind, pq in (("flat", None), ("pq", DIM // 2)):
        index = WORK / f"dense-{kind}"
        if not index.exists():
            DenseIndex.build(docs, ids, pq=pq, keep_vectors=pq is None, quiet=True).save(index)
    make_runs(2000, 1000)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def bm25(collection: str, k: int, strategy: str, repeat: int) -> None:
    index = native.Bm25Index.open(str(WORK / f"bm25-{collection}"))
    queries = (WORK / "zipf" if collection == "zipf" else SCIFACT) / "queries.jsonl"
    if strategy == "auto":
        for _ in range(repeat):
            results = index.search_file(str(queries), k=k, threads=1, quiet=True)
        text = repr([(q, results[q]) for q in results.qids()])
    else:
        import json

        texts = [json.loads(line)["text"] for line in open(queries, encoding="utf-8")]
        for _ in range(repeat):
            hits = [index.search(t, k=k, lang="en", strategy=strategy) for t in texts]
        text = repr(hits)
    print(f"bm25 {collection} k={k} {strategy}: {digest(text)}")


def dense(kind: str, k: int, repeat: int) -> None:
    index = native.DenseIndex.open(WORK / f"dense-{kind}")
    queries = np.load(WORK / "queries.npy")
    for _ in range(repeat):
        scores, ids = index.search(queries, k=k, threads=1)
    print(f"dense {kind} k={k}: {digest(repr((scores.tobytes(), ids.tobytes())))}")


def fusion(method: str, repeat: int) -> None:
    paths = sorted((BENCHES / ".work").glob("rrf_2000x1000_run*.trec"))
    runs = [native.NativeRun.read(str(p), threads=1) for p in paths]
    for _ in range(repeat):
        fused = fuse_native(runs, method=method, threads=1)
    print(f"fusion {method}: {digest(repr(fused.to_list()[:50]))} {fused.num_entries}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workload", choices=["prepare", "bm25", "dense", "fusion"])
    ap.add_argument("--collection", default="zipf", choices=["zipf", "scifact"])
    ap.add_argument("--k", type=int, default=1000)
    ap.add_argument("--strategy", default="auto", choices=["auto", "maxscore", "exhaustive"])
    ap.add_argument("--kind", default="pq", choices=["flat", "pq"])
    ap.add_argument("--method", default="rrf", choices=["rrf", "combmnz"])
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    if a.workload == "prepare":
        prepare()
    elif a.workload == "bm25":
        bm25(a.collection, a.k, a.strategy, a.repeat)
    elif a.workload == "dense":
        dense(a.kind, a.k, a.repeat)
    else:
        fusion(a.method, a.repeat)


if __name__ == "__main__":
    main()
