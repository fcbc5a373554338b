"""Peak memory of ``clirkit experiment run`` over a dense system that reads precomputed embeddings
(issue 28): N x D float16 document embeddings (``synthetic/gen_vectors.py``'s clustered unit vectors),
a PQ index of M sub-quantizers searched with ``refine`` R, measured for the whole process with
``/usr/bin/time -v`` (``getrusage`` of the child where it is missing); then the same experiment again,
every stage cached; then ``clirkit index dense`` + ``clirkit search dense`` on the same files, whose run
must equal the experiment's byte for byte. ``--shards N`` makes both sharded (``shards = N``, ``clirkit
index dense --shards N``; searched through the shards in threads).

Query i is document row ``i * N / Q`` plus noise, judged relevant to it, so nDCG means something.
Files are generated once per (N, D, Q, seed) under ``--out``/data and reused.

    python benches/experiment/dense_precomputed.py --out /work/scratch/dense-pre            # 1M x 384
    python benches/experiment/dense_precomputed.py --out /tmp/dense-pre --quick             # 100k x 384
    python benches/experiment/dense_precomputed.py --out /work/scratch/dense-pre --shards 4 # sharded
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "synthetic"))
from gen_vectors import CHUNK, unit_rows  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benches/: bench_common
from bench_common import timed_process as timed  # noqa: E402


def write_data(data: Path, n: int, dim: int, queries: int, seed: int) -> None:
    """``docs.npy`` (n x dim float16) + ``docs.ids.txt``, ``queries.npy`` + ``queries.ids.txt``, and a
    BEIR folder (one short text per document, the queries, qrels: query i judges row i * n / queries)."""
    params = {"n": n, "dim": dim, "queries": queries, "seed": seed}
    if (data / "params.json").exists() and json.loads((data / "params.json").read_text()) == params:
        return
    shutil.rmtree(data, ignore_errors=True)
    (data / "beir" / "qrels").mkdir(parents=True)
    rng = np.random.Generator(np.random.PCG64(seed))
    centres = rng.standard_normal(size=(max(16, n // 1000), dim), dtype=np.float32)
    targets = [i * n // queries for i in range(queries)]
    picked = np.empty((queries, dim), dtype=np.float32)
    with open(data / "docs.npy", "wb") as f:
        header = {"descr": "<f2", "fortran_order": False, "shape": (n, dim)}
        np.lib.format.write_array_header_1_0(f, header)
        for first in range(0, n, CHUNK):
            rows = unit_rows(rng, centres, min(CHUNK, n - first), 0.6).astype(np.float16)
            for q, t in enumerate(targets):
                if first <= t < first + len(rows):
                    picked[q] = rows[t - first]
            f.write(rows.tobytes())
    with (
        open(data / "docs.ids.txt", "w", encoding="utf-8") as ids,
        open(data / "beir" / "corpus.jsonl", "w", encoding="utf-8") as corpus,
    ):
        for first in range(0, n, CHUNK):
            span = range(first, min(first + CHUNK, n))
            ids.write("".join(f"d{i}\n" for i in span))
            corpus.write("".join(f'{{"_id": "d{i}", "text": "document {i}"}}\n' for i in span))
    noisy = picked + 0.02 * rng.standard_normal(size=picked.shape, dtype=np.float32)
    np.save(data / "queries.npy", (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32))
    (data / "queries.ids.txt").write_text("".join(f"q{i}\n" for i in range(queries)), encoding="utf-8")
    (data / "beir" / "queries.jsonl").write_text(
        "".join(f'{{"_id": "q{i}", "text": "query {i}"}}\n' for i in range(queries)), encoding="utf-8"
    )
    (data / "beir" / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{t}\t1\n" for i, t in enumerate(targets)),
        encoding="utf-8",
    )
    (data / "params.json").write_text(json.dumps(params))


def experiment_file(out: Path, pq: int, refine: int, hits: int, shards: int = 0) -> Path:
    text = f"""[experiment]
name = "dense-precomputed"
hits = {hits}

