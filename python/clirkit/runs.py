"""Runs and qrels as Python values: ``dict[qid, dict[docid, score]]`` (pytrec_eval's shape)."""

from __future__ import annotations

import os
from typing import Mapping

from clirkit import _native
from clirkit._types import PathLike, QrelsDict, RunDict
from clirkit.sources import local_path

__all__ = ["PathLike", "QrelsDict", "RunDict", "read_qrels", "read_run", "write_run"]


def read_run(path: PathLike) -> RunDict:
    """Read a TREC run file; each query's dict iterates in canonical order."""
    return {qid: dict(docs) for qid, docs in _native.read_run(os.fspath(path))}


def write_run(path: PathLike, run: Mapping[str, Mapping[str, float]], tag: str = "clirkit") -> None:
    """Write a run in canonical order (score descending, then doc id descending), atomically."""
    _native.write_run(os.fspath(path), {q: dict(d) for q, d in run.items()}, tag)


def read_qrels(path: PathLike) -> QrelsDict:
    """Read qrels, TREC (``qid 0 docid rel``) or BEIR TSV (with its header line), or a named
    collection's (``irds:...``, ``hf:...``)."""
    return {qid: dict(docs) for qid, docs in _native.read_qrels(os.fspath(local_path(path, "qrels")))}
