"""Multi-vector late interaction, side by side in one run: clirkit's PLAID-style index (2- and 4-bit
residuals), exact MaxSim with numpy/BLAS, clirkit's exact path, and fast-plaid (run in its own virtual
environment through ``--peer-python``, when given): QPS, top-10 agreement with exact MaxSim, index size.

Two collections:

* ``scifact``: BEIR SciFact, every document and test query encoded per token with
  ``all-MiniLM-L6-v2-int8`` (d = 384) by ``clirkit encode --multivector``, cached under ``--work``;
* ``synthetic``: ``--tokens`` unit token vectors (d = ``--dim``) in documents of 50-150 tokens around
  1,024 seeded topic directions, and queries of 32 tokens drawn near one document's tokens each.

    python benches/multivector/multivector_bench.py scifact --work /tmp/mvbench --threads 2
    python benches/multivector/multivector_bench.py synthetic --work /tmp/mvbench --tokens 1000000 --dim 128 \
        --peer-python /work/venvs/peers-mv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

THREADS = os.environ.get("MV_BENCH_THREADS", "2")
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, THREADS)

import numpy as np  # noqa: E402  (thread limits must be set before numpy loads BLAS)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benches/: bench_common
from bench_common import best_of  # noqa: E402

SHARED = Path(__file__).resolve().parents[3] / "shared"
K = 10


def synthetic(work: Path, tokens: int, dim: int, queries: int, seed: int = 0) -> tuple[Path, Path]:
    """Seeded clustered documents and queries as token files (cached)."""
    from clirkit.encoders.tokens import token_paths

    docs, qs = work / f"syn{tokens}d{dim}", work / f"syn{tokens}d{dim}-queries"
    if token_paths(docs)["ids"].exists() and token_paths(qs)["ids"].exists():
        return docs, qs
    rng = np.random.default_rng(seed)
    topics = rng.standard_normal((1024, dim)).astype(np.float32)
    lengths = []
    while sum(lengths) < tokens:
        lengths.append(int(rng.integers(50, 151)))
    lengths[-1] -= sum(lengths) - tokens
    if lengths[-1] <= 0:
        lengths.pop()
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    matrix = np.empty((int(offsets[-1]), dim), dtype=np.float32)
    for a, b in zip(offsets[:-1], offsets[1:]):
        # Each document draws from a few topics of its own.
        own = topics[rng.integers(0, len(topics), 8)]
        rows = own[rng.integers(0, 8, b - a)] + 0.6 * rng.standard_normal((b - a, dim)).astype(np.float32)
        matrix[a:b] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    save(docs, matrix, offsets, [f"doc{d}" for d in range(len(lengths))])
    picks = rng.integers(0, len(lengths), queries)
    q = np.empty((queries * 32, dim), dtype=np.float32)
    for i, d in enumerate(picks):
        rows = matrix[rng.integers(offsets[d], offsets[d + 1], 32)] + 0.5 * rng.standard_normal(
            (32, dim)
        ).astype(np.float32) / np.sqrt(dim)
        q[i * 32 : (i + 1) * 32] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    save(qs, q, np.arange(0, queries * 32 + 1, 32), [f"q{i}" for i in range(queries)])
    return docs, qs


def save(prefix: Path, tokens: np.ndarray, offsets: np.ndarray, ids: list[str]) -> None:
    from clirkit.encoders.tokens import token_paths

    paths = token_paths(prefix)
    np.save(paths["tokens"], tokens)
    np.save(paths["offsets"], np.asarray(offsets, dtype=np.int64))
    paths["ids"].write_text("".join(i + "\n" for i in ids), encoding="utf-8")


def scifact(work: Path, max_length: int, threads: int) -> tuple[Path, Path]:
    """SciFact documents and test queries encoded per token (cached)."""
    from clirkit.cli import main
    from clirkit.encoders.tokens import token_paths

    model = SHARED / "models" / "all-MiniLM-L6-v2-int8"
    data = SHARED / "data" / "beir-scifact"
    docs, qs = work / f"scifact{max_length}", work / f"scifact{max_length}-queries"
    common = ["encode", "--multivector", "--model", str(model), "--max-length", str(max_length)]
    common += ["--threads", str(threads), "--quiet"]
    if not token_paths(docs)["ids"].exists():
        main([*common, "--corpus", str(data / "corpus.jsonl"), "--output", str(docs)])
    if not token_paths(qs)["ids"].exists():
        main([*common, "--queries", str(data / "queries.jsonl"), "--output", str(qs)])
    return docs, qs


def numpy_maxsim(
    docs: np.ndarray, doff: np.ndarray, queries: np.ndarray, qoff: np.ndarray, k: int
) -> np.ndarray:
    """Top-k document numbers per query by exact MaxSim: one BLAS product per query, then a
    segmented max over each document's columns."""
    starts = doff[:-1].astype(np.int64)
    out = np.empty((len(qoff) - 1, k), dtype=np.int64)
    for q in range(len(qoff) - 1):
        sims = queries[qoff[q] : qoff[q + 1]] @ docs.T
        scores = np.maximum.reduceat(sims, starts, axis=1).sum(axis=0)
        top = np.argpartition(-scores, k)[:k]
        out[q] = top[np.lexsort((top, -scores[top]))]
    return out


