"""The ``.npy`` format as the encoders stream it: a fixed-size version-1.0 header (so the final shape
can be written in place once the rows are counted), rows appended after it, and the one-id-per-line
file that travels with a matrix."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from clirkit._native import InvalidInputError

__all__ = ["HEADER_BYTES", "id_lines", "npy_header", "npy_shape_header"]

HEADER_BYTES = 128  # fixed .npy header size, so the final shape can be written in place


def npy_header(dtype: np.dtype, rows: int, dim: int) -> bytes:
    """A version-1.0 ``.npy`` header of a ``(rows, dim)`` matrix padded to exactly :data:`HEADER_BYTES`
    bytes."""
    return npy_shape_header(dtype, (rows, dim))


def npy_shape_header(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    """A version-1.0 ``.npy`` header padded to exactly :data:`HEADER_BYTES` bytes: what ``np.save``
    writes for an array of that shape."""
    body = f"{{'descr': '{dtype.str}', 'fortran_order': False, 'shape': {shape!r}, }}"
    header_len = HEADER_BYTES - 10
    if len(body) + 1 > header_len:
        raise InvalidInputError(f"shape {shape} does not fit an .npy header of {HEADER_BYTES} bytes")
    body = body.ljust(header_len - 1) + "\n"
    return b"\x93NUMPY\x01\x00" + header_len.to_bytes(2, "little") + body.encode("latin1")


def id_lines(ids: Iterable[str]) -> bytes:
    """``ids`` as the bytes of an ids file: one UTF-8 id per line, each ending with a newline."""
    return "".join(i + "\n" for i in ids).encode("utf-8")
