"""`clirkit verify INDEX`: check every file of an index (any kind) against the checksums its
manifest records and the headers its kind expects, reading every byte, and what opening it checks.
Exit 0 with a summary; a mismatch is an error naming the file."""

from __future__ import annotations

import argparse

from clirkit._native import index_kinds, verify_index


def register(top, groups) -> None:
    p = top.add_parser(
        "verify",
        help="check an index's files against their checksums (reads the whole index)",
        description=__doc__,
    )
    kinds = ", ".join(fmt.removeprefix("clirkit-") for fmt, _ in index_kinds())
    p.add_argument("index", help=f"index directory of any kind ({kinds})")
    p.set_defaults(func=_verify)


def _verify(args: argparse.Namespace) -> int:
    index_format, files, size = verify_index(args.index)
    print(f"{args.index}: ok ({index_format}, {files} files, {size} bytes checked)")
    return 0
