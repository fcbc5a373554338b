"""The one way clirkit writes a file whole: a reader sees the old file or the complete new one, never
a part, and a machine crash after the rename does not leave an empty or truncated file behind.

The content goes to ``PATH.tmp-PID`` beside the target, is flushed and synced to disk, then renamed
onto ``PATH``; on an exception the temporary file is removed and ``PATH`` is untouched."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, BinaryIO, TextIO

from clirkit._types import PathLike

__all__ = [
    "atomic_binary_output",
    "atomic_text_output",
    "fsync_directory",
    "replace_symlink",
    "write_bytes_atomic",
    "write_json_atomic",
    "write_text_atomic",
]


@contextmanager
def _atomic_output(path: PathLike, mode: str) -> Iterator[IO[Any]]:
    target = os.fspath(path)
    tmp = f"{target}.tmp-{os.getpid()}"
    try:
        with open(tmp, mode, encoding=None if "b" in mode else "utf-8") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


@contextmanager
def atomic_text_output(path: PathLike) -> Iterator[TextIO]:
    """Yield a UTF-8 text file that becomes ``path`` when the block ends without an exception."""
    with _atomic_output(path, "w") as f:
        yield f  # type: ignore[misc]


@contextmanager
def atomic_binary_output(path: PathLike) -> Iterator[BinaryIO]:
    """Yield a binary file that becomes ``path`` when the block ends without an exception."""
    with _atomic_output(path, "wb") as f:
        yield f  # type: ignore[misc]


def write_bytes_atomic(path: PathLike, data: bytes) -> None:
    with atomic_binary_output(path) as f:
        f.write(data)


def write_text_atomic(path: PathLike, text: str) -> None:
    with atomic_text_output(path) as f:
        f.write(text)


def write_json_atomic(path: PathLike, data: Any, **dump_options: Any) -> None:
    """``json.dump(data, f, **dump_options)`` written whole."""
    with atomic_text_output(path) as f:
        json.dump(data, f, **dump_options)


def fsync_directory(path: PathLike) -> None:
    """Make renames inside the directory ``path`` durable (a rename lives in the directory, not in the
    file)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_symlink(link: PathLike, target: str) -> None:
    """Point the symbolic link ``link`` at ``target`` in one rename, so a reader finds the old link or the
    new one, never none: the link is made as ``LINK.tmp-PID`` and renamed onto ``LINK``. Nothing is done
    when ``link`` already points at ``target``."""
    link = os.fspath(link)
    if os.path.islink(link) and os.readlink(link) == target:
        return
    tmp = f"{link}.tmp-{os.getpid()}"
    if os.path.lexists(tmp):
        os.remove(tmp)
    os.symlink(target, tmp)
    try:
        os.replace(tmp, link)
    finally:
        if os.path.lexists(tmp):
            os.remove(tmp)
