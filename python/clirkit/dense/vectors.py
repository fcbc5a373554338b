"""Vectors and ids on disk for dense indexes: ``.npy`` matrices and one-id-per-line files, both read
(never memory-mapped, as every input is: another process truncating a mapped file kills the reader
with SIGBUS), gzip-compressed or not."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from clirkit._native import IndexFormatError, InvalidInputError
from clirkit._types import PathLike
from clirkit.datasets import BOM, id_problem, is_decompressed, open_input

__all__ = ["as_matrix", "load_matrix", "load_npy", "load_vectors", "npy_header", "read_ids"]


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


def load_npy(path: PathLike) -> np.ndarray:
    """A ``.npy`` array read whole (gzip-compressed or not); an object array, a pickle or anything
    that is not a ``.npy`` file is an :class:`InvalidInputError` naming the file."""
    try:
        with open_input(path) as f:
            return np.load(f, allow_pickle=False)
    except (ValueError, EOFError, OSError) as err:
        raise InvalidInputError(f"{os.fspath(path)}: not a numeric .npy array ({err})") from None


def npy_header(path: PathLike) -> tuple[np.dtype, bool, bool]:
    """``(dtype, fortran_order, compressed)`` of a ``.npy`` file from its header alone (read, not
    mapped; gzip- or zstd-compressed or not); a file that is not a ``.npy`` is an InvalidInputError naming it."""
    try:
        with open_input(path) as f:
            compressed = is_decompressed(f)
            version = np.lib.format.read_magic(f)
            read = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            _, fortran_order, dtype = read(f)
    except (ValueError, EOFError, OSError) as err:
        raise InvalidInputError(f"{os.fspath(path)}: not a numeric .npy array ({err})") from None
    return dtype, fortran_order, compressed


def streamable(path: PathLike) -> bool:
    """Whether the native streamed readers can read the ``.npy`` file ``path`` in place, a chunk of
    rows at a time: float32 or float16, little endian, C order, not compressed."""
    dtype, fortran_order, compressed = npy_header(path)
    return dtype in (np.dtype("<f4"), np.dtype("<f2")) and not fortran_order and not compressed


def load_matrix(path: PathLike) -> np.ndarray:
    """A ``.npy`` matrix as float32 (float16/float64 converted)."""
    return as_matrix(load_npy(path), f"{path}")


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


def load_vectors(npy: PathLike, ids: PathLike, *, mapped: bool = False) -> tuple[np.ndarray, list[str]]:
    """The one reader of a ``.npy`` matrix and its ids file (one id per row): the ids checked by
    :func:`read_ids`'s rule, the matrix read whole (gzip-compressed or not) or, with ``mapped``, memory-mapped
    (only for clirkit's own encoding outputs, which are written whole and renamed into place: see
    ARCHITECTURE.md, "Inputs are opened one way"). A matrix that is not 2-D, or whose row count differs from
    the number of ids, is an :class:`IndexFormatError` naming both files."""
    matrix = np.load(npy, mmap_mode="r", allow_pickle=False) if mapped else load_npy(npy)
    names = read_ids(ids)
    if matrix.ndim != 2 or matrix.shape[0] != len(names):
        raise IndexFormatError(
            f"{os.fspath(npy)} has shape {matrix.shape} but {os.fspath(ids)} lists {len(names)} ids"
        )
    return matrix, names
