"""Arguments shared by several commands."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from clirkit._threads import worker_count


def add_threads(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=int, default=0, help="worker threads (default 0: all cores)")


def add_quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def add_worker_options(p: argparse.ArgumentParser, func: Any) -> None:
    """The ``--threads`` and ``--quiet`` every long-running command takes, and its handler."""
    add_threads(p)
    add_quiet(p)
    p.set_defaults(func=func)


def add_search_parser(
    groups: Any, name: str, queries_help: str, *, queries_metavar: str | None = None, **parser_args: Any
) -> argparse.ArgumentParser:
    """``clirkit search NAME``, with the ``--index`` and ``--queries`` every search takes."""
    s = groups["search"].add_parser(name, **parser_args)
    s.add_argument("--index", required=True, help="index directory")
    s.add_argument("--queries", required=True, metavar=queries_metavar, help=queries_help)
    return s


def report(args: argparse.Namespace, message: str) -> None:
    """Say what a command did on stderr, unless ``--quiet`` asked for silence."""
    if not args.quiet:
        print(message, file=sys.stderr)


def threads(args: argparse.Namespace) -> int:
    """The number of workers ``--threads`` asks for (0: all cores; negative: InvalidInputError)."""
    return worker_count(args.threads)