[collections.synthetic]
path = "data/beir"

[[tasks]]
collection = "synthetic"
setting = "all"

[systems.dense]
kind = "dense"
embeddings = "data/docs"
query_embeddings = "data/queries"
pq = {pq}
refine = {refine}
{f"shards = {shards}" if shards else ""}
[evaluation]
measures = ["nDCG@10", "R@100"]
"""
    path = out / "dense-precomputed.toml"
    path.write_text(text, encoding="utf-8")
    return path


def run(args: argparse.Namespace) -> dict:
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    write_data(out / "data", args.n, args.dim, args.queries, args.seed)
    toml = experiment_file(out, args.pq, args.refine, args.hits, args.shards)
    work = out / "work"
    shutil.rmtree(work, ignore_errors=True)
    clirkit = [sys.executable, "-m", "clirkit.cli"]
    threads = ["--threads", str(args.threads)]
    result: dict = {
        "n": args.n,
        "dim": args.dim,
        "queries": args.queries,
        "pq": args.pq,
        "refine": args.refine,
        "shards": args.shards,
    }
    result["experiment"] = timed(
        [*clirkit, "experiment", "run", str(toml), "--workdir", str(work), *threads, "--quiet"]
    )
    result["rerun"] = timed(
        [*clirkit, "experiment", "run", str(toml), "--workdir", str(work), *threads, "--quiet"]
    )
    from clirkit.experiment import Experiment

    exp = Experiment(toml, work, quiet=True)
    assert exp.plan.counts()[1] == 0, "the rerun left stages to run"
    experiment_run = (exp.plan.runs["dense"]["synthetic"].output / "run.trec").read_bytes()
    from clirkit.distributed.sharded import read_manifest, sharded_kind

    built = next(s.output / "index" for s in exp.plan.stages if s.kind == "dense-index")
    result["index_shards"] = len(read_manifest(built).shards) if sharded_kind(built) else 0
    result["store_mib"] = round(sum(f.stat().st_size for f in work.rglob("*") if f.is_file()) / 2**20, 1)
    result["inputs_mib"] = round(
        sum(f.stat().st_size for f in (out / "data").glob("*.*") if f.is_file()) / 2**20, 1
    )
    exp.run(log=open(os.devnull, "w"))
    result["ndcg_cut_10"] = exp.results.value("dense", "synthetic", "ndcg_cut_10") if exp.results else None
    if not args.no_cli:
        index, cli_run = out / "cli-index", out / "cli.trec"
        sharded = ["--shards", str(args.shards)] if args.shards else []
        data = out / "data"
        result["cli_index"] = timed([*clirkit, "index", "dense", "--embeddings", str(data / "docs.npy"),
                                     "--ids", str(data / "docs.ids.txt"), "--index", str(index),
                                     "--pq", str(args.pq), *sharded, *threads, "--quiet"])  # fmt: skip
        result["cli_search"] = timed([*clirkit, "search", "dense", "--index", str(index), "--queries",
                                      str(data / "queries.npy"), "--qids", str(data / "queries.ids.txt"),
                                      "--output", str(cli_run), "--k", str(args.hits), "--refine",
                                      str(args.refine), *threads, "--quiet"])  # fmt: skip
        result["equal_to_cli"] = cli_run.read_bytes() == experiment_run
        shutil.rmtree(index)
    return result


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path, help="data, experiment file and work directory")
    sizes = {"n": 1_000_000, "dim": 384, "pq": 192, "refine": 100, "queries": 1000, "hits": 100}
    for name, default in {**sizes, "seed": 0, "threads": 0, "shards": 0}.items():
        ap.add_argument(f"--{name}", type=int, default=default, help=f"default {default}")
    ap.add_argument("--quick", action="store_true", help="100k documents")
    ap.add_argument("--no-cli", action="store_true", help="skip the CLI comparison")
    args = ap.parse_args(argv)
    if args.quick:
        args.n = min(args.n, 100_000)
    result = run(args)
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
