"""`clirkit fuse`: fuse run files (RRF, CombSUM, CombMNZ, interpolation) into one run file."""

from __future__ import annotations

import argparse
from typing import List

from clirkit.commands.common import add_command, add_threads, picked, positive_int
from clirkit.fusion import FUSION_METHODS, NORMALIZATIONS, fuse


def _weights(text: str) -> List[float]:
    try:
        return [float(w) for w in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"weights must be numbers separated by commas, got '{text}'"
        ) from None


def register(top, groups) -> None:
    p = add_command(
        top,
        "fuse",
        "fuse runs (rrf | combsum | combmnz | interpolate)",
        "Fuse TREC run files into one, in canonical order (score descending, then doc "
        "id descending). RRF: sum_i w_i / (k + rank_i) with 1-based canonical ranks.",
    )
    p.add_argument("runs", nargs="+", metavar="RUN", help="TREC run files")
    p.add_argument("--output", required=True, help="where to write the fused run")
    p.add_argument("--method", choices=FUSION_METHODS, default="rrf", help="(default: rrf)")
    p.add_argument("--k", type=float, default=60.0, help="RRF constant (default: 60)")
    p.add_argument("--weights", type=_weights, help="one weight per run, e.g. 1,0.5,0.5 (default: all 1)")
    p.add_argument(
        "--depth", type=positive_int, help="use only the top DEPTH documents of each run (default: all)"
    )
    p.add_argument(
        "--norm",
        choices=NORMALIZATIONS,
        default="minmax",
        help="per-query score normalization for combsum/combmnz/interpolate (default: minmax)",
    )
    p.add_argument("--alpha", type=float, help="weight of the first run for interpolate (second: 1-alpha)")
    p.add_argument(
        "--top", type=positive_int, help="keep the top TOP fused documents per query (default: all)"
    )
    p.add_argument("--tag", default="clirkit-fuse", help="run tag (6th column)")
    add_threads(p)
    p.set_defaults(func=_fuse)


def _fuse(args: argparse.Namespace) -> int:
    options = ("method", "k", "weights", "depth", "norm", "alpha", "top", "output", "tag", "threads")
    fuse(args.runs, **picked(args, *options))
    return 0
