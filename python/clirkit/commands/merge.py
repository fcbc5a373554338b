"""``clirkit index merge``: BM25 or dense indexes merged into one."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from clirkit._native import InvalidInputError
from clirkit.commands.common import add_worker_options, non_negative_int, report


def register(top: argparse._SubParsersAction, groups: dict) -> None:
    p = groups["index"].add_parser(
        "merge",
        help="merge BM25 indexes, or dense indexes with one codebook, into one",
        description="Merge indexes of one kind, in order, into a new index. BM25: the files equal one build "
        "over the inputs' corpora concatenated (global statistics recomputed). Dense: the inputs must share "
        "one codebook (see `clirkit index dense --codebook-from`).",
    )
    p.add_argument("--index", required=True, help="index directory to create (atomically)")
    p.add_argument("inputs", nargs="+", metavar="INDEX", help="index directories to merge, in order")
    p.add_argument(
        "--memory-mb",
        type=non_negative_int,
        default=256,
        help="dense: memory for the rows being copied, in MB",
    )
    add_worker_options(p, run_merge)


def _format(index: str) -> str:
    """The ``format`` named in an index directory's ``meta.json``."""
    try:
        return str(json.loads((Path(index) / "meta.json").read_text(encoding="utf-8"))["format"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise InvalidInputError(f"{index}: not a clirkit index (unreadable meta.json: {err})") from None


def run_merge(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    kinds = {_format(i) for i in args.inputs}
    if len(kinds) != 1:
        raise InvalidInputError(f"indexes of different kinds cannot be merged: {sorted(kinds)}")
    kind = kinds.pop()
    if kind == "clirkit-bm25":
        from clirkit.bm25 import BM25Index

        count = BM25Index.merge(args.inputs, args.index).num_docs
    elif kind == "clirkit-dense":
        from clirkit.dense import DenseIndex

        parts = [DenseIndex.open(i) for i in args.inputs]
        count = DenseIndex.merge(parts, args.index, memory_mb=args.memory_mb, threads=args.threads).ntotal
    else:
        raise InvalidInputError(f"{args.inputs[0]}: '{kind}' indexes cannot be merged (bm25 or dense only)")
    report(
        args,
        f"merged {len(args.inputs)} indexes ({count} items) into {args.index} in {time.perf_counter() - start:.1f}s",
    )
    return 0
