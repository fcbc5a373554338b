"""Vectors and ids on disk for dense indexes: ``.npy`` matrices (memory-mapped) and one-id-per-line files."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from clirkit._native import InvalidInputError
from clirkit._types import PathLike
from clirkit.datasets import BOM, id_problem, open_input

__all__ = ["as_matrix", "load_matrix", "read_ids"]


def as_matrix(a: Any, what: str) -> np.ndarray:
    """A C-contiguous float32 2-D view of ``a`` (no copy when it already is one)."""
    arr = np.asarray(a)
    if arr.ndim == 1 and what == "queries":
        arr = arr.reshape(1, -1)
    if arr.ndim != 2:
        raise InvalidInputError(f"{what} must be a 2-D array (rows are vectors), got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.floating):
        raise InvalidInputError(f"{what} must hold floats (float32 or float16), got {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=np.float32)


def load_matrix(path: PathLike) -> np.ndarray:
    """Memory-map a ``.npy`` matrix; float32 stays mapped, float16/float64 are converted."""
    arr = np.load(os.fspath(path), mmap_mode="r")
    return as_matrix(arr, f"{path}")


def read_ids(path: PathLike) -> list[str]:
    """One id per line (UTF-8, a byte-order mark skipped, gzip read as such); an empty line or an id
    holding white space or a control character is an error naming the line."""
    ids: list[str] = []
    with open_input(path) as f:
        for lineno, raw in enumerate(f, 1):
            if lineno == 1:
                raw = raw.removeprefix(BOM)
            try:
                text = raw.decode("utf-8").removesuffix("\n").removesuffix("\r")
            except UnicodeDecodeError as err:
                raise InvalidInputError(f"{path}:{lineno}: not valid UTF-8 (byte {err.start})") from None
            problem = id_problem(text)
            if problem:
                raise InvalidInputError(f"{path}:{lineno}: {problem}")
            ids.append(text)
    return ids