def agreement(got: np.ndarray, want: np.ndarray, k: int = K) -> float:
    return float(np.mean([len(set(g[:k]) & set(w[:k])) / k for g, w in zip(got, want)]))


PEER = r"""
import json, sys, time, shutil
import numpy as np, torch
from fast_plaid import search
torch.set_num_threads(int(sys.argv[4]))
docs = np.load(sys.argv[1] + ".tokens.npy"); doff = np.load(sys.argv[1] + ".offsets.npy")
qs = np.load(sys.argv[2] + ".tokens.npy"); qoff = np.load(sys.argv[2] + ".offsets.npy")
index_dir = sys.argv[3]
shutil.rmtree(index_dir, ignore_errors=True)
documents = [torch.from_numpy(np.ascontiguousarray(docs[a:b])) for a, b in zip(doff[:-1], doff[1:])]
queries = [torch.from_numpy(np.ascontiguousarray(qs[a:b])) for a, b in zip(qoff[:-1], qoff[1:])]
out = {}
start = time.perf_counter()
fp = search.FastPlaid(index=index_dir, device="cpu")
fp.create(documents_embeddings=documents, nbits=int(sys.argv[5]), kmeans_niters=4)
out["build_s"] = time.perf_counter() - start
import os
out["bytes"] = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(index_dir) for f in fs)
best = float("inf")
for _ in range(2):
    start = time.perf_counter()
    results = fp.search(queries_embeddings=queries, top_k=10, show_progress=False)
    best = min(best, time.perf_counter() - start)
out["search_s"] = best
out["ids"] = [[int(d) for d, _ in r] for r in results]
print(json.dumps(out))
"""


