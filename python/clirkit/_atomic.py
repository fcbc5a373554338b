"""One way to write a file so that a reader sees the old file or the whole new one, never a part."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from clirkit._types import PathLike


@contextmanager
def atomic_text_output(path: PathLike) -> Iterator[TextIO]:
    """Yield a UTF-8 text file written beside ``path`` and renamed onto it when the block ends
    without an exception; on an exception the partial file is removed and ``path`` is untouched."""
    target = os.fspath(path)
    tmp = f"{target}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            yield f
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
