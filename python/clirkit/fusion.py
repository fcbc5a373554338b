"""Fusion of runs: reciprocal rank fusion, CombSUM, CombMNZ and weighted interpolation.

All the work is in Rust: run files are parsed there (in parallel, without building Python
objects), every query is fused on its own thread-pool task, and the result is in canonical order
(score descending, then doc id descending), identical whatever the number of threads.

Methods (``w_i`` the run weights, default 1; ``rank_i`` the 1-based position of the document in
run i's canonical order; a run that did not retrieve the document contributes nothing):

- ``rrf``: ``sum_i w_i / (k + rank_i)`` (Cormack et al., 2009), ``k=60``.
- ``combsum``: ``sum_i w_i * norm_i(score)``.
- ``combmnz``: CombSUM times the number of runs that retrieved the document.
- ``interpolate``: ``alpha * norm_1(score) + (1 - alpha) * norm_2(score)`` over exactly two runs.

``norm`` is fitted per query and run on the documents that take part: ``minmax``
(``(s - min) / (max - min)``), ``zscore`` (``(s - mean) / std``, population std) or ``none``; a
query whose scores are all equal normalizes to 0 (ranx's convention). ``depth`` keeps only the
top ``depth`` documents of each input run; ``top`` cuts the fused list of each query.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Mapping, Optional, Sequence, Union

from clirkit import _native
from clirkit._native import FUSION_METHODS, NORMALIZATIONS, NativeRun
from clirkit._threads import checked_threads
from clirkit._types import PathLike, RunDict, RunInput

RunSource = Union[RunInput, NativeRun]

__all__ = ["FUSION_METHODS", "NORMALIZATIONS", "NativeRun", "fuse", "fuse_native", "load_run"]


def load_run(source: RunSource, threads: int = 0) -> NativeRun:
    """A run held in Rust, from a run-file path (read on ``threads`` workers, 0 for all cores), a
    ``dict[qid, dict[docid, score]]`` or a :class:`NativeRun` (returned as is)."""
    if isinstance(source, NativeRun):
        return source
    if isinstance(source, (str, os.PathLike)):
        return NativeRun.read(os.fspath(source), checked_threads(threads))
    if isinstance(source, Mapping):
        as_dict = source if isinstance(source, dict) else dict(source)
        return NativeRun.from_dict({q: d if isinstance(d, dict) else dict(d) for q, d in as_dict.items()})
    raise TypeError(f"a run must be a path, a dict or a NativeRun, not {type(source).__name__}")


def _sources(runs: Sequence[RunSource]) -> list:
    if isinstance(runs, (str, os.PathLike, Mapping, NativeRun)):
        raise TypeError("runs must be a sequence of runs (paths, dicts or NativeRuns)")
    # Paths go to Rust as strings and are read there; dicts are converted once.
    return [os.fspath(r) if isinstance(r, (str, os.PathLike)) else load_run(r) for r in runs]


def fuse_native(
    runs: Sequence[RunSource],
    method: str = "rrf",
    k: float = 60.0,
    weights: Optional[Sequence[float]] = None,
    depth: Optional[int] = None,
    norm: str = "minmax",
    alpha: Optional[float] = None,
    top: Optional[int] = None,
    threads: int = 0,
) -> NativeRun:
    """Fuse ``runs`` and keep the result in Rust (see :func:`fuse` for the parameters).

    Use it for large runs: ``fuse_native(...).write(path)`` never builds Python objects."""
    return _native.fuse(_sources(runs), _native_options(method, k, weights, depth, norm, alpha, top, threads))


def _native_options(
    method: str,
    k: float,
    weights: Optional[Sequence[float]],
    depth: Optional[int],
    norm: str,
    alpha: Optional[float],
    top: Optional[int],
    threads: int,
) -> Dict[str, Any]:
    return {
        "method": method,
        "k": float(k),
        "weights": None if weights is None else [float(w) for w in weights],
        "depth": depth,
        "norm": norm,
        "alpha": None if alpha is None else float(alpha),
        "top": top,
        "threads": checked_threads(threads),
    }


def fuse(
    runs: Sequence[RunSource],
    method: str = "rrf",
    k: float = 60.0,
    weights: Optional[Sequence[float]] = None,
    depth: Optional[int] = None,
    norm: str = "minmax",
    alpha: Optional[float] = None,
    top: Optional[int] = None,
    output: Optional[PathLike] = None,
    tag: str = "clirkit-fuse",
    threads: int = 0,
) -> Optional[RunDict]:
    """Fuse several runs into one.

    Args:
        runs: run-file paths (parsed in Rust), ``dict[qid, dict[docid, score]]`` or
            :class:`NativeRun` objects, in any mix.
        method: one of :data:`FUSION_METHODS` (``"rrf"``, ``"combsum"``, ``"combmnz"``,
            ``"interpolate"``).
        k: the RRF constant.
        weights: one weight per run (not with ``interpolate``, which uses ``alpha``).
        depth: only the top ``depth`` documents of each run take part.
        norm: one of :data:`NORMALIZATIONS` (``"minmax"``, ``"zscore"``, ``"none"``; score-based
            methods).
        alpha: the weight of the first run for ``interpolate``.
        top: keep the top ``top`` fused documents per query.
        output: if given, write the fused run there (atomically) and return None.
        tag: run tag (6th column) for ``output``.
        threads: worker threads (0, the default: all cores); the result does not depend on it.

    Returns:
        The fused run as ``dict[qid, dict[docid, score]]`` iterating in canonical order, with
        queries in order of first appearance (first run first), or None when ``output`` is set.
    """
    if output is not None:
        # Fused and written in Rust, each part of the run fused while earlier ones are written.
        options = _native_options(method, k, weights, depth, norm, alpha, top, threads)
        _native.fuse_to_file(_sources(runs), os.fspath(output), tag, options)
        return None
    fused = fuse_native(runs, method, k, weights, depth, norm, alpha, top, threads)
    return {qid: dict(docs) for qid, docs in fused.to_list()}
