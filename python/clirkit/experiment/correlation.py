"""Rank correlation between two orderings of the same items (systems scored on two benchmarks or
columns): Spearman's rho and Kendall's tau-b with two-sided p-values, computed in Rust as SciPy's
``spearmanr`` and ``kendalltau`` compute them (no SciPy needed)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from clirkit import _native


class CorrelationResult(NamedTuple):
    """A coefficient and its two-sided p-value (NaN for both when one side is constant), named as
    SciPy's results are."""

    statistic: float
    pvalue: float


def spearman(x: Sequence[float], y: Sequence[float]) -> CorrelationResult:
    """Spearman's rho (ties get average ranks) and its p-value from Student's t with n - 2 d.f."""
    rho, p, _ = _native.spearman([float(v) for v in x], [float(v) for v in y])
    return CorrelationResult(rho, p)


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> CorrelationResult:
    """Kendall's tau-b; the p-value is exact without ties on up to 33 items, else from the normal
    approximation with the tie-corrected variance."""
    tau, p, _ = _native.kendall_tau([float(v) for v in x], [float(v) for v in y])
    return CorrelationResult(tau, p)
