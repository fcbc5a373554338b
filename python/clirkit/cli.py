"""The ``clirkit`` command. Each command group lives in its own module under
``clirkit.commands`` and registers its sub-commands here."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import List, Optional

from clirkit import ClirkitError, __version__
from clirkit._extras import MissingExtraError
from clirkit._native import set_max_record_bytes
from clirkit.sources import resolve_names

# Modules under clirkit.commands, each with `register(top, groups)`.
COMMAND_MODULES = [
    "clirkit.commands.canonicalize",
    "clirkit.commands.analyze",
    "clirkit.commands.bm25",
    "clirkit.commands.impact",
    "clirkit.commands.fuse",
    "clirkit.commands.rerank",
    "clirkit.commands.eval",
    "clirkit.commands.dense",
    "clirkit.commands.merge",
    "clirkit.commands.multivector",
    "clirkit.commands.encode",
    "clirkit.commands.demo",
    "clirkit.commands.experiment",
    "clirkit.commands.verify",
]


def _positive_bytes(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of bytes") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="clirkit",
        description="Retrieval and evaluation for monolingual, cross-language and multilingual IR.",
    )
    parser.add_argument("--version", action="version", version=f"clirkit {__version__}")
    parser.add_argument(
        "--max-record-bytes",
        type=_positive_bytes,
        default=None,
        metavar="N",
        help="the longest line (record) any input may hold, in bytes (default 64 MiB, or "
        "$CLIRKIT_MAX_RECORD_BYTES): a longer one stops the command naming its file and line",
    )
    top = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    groups = {
        "index": top.add_parser(
            "index", help="build an index (bm25 | impact | dense | multivector) or merge indexes"
        ).add_subparsers(dest="kind", metavar="KIND", required=True),
        "search": top.add_parser(
            "search", help="search an index (bm25 | impact | dense | multivector)"
        ).add_subparsers(dest="kind", metavar="KIND", required=True),
    }
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(top, groups)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.max_record_bytes is not None:
            set_max_record_bytes(args.max_record_bytes)
        resolve_names(args)
        result = args.func(args)
    except (ClirkitError, OSError, MissingExtraError) as err:  # bad input, an unreadable file, a missing
        # extra (one line naming it); a bug shows its traceback
        print(f"clirkit: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("clirkit: interrupted", file=sys.stderr)
        return 130
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
