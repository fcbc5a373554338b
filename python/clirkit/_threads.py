"""The one ``threads`` convention of the Python API and the CLI: ``threads=0`` means all cores, a
positive number that many workers (at most :data:`MAX_THREADS`), and anything else is an
:class:`InvalidInputError`."""

from __future__ import annotations

import os
from typing import Optional

from clirkit._native import InvalidInputError

#: More workers than any machine clirkit runs on has cores.
MAX_THREADS = 1024


def checked_threads(threads: Optional[int]) -> int:
    """``threads`` as the native calls take it (0 for all cores; None, the old default, is 0 too),
    refused when negative."""
    if threads is None:
        return 0
    if threads < 0:
        raise InvalidInputError(f"threads must be 0 (all cores) or a positive number, got {threads}")
    if threads > MAX_THREADS:
        # Starting that many OS threads takes minutes or fails deep inside the pool.
        raise InvalidInputError(f"threads must be at most {MAX_THREADS}, got {threads}")
    return threads


def worker_count(threads: Optional[int]) -> int:
    """How many workers ``threads`` asks for: all cores for 0."""
    return checked_threads(threads) or (os.cpu_count() or 1)
