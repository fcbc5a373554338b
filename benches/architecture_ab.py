"""Same-minute A/B of two clirkit builds: one workload per process, builds alternated.
Run each build's ``python/`` first on the path (``PYTHONPATH=<checkout>/python``):

    python benches/architecture_ab.py prepare [WORKLOAD ...]  # indexes and inputs under benches/.work/ab
                                                              # (either build; all workloads by default)
    python benches/architecture_ab.py WORKLOAD   # bm25 | impact | impact-maxscore | dense | fusion:
                                                 # seconds and a digest

The fusion workload reads ``rrf_1000x1000_run*.trec`` in the work folder, as written by
``benches/fusion/fusion_vs_ranx.py``'s ``make_runs``.
"""

import hashlib
import json
import sys
import time
from pathlib import Path

import clirkit._native as native
import numpy as np
from clirkit.dense import DenseIndex
from clirkit.fusion import fuse

W = Path(__file__).resolve().parent / ".work" / "ab"
SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "data" / "beir-scifact"


PREPARED = ("bm25", "impact", "dense")  # the workloads with inputs of their own to prepare


def prepare(workloads=PREPARED):
    W.mkdir(parents=True, exist_ok=True)
    if "bm25" in workloads and not (W / "bm25").exists():
        native.Bm25Index.build(str(SCIFACT / "corpus.jsonl"), str(W / "bm25"), lang="en", quiet=True)
    rng = np.random.default_rng(7)
    if "impact" in workloads and not (W / "impact").exists():
        vocab = [f"t{i}" for i in range(30000)]
        zipf = np.minimum(rng.zipf(1.3, size=100_000 * 40), 30000) - 1
        with open(W / "impact.jsonl", "w") as f:
            for d in range(100_000):
                terms = zipf[d * 40 : (d + 1) * 40]
                vec = {vocab[t]: round(float(rng.random() * 3), 2) + 0.01 for t in terms}
                f.write(json.dumps({"id": f"d{d}", "contents": "", "vector": vec}) + "\n")
        native.ImpactIndex.build([str(W / "impact.jsonl")], str(W / "impact"), quiet=True)
        qs = []
        for q in range(300):
            terms = rng.choice(2000, size=8, replace=False)
            qs.append((f"q{q}", [(vocab[t], 1.0 + float(rng.random())) for t in terms]))
        (W / "impact_queries.json").write_text(json.dumps(qs))
    if "dense" in workloads and not (W / "dense").exists():
        docs = rng.standard_normal((200_000, 64)).astype(np.float32)
        ids = [f"d{i}" for i in range(len(docs))]
        DenseIndex.build(docs, ids, pq=16, keep_vectors=False, quiet=True).save(str(W / "dense"))
        np.save(W / "queries.npy", rng.standard_normal((1000, 64)).astype(np.float32))


def digest(x):
    return hashlib.sha256(repr(x).encode()).hexdigest()[:12]


def run(workload):
    t = time.perf_counter()
    if workload == "bm25":
        index = native.Bm25Index.open(str(W / "bm25"))
        for _ in range(3):
            r = index.search_file(str(SCIFACT / "queries.jsonl"), k=1000, threads=1, quiet=True)
        out = [(q, r[q]) for q in r.qids()][:20]
    elif workload == "impact":
        index = native.ImpactIndex.open(str(W / "impact"))
        qs = [(q, [tuple(p) for p in v]) for q, v in json.loads((W / "impact_queries.json").read_text())]
        for _ in range(3):
            r = index.batch_search(qs, k=1000, threads=1, quiet=True)
        out = [(q, r[q]) for q in r.qids()][:20]
    elif workload == "impact-maxscore":  # the same queries, MaxScore named, one search call each
        index = native.ImpactIndex.open(str(W / "impact"))
        qs = [(q, [tuple(p) for p in v]) for q, v in json.loads((W / "impact_queries.json").read_text())]
        for _ in range(3):
            hits = [index.search(v, 1000, "maxscore") for _, v in qs]
        out = list(zip([q for q, _ in qs], hits))[:20]
    elif workload == "dense":
        index = native.DenseIndex.open(str(W / "dense"))
        queries = np.load(W / "queries.npy")
        for _ in range(3):
            scores, ids = index.search(queries, k=100, threads=1)
        out = (scores.tobytes(), ids.tobytes())
    elif workload == "fusion":
        paths = sorted(str(p) for p in W.glob("rrf_1000x1000_run*.trec"))
        for _ in range(1):
            fuse(paths, output=str(W / "fused.trec"), tag="clirkit", threads=1)
        out = (W / "fused.trec").read_bytes()
    print(f"{workload} {time.perf_counter() - t:.3f} s {digest(out)}")


if __name__ == "__main__":
    if sys.argv[1] == "prepare":
        prepare(sys.argv[2:] or PREPARED)
    else:
        run(sys.argv[1])
