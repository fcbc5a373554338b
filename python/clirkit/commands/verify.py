"""`clirkit verify INDEX`: check every file of an index (any kind) against the checksums its
manifest records, reading every byte. Exit 0 with a summary; a mismatch is an error naming the file."""

from __future__ import annotations

import argparse

from clirkit._native import verify_index


def register(top, groups) -> None:
    p = top.add_parser(
        "verify",
        help="check an index's files against their checksums (reads the whole index)",
        description=__doc__,
    )
    p.add_argument("index", help="index directory (bm25, impact, dense or multivector)")
    p.set_defaults(func=_verify)


def _verify(args: argparse.Namespace) -> int:
    index_format, files, size = verify_index(args.index)
    print(f"{args.index}: ok ({index_format}, {files} files, {size} bytes checked)")
    return 0
