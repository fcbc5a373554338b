"""Arguments shared by several commands."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from clirkit._threads import MAX_THREADS, worker_count


def _bounded_int(low: int, high: int | None, wording: str) -> Any:
    """An argparse type: an integer in ``[low, high]``; anything else a usage error naming the rule."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{value} is not {wording}")
        return value

    parse.__name__ = "integer"
    return parse


#: The largest count any option takes: what a 64-bit signed integer holds, so every count reaches the
#: native code (usize, u64) without an overflow.
MAX_COUNT = 2**63 - 1
#: ``--k`` and the like: a count of at least one.
positive_int = _bounded_int(1, MAX_COUNT, "a positive integer (at most 2^63-1)")
#: A count where 0 means "all" or "none".
non_negative_int = _bounded_int(0, MAX_COUNT, "0 or a positive integer (at most 2^63-1)")
#: A positive count stored in 32 bits (``--quantize``).
positive_u32 = _bounded_int(1, 2**32 - 1, "a positive integer up to 4294967295")
#: ``--seed``: any 64-bit unsigned integer.
seed_int = _bounded_int(0, 2**64 - 1, "a seed from 0 to 2^64-1")
#: A relevance label (``-l``): a 32-bit integer.
label_int = _bounded_int(-(2**31), 2**31 - 1, "a 32-bit integer")
#: ``--threads``: 0 for all cores, else at most MAX_THREADS.
thread_count = _bounded_int(0, MAX_THREADS, f"0 (all cores) or a number of threads up to {MAX_THREADS}")


def add_threads(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=thread_count, default=0, help="worker threads (default 0: all cores)")


def add_quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def add_worker_options(p: argparse.ArgumentParser, func: Any) -> None:
    """The ``--threads`` and ``--quiet`` every long-running command takes, and its handler."""
    add_threads(p)
    add_quiet(p)
    p.set_defaults(func=func)


def add_spill_memory_option(p: argparse.ArgumentParser) -> None:
    """``--memory-mb`` of an inverted-index build (BM25, impact): postings held in memory before
    sorted runs are spilled to disk (the index files are the same whatever it is)."""
    p.add_argument(
        "--memory-mb", type=positive_int, default=1024, help="postings memory before spilling to disk"
    )


def add_command(parent: Any, name: str, help: str, description: str) -> argparse.ArgumentParser:
    """A subcommand NAME of PARENT (a subparsers action) with its one-line help and its description."""
    return parent.add_parser(name, help=help, description=description)


def add_search_parser(
    groups: Any, name: str, queries_help: str, *, queries_metavar: str | None = None, **parser_args: Any
) -> argparse.ArgumentParser:
    """``clirkit search NAME``, with the ``--index`` and ``--queries`` every search takes."""
    s = groups["search"].add_parser(name, **parser_args)
    s.add_argument("--index", required=True, help="index directory")
    s.add_argument("--queries", required=True, metavar=queries_metavar, help=queries_help)
    return s


def add_ray_option(p: argparse.ArgumentParser, what: str) -> None:
    """``--ray [ADDRESS]``: run on a Ray cluster (the value: an address, or True for Ray's default)."""
    p.add_argument(
        "--ray",
        nargs="?",
        const=True,
        metavar="ADDRESS",
        help=f"{what} (default: RAY_ADDRESS, else a new local cluster)",
    )


def picked(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The named command-line options, as keyword arguments of the same names."""
    return {name: getattr(args, name) for name in names}


def report(args: argparse.Namespace, message: str) -> None:
    """Say what a command did on stderr, unless ``--quiet`` asked for silence."""
    if not args.quiet:
        print(message, file=sys.stderr)


def report_timed(args: argparse.Namespace, start: float, done: str, output: str | None = None) -> int:
    """Report ``DONE in N.Ns`` (time since START, a ``time.perf_counter()``), then `` -> OUTPUT`` when
    given, unless ``--quiet``; return the command's exit status, 0."""
    arrow = f" -> {output}" if output is not None else ""
    report(args, f"{done} in {time.perf_counter() - start:.1f}s{arrow}")
    return 0


def threads(args: argparse.Namespace) -> int:
    """The number of workers ``--threads`` asks for (0: all cores; negative: InvalidInputError)."""
    return worker_count(args.threads)
