"""`clirkit canonicalize`: re-write a run file in canonical order (score descending, then doc id
descending) with fresh ranks, optionally cut to the top k."""

from __future__ import annotations

import argparse

from clirkit.commands.common import non_negative_int
from clirkit.runs import read_run, write_run


def register(top, groups) -> None:
    p = top.add_parser("canonicalize", help="re-sort a run file into canonical order with fresh ranks")
    p.add_argument("run", help="TREC run file")
    p.add_argument("--output", required=True, help="where to write the sorted run")
    p.add_argument("--k", type=non_negative_int, default=0, help="keep the top k per query (default: all)")
    p.add_argument("--tag", default="clirkit", help="run tag (6th column)")
    p.set_defaults(func=_canonicalize)


def _canonicalize(args: argparse.Namespace) -> int:
    run = read_run(args.run)
    if args.k > 0:
        run = {q: dict(list(docs.items())[: args.k]) for q, docs in run.items()}
    write_run(args.output, run, args.tag)
    return 0
