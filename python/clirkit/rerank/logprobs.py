"""The one check of a log-probability a model server reports: a real number, finite and at most 0.

A value failing it (``Infinity``, ``NaN``, ``1e308``, a positive number, a string) makes the reply
unusable: :class:`ValueError`, which :meth:`clirkit.rerank.http.ModelClient.ask` treats as a malformed
reply, so the window fails and nothing about it is cached (a later run asks again)."""

from __future__ import annotations

import math

__all__ = ["checked_logprob"]


def checked_logprob(value: object, what: str) -> float:
    """``value`` as a float when it is a log-probability (finite, ≤ 0); otherwise ValueError naming
    ``what`` and the value."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what}: log-probability {value!r} is not a number")
    number = float(value)
    if not math.isfinite(number) or number > 0.0:
        raise ValueError(f"{what}: log-probability {value!r} is not finite and at most 0")
    return number
