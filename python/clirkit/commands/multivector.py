"""``clirkit index multivector`` and ``clirkit search multivector``: late-interaction indexes over token
matrices written by ``clirkit encode --multivector``; and that encoding itself."""

from __future__ import annotations

import argparse
import time

from clirkit.commands.common import (
    add_command,
    add_search_parser,
    add_worker_options,
    picked,
    positive_int,
    report,
    report_timed,
    seed_int,
    threads,
)


def register(top: argparse._SubParsersAction, groups: dict) -> None:
    p = add_command(
        groups["index"],
        "multivector",
        "index token matrices (clirkit encode --multivector) for PLAID-style late interaction",
        "Index the token vectors PREFIX.tokens.npy / PREFIX.offsets.npy / PREFIX.ids.txt written "
        "by `clirkit encode --multivector --corpus ... --output PREFIX`: centroids by k-means over a seeded "
        "token sample, each token stored as its centroid plus an NBITS-per-dimension residual.",
    )
    p.add_argument(
        "--embeddings",
        required=True,
        nargs="+",
        metavar="PREFIX",
        help="token files prefix of the documents; several are indexed one after another (read in place, "
        "never copied into one matrix)",
    )
    p.add_argument("--index", required=True, help="index directory to create")
    p.add_argument(
        "--nbits", type=int, default=2, choices=[1, 2, 4], help="residual bits per dimension (default 2)"
    )
    p.add_argument(
        "--centroids",
        type=positive_int,
        default=None,
        metavar="N",
        help="k-means centroids (default: power of two <= 4 sqrt(tokens))",
    )
    p.add_argument(
        "--kmeans-sample",
        type=positive_int,
        default=None,
        help="tokens sampled for k-means (default 64 per centroid)",
    )
    p.add_argument(
        "--kmeans-iterations", type=positive_int, default=4, help="k-means iterations (default 4, as PLAID)"
    )
    p.add_argument("--seed", type=seed_int, default=0, help="sampling and k-means seed (default 0)")
    p.add_argument(
        "--keep-vectors",
        action="store_true",
        help="also store the full token vectors (for --exact and --refine search)",
    )
    add_worker_options(p, run_index)

    s = add_search_parser(
        groups,
        "multivector",
        "token files prefix of the queries",
        queries_metavar="PREFIX",
        help="search a multi-vector index with query token matrices, write a TREC run",
        description="Search a multi-vector index with the query token vectors written by `clirkit encode "
        "--multivector --queries ... --output PREFIX`, and write a TREC run. Budgets not given take PLAID's "
        "defaults for k.",
    )
    s.add_argument("--output", required=True, help="TREC run file to write")
    s.add_argument("--k", type=positive_int, default=1000, help="hits per query (default 1000)")
    s.add_argument("--ncells", type=positive_int, default=None, help="centroids probed per query token")
    s.add_argument(
        "--centroid-score-threshold", type=float, default=None, help="stage-2 pruning threshold (-inf: none)"
    )
    s.add_argument(
        "--ndocs", type=positive_int, default=None, help="candidates kept after approximate scoring"
    )
    s.add_argument(
        "--rerank", type=positive_int, default=None, help="candidates scored with decompressed tokens"
    )
    s.add_argument(
        "--refine",
        action="store_true",
        help="score the last stage with the full vectors (needs --keep-vectors)",
    )
    s.add_argument(
        "--exact", action="store_true", help="exact MaxSim over every document (needs --keep-vectors)"
    )
    s.add_argument(
        "--maxp",
        action="store_true",
        help="the index holds passages (ids DOCID#K): return k documents per query, each scored by its best passage",
    )
    s.add_argument("--separator", default="#", help="with --maxp: split passage ids at the last SEPARATOR")
    s.add_argument("--tag", default="clirkit-multivector", help="run tag (default clirkit-multivector)")
    add_worker_options(s, run_search)


def run_index(args: argparse.Namespace) -> int:
    from clirkit.multivector import MultiVectorIndex

    start = time.perf_counter()
    index = MultiVectorIndex.build_files(
        args.embeddings,
        args.index,
        **picked(
            args,
            "nbits",
            "centroids",
            "kmeans_sample",
            "kmeans_iterations",
            "seed",
            "threads",
            "keep_vectors",
            "quiet",
        ),
    )
    done = (
        f"indexed {index.ndocs} items, {index.ntokens} tokens (d={index.dim}, {index.ncentroids} centroids, "
        f"{index.nbits}-bit residuals, {index.compressed_bytes() / index.ntokens:.1f} bytes/token) into "
        f"{args.index}"
    )
    return report_timed(args, start, done)


def run_search(args: argparse.Namespace) -> int:
    from clirkit.multivector import MultiVectorIndex, load_tokens

    start = time.perf_counter()
    index = MultiVectorIndex.open(args.index)
    tokens, offsets, qids = load_tokens(args.queries)
    search_options = ("ncells", "centroid_score_threshold", "ndocs", "rerank", "refine", "exact", "threads")
    index.search_trec(
        tokens,
        offsets,
        qids,
        args.output,
        **picked(args, "k", "tag", "maxp", "separator", "quiet", *search_options),
    )
    by_maxp = " documents by MaxP" if args.maxp else ""
    return report_timed(args, start, f"searched {len(qids)} queries (k={args.k}{by_maxp})", args.output)


def run_encode_multivector(args: argparse.Namespace) -> int:
    """``clirkit encode --multivector``: per-token vectors to PREFIX.tokens.npy/.offsets.npy/.ids.txt."""
    from clirkit.encoders import OnnxEncoder
    from clirkit.encoders.tokens import encode_tokens_file

    encoder = OnnxEncoder(
        args.model,
        **picked(args, "query_prefix", "passage_prefix", "max_length", "device", "input_values"),
        batch_size=args.batch_size or 32,
        threads=threads(args),
        batch_invariant=not args.fast,
    )
    fields = tuple(f.strip() for f in args.fields.split(",") if f.strip()) if args.fields else None
    result = encode_tokens_file(
        encoder,
        args.corpus or args.queries,
        args.output,
        kind="queries" if args.queries else "passages",
        fields=fields,
        chunk_size=args.chunk_size or 1000,
        **picked(args, "passages", "separator", "dtype", "restart", "quiet"),
    )
    resumed = f" (resumed after {result.resumed_items} items)" if result.resumed_items else ""
    report(
        args,
        f"encoded {result.records} records -> {result.items} items, {result.tokens} tokens x {result.dim} "
        f"({args.dtype}) in {result.seconds:.1f}s{resumed}: {result.tokens_path}, {result.offsets_path}, "
        f"{result.ids_path}" + (f"; {result.truncated} inputs truncated" if result.truncated else ""),
    )
    return 0
