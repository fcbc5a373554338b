"""Arguments shared by several commands."""

from __future__ import annotations

import argparse
import os


def add_threads(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=int, default=0, help="worker threads (default: all cores)")


def add_quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def threads(args: argparse.Namespace) -> int:
    return args.threads if args.threads and args.threads > 0 else (os.cpu_count() or 1)