def run_peer(python: str, docs: Path, qs: Path, work: Path, threads: int, nbits: int) -> dict | None:
    try:
        proc = subprocess.run(
            [
                python,
                "-c",
                PEER,
                str(docs),
                str(qs),
                str(work / f"fastplaid-{docs.name}"),
                str(threads),
                str(nbits),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
            check=False,
            timeout=1800,
        )
    except subprocess.TimeoutExpired:
        print("fast-plaid did not finish within 30 minutes", file=sys.stderr)
        return None
    if proc.returncode != 0:
        print(f"fast-plaid failed:\n{proc.stderr[-3000:]}", file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("collection", choices=["scifact", "synthetic", "files"])
    parser.add_argument("--docs-prefix", type=Path, help="files: token files of the documents")
    parser.add_argument("--queries-prefix", type=Path, help="files: token files of the queries")
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=int(THREADS))
    parser.add_argument("--max-length", type=int, default=256, help="scifact: tokens per document")
    parser.add_argument("--tokens", type=int, default=1_000_000, help="synthetic: token vectors")
    parser.add_argument("--dim", type=int, default=128, help="synthetic: dimension")
    parser.add_argument("--queries", type=int, default=300, help="synthetic: queries")
    parser.add_argument("--centroids", type=int, default=None)
    parser.add_argument("--peer-python", help="a Python with fast-plaid installed")
    parser.add_argument("--peer-nbits", type=int, nargs="+", default=[2], help="fast-plaid residual bits")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)

    from clirkit.multivector import MultiVectorIndex, load_tokens, maxsim_search

    if args.collection == "scifact":
        docs_prefix, q_prefix = scifact(args.work, args.max_length, args.threads)
    elif args.collection == "files":
        docs_prefix, q_prefix = args.docs_prefix, args.queries_prefix
    else:
        docs_prefix, q_prefix = synthetic(args.work, args.tokens, args.dim, args.queries)
    docs, doff, _ = load_tokens(docs_prefix)
    queries, qoff, _ = load_tokens(q_prefix)
    docs = np.ascontiguousarray(docs)
    nq, ntok, dim = len(qoff) - 1, len(docs), docs.shape[1]
    print(
        f"# {args.collection}: {len(doff) - 1} documents, {ntok} tokens, d={dim}, {nq} queries, {args.threads} threads"
    )
    print("| system | QPS | bytes/token | top-10 agreement with exact | build s |")
    print("|---|---:|---:|---:|---:|", flush=True)

    class Rows(list):
        def append(self, row: tuple) -> None:
            name, qps, size, agree, build = row
            print(f"| {name} | {qps:,.1f} | {size:.1f} | {agree:.3f} | {build} |", flush=True)

    rows = Rows()

    numpy_s, exact_ids = best_of(lambda: numpy_maxsim(docs, doff, queries, qoff, K))
    rows.append(("exact MaxSim, numpy/BLAS (f32 matrix)", nq / numpy_s, 4 * dim, 1.0, "-"))
    clirkit_exact_s, (_, ids) = best_of(
        lambda: maxsim_search(docs, doff, queries, qoff, K, threads=args.threads), 2
    )
    rows.append(
        ("exact MaxSim, clirkit (f32 matrix)", nq / clirkit_exact_s, 4 * dim, agreement(ids, exact_ids), "-")
    )

    for nbits in (2, 4):
        index_dir = args.work / f"index-{docs_prefix.name}-{nbits}"
        build_s, index = best_of(
            lambda nbits=nbits, index_dir=index_dir: MultiVectorIndex.build(
                docs,
                doff,
                [str(i) for i in range(len(doff) - 1)],
                index_dir,
                nbits=nbits,
                centroids=args.centroids,
                threads=args.threads,
            )  # fmt: skip
        )
        per_token = index.compressed_bytes() / ntok
        for label, opts in (("k=10 defaults", {}), ("ndocs=1024", {"ncells": 2, "ndocs": 1024})):
            search_s, (_, ids) = best_of(
                lambda opts=opts, index=index: index.search(queries, qoff, K, threads=args.threads, **opts), 2
            )
            rows.append(
                (
                    f"clirkit PLAID {nbits}-bit, {label} ({index.ncentroids} centroids)",
                    nq / search_s,
                    per_token,
                    agreement(ids, exact_ids),
                    f"{build_s:.1f}",
                )
            )
    if args.peer_python:
        for nbits in args.peer_nbits:
            peer = run_peer(args.peer_python, docs_prefix, q_prefix, args.work, args.threads, nbits)
            if peer:
                rows.append(
                    (
                        f"fast-plaid {nbits}-bit, top_k=10 defaults",
                        nq / peer["search_s"],
                        peer["bytes"] / ntok,
                        agreement(np.array(peer["ids"]), exact_ids),
                        f"{peer['build_s']:.1f}",
                    )
                )


if __name__ == "__main__":
    main()
