"""PQ fast-scan: clirkit vs FAISS (``PQ{M}x4fs``), side by side in one process.

Recall (10-recall@10 and 10-recall@100 against exact search), training, add and search time
(QPS over a batch of queries at each ``--k``; the median and the best of ``--repeat`` runs that
alternate between the libraries, wall clock and process CPU time; both libraries limited to the
same thread count) for M = d/2 and M = d/4, on:

* real embeddings: BEIR SciFact and XQuAD-R encoded with multilingual-e5-small
  (``benches/encoders/embed_cache.py`` writes them to ``--cache``);
* synthetic clustered vectors (seeded; ``--synthetic N`` rows, d = 384 and 768), generated
  once into a memory-mapped .npy under ``--cache``.

Run with a Python that has both clirkit and faiss-cpu installed, e.g.

    python benches/dense/pq_vs_faiss.py --threads 2 --synthetic 1000000 --queries 1000 --k 100,1000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benches/: bench_common
from bench_common import best_of  # noqa: E402


def synthetic(cache: Path, n: int, d: int, seed: int, centers: int = 1024) -> np.ndarray:
    """n clustered unit vectors (Gaussian blobs around random centers), cached as .npy."""
    path = cache / f"synthetic-{n}x{d}-s{seed}.npy"
    if not path.exists():
        rng = np.random.default_rng(seed)
        c = rng.normal(size=(centers, d)).astype(np.float32)
        tmp = cache / f".{path.name}.tmp"
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(n, d))
        for s in range(0, n, 100_000):
            e = min(n, s + 100_000)
            x = c[rng.integers(0, centers, e - s)] + 0.7 * rng.normal(size=(e - s, d)).astype(np.float32)
            out[s:e] = x / np.linalg.norm(x, axis=1, keepdims=True)
        out.flush()
        del out
        tmp.rename(path)
    return np.load(path, mmap_mode="r")


def exact_topk(x: np.ndarray, q: np.ndarray, k: int) -> np.ndarray:
    """Exact inner-product top-k ids by blocked matrix products (the ground truth)."""
    best_s = np.full((len(q), k), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(q), k), dtype=np.int64)
    for s in range(0, len(x), 200_000):
        block = np.asarray(x[s : s + 200_000])
        sc = q @ block.T
        kk = min(k, sc.shape[1])
        part = np.argpartition(-sc, kk - 1, axis=1)[:, :kk]
        cand_s = np.concatenate([best_s, np.take_along_axis(sc, part, 1)], axis=1)
        cand_i = np.concatenate([best_i, part + s], axis=1)
        order = np.argsort(-cand_s, axis=1, kind="stable")[:, :k]
        best_s = np.take_along_axis(cand_s, order, 1)
        best_i = np.take_along_axis(cand_i, order, 1)
    return best_i


def recall(found: np.ndarray, truth: np.ndarray, at: int) -> float:
    """10-recall@at: share of the exact top-10 found in the first ``at`` results."""
    return float(np.mean([len(set(f[:at]) & set(t[:10])) / 10 for f, t in zip(found, truth)]))


def wall_and_cpu(fn):
    """(wall seconds, process CPU seconds over all threads, result) of one call."""
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - w, time.process_time() - c, out


def row(name: str, x: np.ndarray, m: int, k: int, lib: str, times: tuple, nq: int, found, truth) -> dict:
    train_s, add_s, walls, cpus = times
    return {
        "data": name,
        "n": x.shape[0],
        "d": x.shape[1],
        "M": m,
        "k": k,
        "lib": lib,
        "train_s": train_s,
        "add_s": add_s,
        "search_s": statistics.median(walls),
        "qps": nq / statistics.median(walls),
        "qps_best": nq / min(walls),
        "cpu_qps": nq / statistics.median(cpus),
        "walls": walls,
        "cpus": cpus,
        "r10": recall(found, truth, 10),
        "r100": recall(found, truth, 100) if k >= 100 else float("nan"),
    }


def bench_one(name: str, x: np.ndarray, q: np.ndarray, m: int, args, truth: np.ndarray) -> list[dict]:
    """FAISS PQ{m}x4fs and clirkit pq=m on the same data, training sample and queries."""
    import clirkit
    import faiss

    n, d = x.shape
    rng = np.random.default_rng(0)
    train_rows = np.sort(rng.choice(n, min(n, args.train_size), replace=False))
    train = np.ascontiguousarray(x[train_rows], dtype=np.float32)

    index = faiss.index_factory(d, f"PQ{m}x4fs", faiss.METRIC_INNER_PRODUCT)
    t_train, _ = best_of(lambda: index.train(train), 1)

    def faiss_add():
        for s in range(0, n, 200_000):
            index.add(np.ascontiguousarray(x[s : s + 200_000], dtype=np.float32))

    t_add, _ = best_of(faiss_add, 1)
    # clirkit trains inside build: "train" is a build on the training sample alone, "add" the
    # rest of the full build (encoding and packing every vector).
    ids = [str(i) for i in range(n)]
    xs = np.ascontiguousarray(x, dtype=np.float32)
    opts = {
        "pq": m,
        "train_size": args.train_size,
        "threads": args.threads,
        "keep_vectors": False,
        "quiet": True,
    }
    t_build, idx = best_of(lambda: clirkit.DenseIndex.build(xs, ids, **opts), 1)
    t_train_c, _ = best_of(lambda: clirkit.DenseIndex.build(train, ids[: len(train)], **opts), 1)

    # Searches alternate between the libraries (and the k) so both see the same machine load.
    fw = {k: [] for k in args.k}
    fc = {k: [] for k in args.k}
    cw = {k: [] for k in args.k}
    cc = {k: [] for k in args.k}
    found = {}
    # A pause before each search lets the other library's idle workers stop spinning (OpenMP
    # threads busy-wait after a parallel region), so neither is timed against the other's leftovers.
    for _ in range(args.repeat):
        for k in args.k:
            time.sleep(args.pause)
            w, c, (_, fids) = wall_and_cpu(lambda k=k: index.search(q, k))
            fw[k].append(w)
            fc[k].append(c)
            time.sleep(args.pause)
            w, c, (_, cids) = wall_and_cpu(lambda k=k: idx.search(q, k, threads=args.threads))
            cw[k].append(w)
            cc[k].append(c)
            found[k] = (fids, cids)
    rows = []
    for k in args.k:
        fids, cids = found[k]
        rows.append(row(name, x, m, k, "faiss", (t_train, t_add, fw[k], fc[k]), len(q), fids, truth))
        rows.append(
            row(
                name,
                x,
                m,
                k,
                "clirkit",
                (t_train_c, max(0.0, t_build - t_train_c), cw[k], cc[k]),
                len(q),
                cids,
                truth,
            )
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", default="/work/cache/emb")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--synthetic", type=int, default=1_000_000, help="synthetic rows (0 = skip)")
    ap.add_argument("--dims", default="384,768")
    ap.add_argument("--queries", type=int, default=1000, help="synthetic query batch")
    ap.add_argument("--train-size", type=int, default=65_536)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--pause", type=float, default=0.2, help="seconds of rest before each search")
    ap.add_argument("--k", default="100", help="result depths searched, comma-separated (e.g. 100,1000)")
    ap.add_argument(
        "--real",
        default="beir-scifact,xquad-r",
        help="cached real sets: name or name=DIR, comma-separated ('' = skip)",
    )
    ap.add_argument("--json", default=None, help="also write the rows as JSON here")
    args = ap.parse_args()
    args.k = [int(k) for k in args.k.split(",")]

    import clirkit
    import faiss
    from clirkit.dense import fastscan_kernels

    faiss.omp_set_num_threads(args.threads)
    os.environ.setdefault("RAYON_NUM_THREADS", str(args.threads))
    cache = Path(args.cache)
    print(
        f"# {platform.processor() or platform.machine()}, faiss {faiss.__version__} "
        f"({faiss.get_compile_options().strip()}), clirkit {clirkit.__version__} "
        f"kernels {fastscan_kernels()}, threads={args.threads}"
    )
    sets = []
    for spec in filter(None, args.real.split(",")):
        # "name" reads the cache written by embed_cache.py; "name=DIR" another directory with
        # the same file names (e.g. embeddings written by `clirkit encode`).
        name, _, where = spec.partition("=")
        folder = Path(where) if where else cache
        docs, queries = folder / f"{name}.docs.npy", folder / f"{name}.queries.npy"
        if docs.exists() and queries.exists():
            sets.append((name, np.load(docs), np.load(queries)))
        else:
            print(f"# skipping {name}: no {docs} / {queries} (run benches/encoders/embed_cache.py first)")
    if args.synthetic:
        for d in map(int, args.dims.split(",")):
            x = synthetic(cache, args.synthetic, d, seed=d)
            q = np.ascontiguousarray(synthetic(cache, args.queries, d, seed=d + 1))
            sets.append((f"synthetic-{d}", x, q))
    rows = []
    header = (
        "| data | n | d | M | k | lib | train s | add s | search s | QPS (median) | QPS (best) | "
        "CPU QPS (median) | 10-R@10 | 10-R@100 |"
    )
    print(header)
    print("|" + "---|" * 14)
    for name, x, q in sets:
        q = np.ascontiguousarray(q, dtype=np.float32)
        truth = exact_topk(x, q, 10)
        for m in (x.shape[1] // 2, x.shape[1] // 4):
            new = bench_one(name, x, q, m, args, truth)
            rows.extend(new)
            for f, c in zip(new[::2], new[1::2]):
                for r in (f, c):
                    print(
                        f"| {r['data']} | {r['n']} | {r['d']} | {r['M']} | {r['k']} | {r['lib']} | "
                        f"{r['train_s']:.2f} | {r['add_s']:.2f} | {r['search_s']:.3f} | {r['qps']:.0f} | "
                        f"{r['qps_best']:.0f} | {r['cpu_qps']:.0f} | {r['r10']:.4f} | {r['r100']:.4f} |",
                        flush=True,
                    )
                print(
                    f"|   | ratio clirkit/faiss at k={c['k']}: QPS median {c['qps'] / f['qps']:.2f}x, "
                    f"best {c['qps_best'] / f['qps_best']:.2f}x, CPU {c['cpu_qps'] / f['cpu_qps']:.2f}x; "
                    f"R@10 {c['r10'] - f['r10']:+.4f}, R@100 {c['r100'] - f['r100']:+.4f} "
                    "| | | | | | | | | | | | | |",
                    flush=True,
                )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
