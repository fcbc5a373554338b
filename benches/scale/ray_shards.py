#!/usr/bin/env python3
"""Sharded BM25 through Ray against the single index (issue 18), on the 1M Zipfian corpus of
``gen_zipf_corpus.py``: a ``--shards``-shard build as Ray tasks and a scatter-gather search through
shard actors, side by side with one build and one search of the single index, on the same machine
in the same run. Checks that the runs are the same bytes, and reports per phase the wall time and
the peak memory of the whole process tree (driver, and for Ray its GCS, raylet and workers): RSS
sampled every 50 ms, and the anonymous part of it apart (RSS less the mapped index files' page
cache, which the kernel may drop). Each phase runs in its own process.

For the scaling model it also measures what the coordinator does per query: the bytes of hits
the shards send (k per shard) and the time to merge them into the run, and one shard's search
time alone on one thread.

Run ``python benches/scale/ray_shards.py --zipf-dir /work/scratch/raybm25/zipf1m --work /work/scratch/raybm25/work``
(the corpus from ``python benches/synthetic/gen_zipf_corpus.py --out DIR --docs 1000000 --queries 5000 --seed 42``).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def _tree_kib(root: int) -> tuple[int, int]:
    """(RSS, anonymous RSS) in KiB of ``root`` and all its descendants."""
    tree, stack, rss, anon = _children(), [root], 0, 0
    while stack:
        pid = stack.pop()
        stack.extend(tree.get(pid, []))
        try:
            with open(f"/proc/{pid}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        rss += int(fields.get("VmRSS", "0 kB").split()[0])
        anon += int(fields.get("RssAnon", "0 kB").split()[0])
    return rss, anon


def _dir_mib(path: Path) -> float:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20, 1)


def run_phase(args: argparse.Namespace, phase: str) -> dict:
    """Run ``phase`` in a child process, sampling its process tree's memory; returns its report."""
    report = args.work / f"{phase}.json"
    cmd = [sys.executable, __file__, "--phase", phase, *sys.argv[1:]]
    child = subprocess.Popen(cmd)
    peak = [0, 0]

    def sample() -> None:
        while child.poll() is None:
            rss, anon = _tree_kib(child.pid)
            peak[0], peak[1] = max(peak[0], rss), max(peak[1], anon)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    child.wait()
    sampler.join()
    if child.returncode != 0:
        raise SystemExit(f"phase {phase} failed ({child.returncode})")
    result = json.loads(report.read_text())
    result["peak_rss_mib"] = round(peak[0] / 1024, 1)
    result["peak_anon_rss_mib"] = round(peak[1] / 1024, 1)
    return result


