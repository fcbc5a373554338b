"""``clirkit index merge``: BM25 or dense indexes merged into one."""

from __future__ import annotations

import argparse
import time

from clirkit._native import merge_indexes
from clirkit._threads import checked_threads
from clirkit.commands.common import add_command, add_worker_options, non_negative_int, report_timed


def register(top: argparse._SubParsersAction, groups: dict) -> None:
    p = add_command(
        groups["index"],
        "merge",
        "merge BM25 indexes, or dense indexes with one codebook, into one",
        "Merge indexes of one kind, in order, into a new index. BM25: the files equal one build "
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


def run_merge(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    # The core finds each input's kind (one list of kinds, `index_kinds`) and refuses mixed or
    # unmergeable ones, naming them.
    _, count = merge_indexes(
        args.inputs, args.index, memory_mb=args.memory_mb, threads=checked_threads(args.threads)
    )
    return report_timed(args, start, f"merged {len(args.inputs)} indexes ({count} items) into {args.index}")
