"""Vectors and ids on disk for dense indexes: ``.npy`` matrices (memory-mapped) and one-id-per-line files."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from clirkit._native import InvalidInputError
from clirkit._types import PathLike

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
    """One id per line (UTF-8); blank lines and surrounding whitespace in ids are errors."""
    ids: list[str] = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            text = line.rstrip("\r\n")
            if not text.strip() or text != text.strip():
                raise InvalidInputError(
                    f"{path}:{lineno}: an id line must be a non-empty id without surrounding spaces"
                )
            ids.append(text)
    return ids
