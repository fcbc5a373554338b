"""`clirkit analyze`: print the index terms of some text, one line per input text."""

from __future__ import annotations

import argparse
import sys

from clirkit.analysis import analyze, supported_languages
from clirkit.commands.common import add_command


def register(top, groups) -> None:
    p = add_command(
        top,
        "analyze",
        "print the terms a language's analyzer makes of some text",
        "Print the index terms of each TEXT (or of each line of standard input when "
        "no TEXT is given), space-separated, one line per text.",
    )
    p.add_argument(
        "--lang",
        required=True,
        help="language code: "
        + ", ".join(supported_languages())
        + " (or ISO 639-3 / BCP 47 forms: fas, zh-CN)",
    )
    p.add_argument("text", nargs="*", help="text to analyze (default: read lines from stdin)")
    p.set_defaults(func=_analyze)


def _analyze(args: argparse.Namespace) -> int:
    texts = args.text if args.text else (line.rstrip("\n") for line in sys.stdin)
    for text in texts:
        print(" ".join(analyze(text, args.lang)))
    return 0
