"""`clirkit experiment run|plan|table`: experiments described in a TOML file."""

from __future__ import annotations

import argparse
import json
import sys

from clirkit.commands.common import add_command, add_quiet, thread_count

FORMATS = ("text", "markdown", "csv", "json")


def register(top, groups) -> None:
    p = add_command(
        top,
        "experiment",
        "run, plan or tabulate an experiment file (collections x systems x fusion x rerank x eval)",
        "Experiments: a TOML file names collections, tasks, systems, fusion and rerank nodes "
        "and the evaluation; every stage's output is kept under a key of its inputs and parameters, so "
        "a rerun recomputes only what changed and a killed run resumes.",
    )
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    run = sub.add_parser("run", help="run what is not cached and print the tables")
    run.add_argument("file", help="experiment TOML file")
    run.add_argument(
        "--workdir", help="where artifacts and tables go (default: FILE's stem + .work beside it)"
    )
    run.add_argument(
        "--threads", type=thread_count, help="worker threads (default: the file's, else all cores)"
    )
    run.add_argument("--format", choices=FORMATS, default="text", help="table format on stdout")
    add_quiet(run)
    run.set_defaults(func=_run)

    plan = sub.add_parser("plan", help="list the stages, which are cached and which would run")
    plan.add_argument("file", help="experiment TOML file")
    plan.add_argument("--workdir", help="working directory (default: beside the file)")
    plan.set_defaults(func=_plan)

    table = sub.add_parser("table", help="print the tables of a finished run again")
    table.add_argument("workdir", help="the run's working directory")
    table.add_argument("--format", choices=FORMATS, default="text", help="table format")
    table.set_defaults(func=_table)


def print_results(results, fmt: str) -> None:
    if fmt == "markdown":
        sys.stdout.write(results.markdown())
    elif fmt == "csv":
        sys.stdout.write(results.csv())
    elif fmt == "json":
        sys.stdout.write(json.dumps(results.rows, indent=1) + "\n")
    else:
        sys.stdout.write(results.text())


def _run(args: argparse.Namespace) -> int:
    from clirkit.experiment import Experiment

    exp = Experiment(args.file, args.workdir, threads=args.threads, quiet=args.quiet)
    print_results(exp.run(), args.format)
    return 0


def _plan(args: argparse.Namespace) -> int:
    from clirkit.experiment import Experiment

    sys.stdout.write(Experiment(args.file, args.workdir).plan_text())
    return 0


def _table(args: argparse.Namespace) -> int:
    from clirkit.experiment import load_results

    print_results(load_results(args.workdir), args.format)
    return 0