def phase_main(args: argparse.Namespace) -> dict:
    from clirkit import _native
    from clirkit.bm25 import BM25Index
    from clirkit.distributed.bm25 import RayShardedBM25, ShardedBM25Index, build_sharded_bm25
    from clirkit.distributed.cluster import connected

    corpus, queries, work = args.zipf_dir / "corpus.jsonl", args.work / "queries.jsonl", args.work
    single, sharded = work / "single", work / "sharded"
    out: dict = {}
    t0 = time.perf_counter()
    if args.phase == "single-build":
        BM25Index.build(corpus, single, threads=args.threads, quiet=True)
        out["index_mib"] = _dir_mib(single)
    elif args.phase == "single-search":
        BM25Index.open(single).search_file_to_trec(
            queries, work / "single.run", args.k, tag="t", threads=args.threads, quiet=True
        )
    elif args.phase == "local-search":
        ShardedBM25Index.open(sharded).search_file_to_trec(queries, work / "local.run", args.k, tag="t")
    elif args.phase == "stats-merge":
        # The coordinator's pass alone (global statistics, ids unique across shards), over hard
        # links to the shards just built.
        build = _native.ShardedIndexBuild("bm25", str(work / "restat"), args.shards)
        for i in range(args.shards):
            shutil.copytree(sharded / f"shard-{i:04d}", build.shard_dir(i), copy_function=os.link)
        t0 = time.perf_counter()
        build.finish()
    elif args.phase == "shard-search":
        # One shard alone on one thread: the per-shard search cost of the model.
        shard = _native.Bm25Index.open_shard(str(sharded), 0)
        triples = _native.read_bm25_queries(str(queries))
        t0 = time.perf_counter()
        parts = shard.batch_search(triples, args.k, threads=1, quiet=True).shard_hits()
        out["hit_bytes"] = len(parts)
    elif args.phase in ("ray-build", "ray-search"):
        with connected(num_cpus=args.threads) as ray:
            out["cluster_start_s"] = round(time.perf_counter() - t0, 2)
            t0 = time.perf_counter()
            if args.phase == "ray-build":
                build_sharded_bm25(corpus, sharded, args.shards, threads=1, ray=True)
                out["seconds"] = round(time.perf_counter() - t0, 2)
                out["index_mib"] = _dir_mib(sharded)
            else:
                with RayShardedBM25(sharded) as searcher:
                    ray.get(
                        [a.search.remote([("warm", "warm", None)], {"k": 1}, None) for a in searcher.actors]
                    )
                    out["actors_start_s"] = round(time.perf_counter() - t0, 2)
                    triples = _native.read_bm25_queries(str(queries))
                    qids = [q for q, _, _ in triples]
                    t0 = time.perf_counter()
                    parts = searcher._parts(
                        triples, {"k": args.k, "lang": None, "k1": 0.9, "b": 0.4, "quiet": True}
                    )
                    out["scatter_gather_s"] = round(time.perf_counter() - t0, 3)
                    out["hit_bytes_per_query"] = round(sum(map(len, parts)) / len(qids))
                    t1 = time.perf_counter()
                    _native.merge_shard_hits(parts, qids, args.k, str(work / "ray.run"), "t")
                    out["merge_write_s"] = round(time.perf_counter() - t1, 3)
                    out["seconds"] = round(time.perf_counter() - t0, 2)
    # The search or build proper: a cluster's start and shutdown are reported apart.
    out.setdefault("seconds", round(time.perf_counter() - t0, 2))
    (work / f"{args.phase}.json").write_text(json.dumps(out))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--zipf-dir", type=Path, required=True, help="gen_zipf_corpus.py output")
    p.add_argument("--work", type=Path, required=True, help="scratch directory (removed at the end)")
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--k", type=int, default=1000)
    p.add_argument("--queries", type=int, default=1000, help="the first N queries")
    p.add_argument(
        "--threads", type=int, default=2, help="cores: threads of the single index, CPUs of the cluster"
    )
    p.add_argument("--keep", action="store_true", help="keep the indexes and runs")
    p.add_argument("--phase", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.phase:
        phase_main(args)
        return
    args.work.mkdir(parents=True, exist_ok=True)
    with open(args.zipf_dir / "queries.jsonl") as src, open(args.work / "queries.jsonl", "w") as dst:
        for _, line in zip(range(args.queries), src):
            dst.write(line)
    results = {}
    for phase in (
        "single-build",
        "ray-build",
        "stats-merge",
        "single-search",
        "ray-search",
        "local-search",
        "shard-search",
    ):
        results[phase] = run_phase(args, phase)
        print(phase, json.dumps(results[phase]), flush=True)
    same = {
        name: filecmp.cmp(args.work / "single.run", args.work / name, shallow=False)
        for name in ("ray.run", "local.run")
    }
    print("identical runs:", json.dumps(same))
    for a, b in (("single-build", "ray-build"), ("single-search", "ray-search")):
        ra, rb = results[a], results[b]
        print(
            f"{b} vs {a}: {rb['seconds']} s vs {ra['seconds']} s = {rb['seconds'] / ra['seconds']:.2f}x time; "
            f"peak RSS {rb['peak_rss_mib']} vs {ra['peak_rss_mib']} MiB; "
            f"anonymous {rb['peak_anon_rss_mib']} vs {ra['peak_anon_rss_mib']} MiB"
        )
    if not all(same.values()):
        raise SystemExit("the sharded runs differ from the single index's")
    if not args.keep:
        shutil.rmtree(args.work)


if __name__ == "__main__":
    main()
