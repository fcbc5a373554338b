"""The one check of a whole-number option of the Python API: an ``int`` (not a bool) within bounds
the native code can hold, else an :class:`InvalidInputError` naming the option (never the
``OverflowError`` a binding raises for a negative or huge number)."""

from __future__ import annotations

from typing import Optional

from clirkit._native import InvalidInputError

#: The largest count any option takes (fits usize, u64 and i64 alike).
MAX_COUNT = 2**63 - 1


def checked_int(name: str, value: Optional[int], low: int = 1, high: int = MAX_COUNT) -> Optional[int]:
    """``value`` when it is None or a whole number in ``[low, high]``; otherwise InvalidInputError."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"{name} must be a whole number, got {value!r}")
    if not low <= value <= high:
        raise InvalidInputError(f"{name} must be from {low} to {high}, got {value}")
    return value
