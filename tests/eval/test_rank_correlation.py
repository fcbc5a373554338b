"""Spearman's rho and Kendall's tau (Rust) against SciPy's on random inputs, ties and no ties."""

from __future__ import annotations

import math
import random

import pytest
from clirkit import InvalidInputError
from clirkit.experiment import kendall_tau, spearman

stats = pytest.importorskip("scipy.stats")


def _same(ours: float, theirs: float) -> bool:
    if math.isnan(theirs):
        return math.isnan(ours)
    return math.isclose(ours, theirs, rel_tol=1e-9, abs_tol=1e-13)


@pytest.mark.parametrize("seed", range(40))
def test_matches_scipy_on_random_inputs(seed):
    rng = random.Random(seed)
    n = rng.choice([3, 4, 5, 8, 13, 20, 33, 34, 50, 120])
    if seed % 3 == 0:  # ties on both sides: Kendall's normal approximation with tie correction
        x = [float(rng.randint(0, 5)) for _ in range(n)]
        y = [float(rng.randint(0, 5)) for _ in range(n)]
    elif seed % 3 == 1:  # no ties, correlated: exact Kendall up to 33 items
        x = [rng.random() for _ in range(n)]
        y = [v + rng.gauss(0, 0.3) for v in x]
    else:
        x = [rng.random() for _ in range(n)]
        y = [rng.random() for _ in range(n)]
    for ours, theirs in (
        (spearman(x, y), stats.spearmanr(x, y)),
        (kendall_tau(x, y), stats.kendalltau(x, y)),
    ):
        assert _same(ours.statistic, float(theirs.statistic)), (n, ours, theirs)
        assert _same(ours.pvalue, float(theirs.pvalue)), (n, ours, theirs)


def test_edge_cases_match_scipy():
    perfect = ([1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 40.0])
    assert spearman(*perfect) == (1.0, 0.0)
    assert kendall_tau(*perfect).pvalue == pytest.approx(float(stats.kendalltau(*perfect).pvalue))
    reversed_ = ([1.0, 2.0, 3.0, 4.0, 5.0], [5.0, 4.0, 3.0, 2.0, 1.0])
    assert kendall_tau(*reversed_).statistic == float(stats.kendalltau(*reversed_).statistic)
    constant = ([1.0, 1.0, 1.0], [1.0, 2.0, 3.0])
    assert all(math.isnan(v) for v in spearman(*constant)) and all(
        math.isnan(v) for v in kendall_tau(*constant)
    )
    with pytest.raises(InvalidInputError, match="same items"):
        spearman([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(InvalidInputError, match="at least 3"):
        kendall_tau([1.0, 2.0], [2.0, 1.0])
