"""``clirkit index dense`` and ``clirkit search dense``: dense vector indexes from .npy files."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from clirkit._native import METRICS, InvalidInputError
from clirkit.commands.common import (
    add_command,
    add_ray_option,
    add_search_parser,
    add_worker_options,
    non_negative_int,
    picked,
    positive_int,
    report_timed,
    seed_int,
)


def register(top: argparse._SubParsersAction, groups: dict) -> None:
    p = add_command(
        groups["index"],
        "dense",
        "index embeddings (.npy) for exact or PQ fast-scan search",
        "Index embeddings from a .npy file (float32 or float16), read and encoded a chunk at a time "
        "so memory stays near --memory-mb whatever the collection size. Without --pq the index is exact "
        "(flat); with --pq M it stores 4-bit (or 8-bit) PQ codes. --append adds the vectors to an existing "
        "index with its codebook; --codebook-from encodes them with another index's codebook (to merge later).",
    )
    p.add_argument(
        "--embeddings",
        required=True,
        help="n x d .npy matrix (float32 or float16), or a directory of embedding shards "
        "(`clirkit encode --ray` output; its ids come with it)",
    )
    p.add_argument("--ids", help="text file: one document id per line, n lines (with a .npy matrix)")
    p.add_argument("--index", required=True, help="index directory to create")
    p.add_argument(
        "--pq", type=positive_int, default=None, metavar="M", help="PQ sub-quantizers (must divide d)"
    )
    p.add_argument("--nbits", type=int, default=4, choices=[4, 8], help="bits per PQ code (default 4)")
    p.add_argument(
        "--ivf", type=positive_int, default=None, metavar="NLIST", help="IVF coarse quantizer lists"
    )
    p.add_argument("--metric", default="ip", choices=METRICS, help="similarity (default ip)")
    p.add_argument(
        "--train-size", type=positive_int, default=None, help="training sample rows (default 65536)"
    )
    p.add_argument("--seed", type=seed_int, default=0, help="training seed (default 0)")
    p.add_argument(
        "--no-vectors", action="store_true", help="do not store full vectors (PQ only; disables --refine)"
    )
    p.add_argument(
        "--vector-dtype",
        choices=["float32", "float16"],
        default="float32",
        help="how the stored full vectors are kept (default float32); float16 halves their disk (PQ only: "
        "re-scoring widens them to float32)",
    )
    p.add_argument(
        "--memory-mb",
        type=non_negative_int,
        default=256,
        help="memory for the chunks being encoded, in MB (default 256); the training sample and the ids come on top",
    )
    grow = p.add_mutually_exclusive_group()
    grow.add_argument(
        "--append",
        action="store_true",
        help="add the vectors to the existing index --index, encoded with its codebook (training options are ignored)",
    )
    grow.add_argument(
        "--codebook-from",
        metavar="DIR",
        default=None,
        help="encode with the codebook of the index DIR instead of training one (indexes built so can be merged)",
    )
    p.add_argument(
        "--shards",
        type=positive_int,
        default=None,
        metavar="N",
        help="build a sharded index of N shards (one codebook trained once; shards encoded in parallel); "
        "a directory of embedding shards gives one index shard each",
    )
    add_ray_option(p, "with --shards: encode the shards as tasks on this Ray cluster")
    add_worker_options(p, run_index)

    s = add_search_parser(
        groups,
        "dense",
        "q x d .npy matrix (float32 or float16)",
        help="search a dense index with query embeddings (.npy), write a TREC run",
        description="Search a dense index with query embeddings and write a TREC run file.",
    )
    s.add_argument("--qids", required=True, help="text file: one query id per line, q lines")
    s.add_argument("--output", required=True, help="TREC run file to write")
    s.add_argument("--k", type=positive_int, default=1000, help="hits per query (default 1000)")
    s.add_argument("--nprobe", type=positive_int, default=1, help="IVF lists scanned per query (default 1)")
    s.add_argument(
        "--refine",
        type=non_negative_int,
        default=None,
        help="re-score this many PQ candidates exactly with the stored vectors "
        "(default: k when the index stores them; 0 = PQ scores only)",
    )
    s.add_argument(
        "--maxp",
        action="store_true",
        help="the index holds passages (ids DOCID#K, as `clirkit encode --passages` writes them): return k "
        "documents per query, each scored by its best passage (fetching passages until k documents are found)",
    )
    s.add_argument("--separator", default="#", help="with --maxp: split passage ids at the last SEPARATOR")
    s.add_argument("--tag", default="clirkit-dense", help="run tag (default clirkit-dense)")
    add_ray_option(s, "search a sharded index through shard actors on this Ray cluster")
    add_worker_options(s, run_search)


def run_index(args: argparse.Namespace) -> int:
    from clirkit.dense import DenseIndex, read_ids

    start = time.perf_counter()
    if args.shards is not None or Path(args.embeddings).is_dir():
        return _run_sharded_index(args, start)
    if args.ray is not None:
        raise InvalidInputError("--ray builds a sharded index: give --shards N")
    if args.ids is None:
        raise InvalidInputError("--ids is required with a .npy matrix")
    ids = read_ids(args.ids)
    grow = {"memory_mb": args.memory_mb, "threads": args.threads, "quiet": args.quiet}
    if args.append:
        index = DenseIndex.open(args.index).add(args.embeddings, ids, args.index, **grow)
    elif args.codebook_from:
        template = DenseIndex.open(args.codebook_from)
        index = template.add(args.embeddings, ids, args.index, keep_rows=False, **grow)
    else:
        index = DenseIndex.build_file(
            args.embeddings, ids, args.index, **_training(args), vector_dtype=args.vector_dtype, **grow
        )
    return report_timed(
        args, start, f"indexed {index.ntotal} vectors (d={index.dim}, {index.kind}) into {args.index}"
    )


def _training(args: argparse.Namespace) -> dict[str, Any]:
    """The index kind and training options of ``clirkit index dense``."""
    return {
        **picked(args, "pq", "nbits", "ivf", "metric", "train_size", "seed"),
        "keep_vectors": not args.no_vectors,
    }


def _run_sharded_index(args: argparse.Namespace, start: float) -> int:
    from clirkit.distributed.dense import build_sharded_dense, parts_from_encoding, parts_from_files

    if args.append or args.codebook_from:
        raise InvalidInputError(
            "--shards builds a new sharded index: --append and --codebook-from do not apply"
        )
    if Path(args.embeddings).is_dir():
        parts = parts_from_encoding(args.embeddings, args.shards)
    elif args.ids is None:
        raise InvalidInputError("--ids is required with a .npy matrix")
    else:
        parts = parts_from_files(args.embeddings, args.ids, args.shards or 1)
    training = {**_training(args), "vector_dtype": args.vector_dtype, "memory_mb": args.memory_mb}
    index = build_sharded_dense(
        parts, args.index, **training, threads=args.threads, ray=args.ray, quiet=args.quiet
    )
    done = f"indexed {index.ntotal} vectors ({index.kind}) into {len(parts)} shards in {args.index}"
    return report_timed(args, start, done)


def run_search(args: argparse.Namespace) -> int:
    from clirkit.dense import DenseIndex, load_matrix, read_ids
    from clirkit.distributed.cluster import connected
    from clirkit.distributed.dense import ShardedDenseIndex
    from clirkit.distributed.sharded import sharded_kind

    start = time.perf_counter()
    queries = load_matrix(args.queries)
    qids = read_ids(args.qids)
    if sharded_kind(args.index) == "dense":
        if args.maxp:
            raise InvalidInputError("--maxp is not supported on a sharded index")
        options = picked(args, "k", "tag", "nprobe", "refine")
        if args.ray is None:
            with ShardedDenseIndex.open(args.index, threads=args.threads, quiet=args.quiet) as sharded:
                sharded.search_trec(queries, qids, args.output, **options)
        else:
            with (
                connected(args.ray),
                ShardedDenseIndex.open(args.index, ray=True, quiet=args.quiet) as sharded,
            ):
                sharded.search_trec(queries, qids, args.output, **options)
        done = f"searched {len(qids)} queries (k={args.k}) through {len(sharded.offsets)} shards"
        return report_timed(args, start, done, args.output)
    if args.ray is not None:
        raise InvalidInputError(f"--ray searches a sharded index; {args.index} is not one")
    index = DenseIndex.open(args.index)
    search_options = ("k", "tag", "nprobe", "refine", "threads", "maxp", "separator", "quiet")
    index.search_trec(queries, qids, args.output, **picked(args, *search_options))
    by_maxp = " documents by MaxP" if args.maxp else ""
    return report_timed(args, start, f"searched {len(qids)} queries (k={args.k}{by_maxp})", args.output)
