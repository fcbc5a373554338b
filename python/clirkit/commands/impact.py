"""`clirkit index impact` and `clirkit search impact`."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from clirkit.commands.common import add_search_parser, add_worker_options, positive_int, positive_u32, threads
from clirkit.impact import DEFAULT_QUANTIZE, RUN_TAG, ImpactIndex


def register(top, groups) -> None:
    p = groups["index"].add_parser("impact", help="build an impact index from JSONL term-weight vectors")
    p.add_argument(
        "--vectors", required=True, help='JSONL vectors: {"id"|"_id": ..., "vector": {"term": weight, ...}}'
    )
    p.add_argument("--index", required=True, help="index directory to create (atomically)")
    p.add_argument(
        "--quantize",
        type=positive_u32,
        default=DEFAULT_QUANTIZE,
        help="impacts are round(weight * QUANTIZE) (default 100; 1 keeps integer weights as they are)",
    )
    p.add_argument(
        "--memory-mb", type=positive_int, default=1024, help="postings memory before spilling to disk"
    )
    add_worker_options(p, _index)

    s = add_search_parser(
        groups,
        "impact",
        "query vectors (JSONL, as the documents) or TSV: qid<TAB>term term ... or qid<TAB>term<TAB>weight; "
        "with --model, query texts (JSONL: _id/id, text)",
        help="search an impact index, writing a TREC run",
    )
    s.add_argument(
        "--model", help="a SPLADE-family ONNX model directory: encode the query texts at search time"
    )
    s.add_argument(
        "--max-length", type=positive_int, help="with --model: query tokens kept (default: the model's limit)"
    )
    s.add_argument(
        "--device", choices=("auto", "cuda", "cpu"), default="auto", help="with --model: where to encode"
    )
    s.add_argument("--output", required=True, help="TREC run file to write")
    s.add_argument("--k", type=positive_int, default=1000, help="hits per query")
    s.add_argument("--tag", default=RUN_TAG, help="run tag (6th column)")
    add_worker_options(s, _search)


def _index(args: argparse.Namespace) -> int:
    index = ImpactIndex.build(
        args.vectors,
        args.index,
        quantize=args.quantize,
        threads=args.threads,
        quiet=args.quiet,
        memory_budget_mb=args.memory_mb,
    )
    if not args.quiet:
        print(f"indexed {index.num_docs} documents, {index.num_terms} terms -> {args.index}", file=sys.stderr)
    return 0


def _search(args: argparse.Namespace) -> int:
    index = ImpactIndex.open(args.index)
    with tempfile.TemporaryDirectory(prefix="clirkit-queries-") as tmp:
        queries = _encode_queries(args, Path(tmp)) if args.model else args.queries
        # Streamed: results go to the run file window by window, never all in memory.
        searched = index.search_file_to_trec(
            queries, args.output, args.k, tag=args.tag, threads=args.threads, quiet=args.quiet
        )
    if not args.quiet:
        print(f"searched {searched} queries -> {args.output}", file=sys.stderr)
    return 0


def _encode_queries(args: argparse.Namespace, tmp: Path) -> Path:
    """The query texts encoded with ``--model`` into a vectors file under ``tmp``."""
    from clirkit.encoders import SparseEncoder, encode_sparse_file

    encoder = SparseEncoder(args.model, max_length=args.max_length, device=args.device, threads=threads(args))
    return encode_sparse_file(
        encoder, args.queries, tmp / "queries", kind="queries", quiet=args.quiet
    ).vectors_path
