#!/usr/bin/env python3
"""Impact search side by side: clirkit's ImpactIndex vs PISA (pyterrier-pisa, quantized scorer), in one run.

Both index the same integer impacts: synthetic SPLADE-like vectors (seeded: Zipfian term choice over a
30522-term vocabulary, 100-200 terms per document, 20-40 per query, weights quantized ×100 as clirkit and
Anserini do) written with integer weights, indexed by clirkit with ``--quantize 1`` and by PISA's
pre-tokenized indexer with ``scale=1``, queried with the same integer query weights (PISA:
``query_toks``, ``toks_scale=1``, block-max MaxScore). With ``--scifact-cache``, SciFact's splade-tiny-en
vectors (``benches/encoders/sparse_cache.py``) are quantized ×100 here the way clirkit does and compared the same way. Each system runs in its own worker process (its own Python): one
builds the index, one opens it and reports batch-search QPS at each k (median of timed passes over the
whole query set after a warm-up pass; each pass is one batch call returning the system's result
object). The runs' top-10 scores are compared as a check that both searched the same vectors.

    python benches/impact/impact_vs_pisa.py --docs 1000000 --queries 200 --threads 2 \
        --scifact-cache /work/cache/sparse --clirkit-python /work/venvs/impact/bin/python --peers-python /work/venvs/peers/bin/python
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]  # benches/
sys.path.insert(0, str(HERE))
import bench_common as bc

VOCAB = 30522


def generate(path: Path, count: int, lo: int, hi: int, seed: int, prefix: str) -> None:
    """Integer-impact vectors: terms drawn by a Zipf law over the vocabulary (repeats dropped, the
    first draws kept), weights from a gamma law (most small, a few large, as SPLADE's), ×100 rounded."""
    import numpy as np

    rng = np.random.default_rng(seed)
    cdf = np.cumsum(1.0 / (np.arange(1, VOCAB + 1) + 20.0))
    cdf /= cdf[-1]
    vocab = [f"w{i}" for i in range(VOCAB)]
    with open(path, "w", encoding="utf-8") as f:
        for i in range(count):
            n = int(rng.integers(lo, hi + 1))
            draws = np.searchsorted(cdf, rng.random(3 * n))
            _, first = np.unique(draws, return_index=True)
            terms = draws[np.sort(first)[:n]]
            weights = np.floor(rng.gamma(1.2, 0.5, size=len(terms)) * 100 + 0.5).astype(int) + 1
            body = ", ".join(f'"{vocab[t]}": {w}' for t, w in zip(terms.tolist(), weights.tolist()))
            f.write(f'{{"id": "{prefix}{i}", "contents": "", "vector": {{{body}}}}}\n')


def read_vectors(path: Path) -> list[tuple[str, dict[str, int]]]:
    return [(bc.doc_id(r), r["vector"]) for r in bc.iter_jsonl(path)]


def index_worker(system: str, spec: dict) -> dict:
    docs, index, threads = Path(spec["docs"]), Path(spec["index"]), spec["threads"]
    t0 = time.perf_counter()
    if system == "clirkit":
        from clirkit import ImpactIndex

        ImpactIndex.build(docs, index, quantize=1, threads=threads, quiet=True)
    else:
        from pyterrier_pisa import PisaIndex
        from pyterrier_pisa.indexers import PisaIndexingMode

        pisa = PisaIndex(str(index), stemmer="none", stops="none", threads=threads)
        indexer = pisa.toks_indexer(mode=PisaIndexingMode.overwrite, scale=1.0)
        indexer.index({"docno": d, "toks": v} for d, v in read_vectors(docs))
    return {"index_seconds": time.perf_counter() - t0}


def search_worker(system: str, spec: dict) -> dict:
    index, threads, ks = Path(spec["index"]), spec["threads"], spec["ks"]
    queries = read_vectors(Path(spec["queries"]))
    if system == "clirkit":
        from clirkit import ImpactIndex

        idx = ImpactIndex.open(index)

        def search(k: int):
            return idx.batch_search(queries, k=k, threads=threads, quiet=True)

        def top10(res) -> dict:
            return {q: [round(s) for _, s in res[q][:10]] for q, _ in queries}
    else:
        import pandas as pd
        from pyterrier_pisa import PisaIndex

        pisa = PisaIndex(str(index), stemmer="none", stops="none", threads=threads)
        retrievers = {
            k: pisa.quantized(
                num_results=k, threads=threads, query_algorithm="block_max_maxscore", toks_scale=1.0
            )
            for k in ks
        }
        frame = pd.DataFrame(
            {
                "qid": [q for q, _ in queries],
                "query": ["" for _ in queries],
                "query_toks": [v for _, v in queries],
            }
        )

        def search(k: int):
            return retrievers[k].transform(frame)

        def top10(res) -> dict:
            out: dict = {}
            for qid, score, rank in zip(res["qid"], res["score"], res["rank"]):
                if rank < 10:
                    out.setdefault(str(qid), []).append(round(float(score)))
            return {q: sorted(out.get(q, []), reverse=True) for q, _ in queries}

    out: dict = {"qps": {}}
    for k in ks:
        search(k)  # warm-up
        times, res = bc.timed_passes(lambda k=k: search(k), spec["min_seconds"], 3, 20)
        out["qps"][str(k)] = len(queries) / bc.median(times)
        if k == min(ks):
            out["top10"] = top10(res)
    return out


def run_worker(python: str, mode: str, system: str, spec: dict, threads: int) -> dict:
    cmd = [python, __file__, "--worker", mode, "--system", system, "--spec", json.dumps(spec)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=bc.thread_env(threads))
    if proc.returncode != 0:
        raise RuntimeError(f"{system} {mode} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--worker", choices=["index", "search"])
    p.add_argument("--system")
    p.add_argument("--spec")
    p.add_argument("--docs", type=int, default=1_000_000, help="synthetic documents (0: none)")
    p.add_argument(
        "--scifact-cache",
        help="directory of benches/encoders/sparse_cache.py's SciFact vectors (float weights)",
    )
    p.add_argument("--queries", type=int, default=2000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ks", default="10,1000")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--min-seconds", type=float, default=3.0)
    p.add_argument("--search-only", action="store_true", help="reuse the indexes a previous run built")
    p.add_argument("--work", default=str(HERE / ".work" / "impact"))
    p.add_argument("--clirkit-python", default=sys.executable)
    p.add_argument("--peers-python", default="/work/venvs/peers/bin/python")
    args = p.parse_args()
    if args.worker:
        spec = json.loads(args.spec)
        result = (index_worker if args.worker == "index" else search_worker)(args.system, spec)
        print(json.dumps(result))
        return 0

    ks = [int(k) for k in args.ks.split(",")]
    datasets = []
    if args.docs > 0:
        work = Path(args.work) / f"zipf{args.docs}-s{args.seed}"
        work.mkdir(parents=True, exist_ok=True)
        docs, queries = work / "docs.vectors.jsonl", work / "queries.vectors.jsonl"
        if not docs.exists():
            generate(docs.with_suffix(".tmp"), args.docs, 100, 200, args.seed, "d")
            docs.with_suffix(".tmp").rename(docs)
        if not queries.exists():
            generate(queries, args.queries, 20, 40, args.seed + 1, "q")
        datasets.append(
            (f"synthetic SPLADE-like, {args.docs} docs, {args.queries} queries", work, docs, queries)
        )
    if args.scifact_cache:
        work = Path(args.work) / "scifact"
        work.mkdir(parents=True, exist_ok=True)
        cache = Path(args.scifact_cache)
        docs, queries = work / "docs.vectors.jsonl", work / "queries.vectors.jsonl"
        quantize_file(cache / "beir-scifact.docs.vectors.jsonl", docs)
        quantize_file(cache / "beir-scifact.queries.vectors.jsonl", queries)
        counts = [bc.count_lines(docs), bc.count_lines(queries)]
        title = f"SciFact, splade-tiny-en vectors ×100, {counts[0]} docs, {counts[1]} queries"
        datasets.append((title, work, docs, queries))
    for title, work, docs, queries in datasets:
        compare(title, work, docs, queries, ks, args)
    return 0


def quantize_file(source: Path, target: Path) -> None:
    """Float vectors as clirkit's integer impacts (×100, half away from zero; zeros left out)."""
    from decimal import ROUND_HALF_UP, Decimal

    def impact(w: float) -> int:
        return int(Decimal(w * 100).to_integral_value(rounding=ROUND_HALF_UP))

    with open(target, "w", encoding="utf-8") as f:
        for r in bc.iter_jsonl(source):
            vector = {t: impact(w) for t, w in r["vector"].items() if impact(w) > 0}
            f.write(json.dumps({"id": bc.doc_id(r), "contents": "", "vector": vector}) + "\n")


def compare(title: str, work: Path, docs: Path, queries: Path, ks: list[int], args) -> None:
    pythons = {"clirkit": args.clirkit_python, "pisa": args.peers_python}
    results = {}
    for system, python in pythons.items():
        spec = {"docs": str(docs), "queries": str(queries), "index": str(work / f"{system}.idx")}
        spec.update(threads=args.threads, ks=ks, min_seconds=args.min_seconds)
        if args.search_only and Path(spec["index"]).exists():
            built = {"index_seconds": float("nan")}
        else:
            built = run_worker(python, "index", system, spec, args.threads)
        results[system] = {**built, **run_worker(python, "search", system, spec, args.threads)}
    ours, pisa = results["clirkit"], results["pisa"]
    same = sum(ours["top10"][q] == pisa["top10"][q] for q in ours["top10"])
    print(f"{title}, {args.threads} threads")
    print(f"top-10 scores identical for {same}/{len(ours['top10'])} queries")
    print("| k | clirkit QPS | PISA QPS | clirkit / PISA |")
    print("|---|---|---|---|")
    for k in ks:
        a, b = ours["qps"][str(k)], pisa["qps"][str(k)]
        print(f"| {k} | {a:.0f} | {b:.0f} | {a / b:.2f}x |")
    print(
        f"index seconds: clirkit {ours['index_seconds']:.1f}, PISA {pisa['index_seconds']:.1f}\n", flush=True
    )


if __name__ == "__main__":
    sys.exit(main())
