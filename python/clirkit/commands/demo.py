"""`clirkit demo`: the main job on the embedded sample collection, as an experiment.

Runs the sample's experiment file (``clirkit/data/sample/demo.toml``, also ``examples/sample.toml``): one
multilingual BM25 index over the sample (each document analyzed in its own language), every query
searched with its own language's analyzer, each language's run evaluated with clirkit's trec_eval-equal
evaluator, and a table with one column per language plus the average, as multilingual papers tabulate
results. With ``--workdir`` the artifacts stay there and a second demo reuses them."""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
from pathlib import Path

from clirkit.commands.common import add_worker_options, positive_int

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample"
EXPERIMENT = SAMPLE / "demo.toml"


def register(top, groups) -> None:
    p = top.add_parser(
        "demo",
        help="index, search and evaluate the embedded multilingual sample collection",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--workdir", help="keep the artifacts and tables here (default: a temporary directory)")
    p.add_argument("--k", type=positive_int, default=100, help="documents retrieved per query (default 100)")
    add_worker_options(p, run_demo)


def run_demo(args: argparse.Namespace) -> int:
    if args.workdir:
        return _run(Path(args.workdir), args)
    with tempfile.TemporaryDirectory(prefix="clirkit-demo-") as tmp:
        return _run(Path(tmp), args)


def _run(work: Path, args: argparse.Namespace) -> int:
    from clirkit.experiment import Experiment

    threads = args.threads if args.threads and args.threads > 0 else None
    exp = Experiment(EXPERIMENT, work, threads=threads, hits=args.k, quiet=args.quiet)
    results = exp.run(log=io.StringIO() if args.quiet else sys.stderr)
    sys.stdout.write(results.text())
    if args.workdir:
        print(f"tables and runs in {work}")
    return 0
