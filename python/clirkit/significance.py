"""Paired significance tests between systems on one measure: Student's paired t-test (two-sided)
and a seeded paired randomization test, with Holm or Bonferroni correction across comparisons.

The statistics run in Rust (no scipy needed). Queries are paired by id: the union of the queries each
run was evaluated on (queries with judgements that appear in at least one run); a run missing one of
those queries scores 0 there, as trec_eval -c would count it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from clirkit import _native
from clirkit._native import CORRECTIONS, InvalidInputError
from clirkit._types import QrelsInput, RunInput
from clirkit.evaluation import evaluate, measure_keys

TESTS = ("t", "perm")


@dataclass(frozen=True)
class TestResult:
    """Outcome of a paired test of ``b`` against ``a``."""

    mean_difference: float
    statistic: float
    p_value: float
    queries: int


def paired_t_test(a: Sequence[float], b: Sequence[float]) -> TestResult:
    """Two-sided paired t-test (the same as ``scipy.stats.ttest_rel(b, a)``)."""
    return TestResult(*_native.paired_t_test(list(a), list(b)))


def randomization_test(
    a: Sequence[float], b: Sequence[float], permutations: int = 10000, seed: int = 0
) -> TestResult:
    """Two-sided paired randomization test: signs of the per-query differences are flipped at random
    ``permutations`` times (reproducible for a ``seed``, whatever the thread count); p = (1 + extreme)
    / (1 + permutations)."""
    return TestResult(*_native.randomization_test(list(a), list(b), permutations, seed))


def adjust_p_values(p_values: Sequence[float], method: str = "holm") -> list[float]:
    """Adjusted p-values for multiple comparisons: ``"holm"``, ``"bonferroni"`` or ``"none"``."""
    if method == "none":
        return list(p_values)
    return _native.adjust_p_values(list(p_values), method)


@dataclass(frozen=True)
class Comparison:
    """One system compared with the baseline on one measure."""

    system: str
    baseline: str
    measure: str
    baseline_mean: float
    system_mean: float
    result: TestResult
    adjusted_p: float


def compare_runs(
    qrels: QrelsInput,
    runs: Mapping[str, RunInput],
    measure: str,
    test: str = "t",
    correction: str = "holm",
    permutations: int = 10000,
    seed: int = 0,
    relevance_level: int = 1,
) -> list[Comparison]:
    """Compare every run with the first one (the baseline) on ``measure``; p-values are corrected
    across the comparisons."""
    if test not in TESTS:
        raise InvalidInputError(f"unknown test '{test}'; use one of {', '.join(TESTS)}")
    if correction not in CORRECTIONS:
        raise InvalidInputError(f"unknown correction '{correction}'; use one of {', '.join(CORRECTIONS)}")
    if len(runs) < 2:
        raise InvalidInputError("compare needs at least two runs (the first is the baseline)")
    keys = measure_keys(measure)
    if len(keys) != 1:
        raise InvalidInputError(f"compare needs exactly one measure, '{measure}' names {len(keys)}")
    key = keys[0]
    complete = {
        name: evaluate(qrels, run, [measure], per_query=True, complete=True, relevance_level=relevance_level)
        for name, run in runs.items()
    }
    evaluated: set = set()
    for run in runs.values():
        per_query = evaluate(qrels, run, [measure], per_query=True, relevance_level=relevance_level)
        evaluated.update(q for q in per_query if q != "all")
    qids = sorted(evaluated)
    values = {name: [complete[name][q][key] for q in qids] for name in runs}
    names = list(runs)
    baseline = names[0]
    results: list[TestResult] = []
    for name in names[1:]:
        if test == "t":
            results.append(paired_t_test(values[baseline], values[name]))
        else:
            results.append(randomization_test(values[baseline], values[name], permutations, seed))
    adjusted = adjust_p_values([r.p_value for r in results], correction)
    mean = {name: sum(v) / len(v) if v else 0.0 for name, v in values.items()}
    return [
        Comparison(name, baseline, key, mean[baseline], mean[name], r, p)
        for name, r, p in zip(names[1:], results, adjusted)
    ]


def format_comparisons(comparisons: Sequence[Comparison], test: str | None = None) -> str:
    """A plain-text table of comparisons."""
    head = f"{'system':<24}{'measure':<16}{'mean':>9}{'baseline':>10}{'diff':>10}{'p':>10}{'p_adj':>10}"
    lines = [head + (f"   ({test})" if test else "")]
    for c in comparisons:
        lines.append(
            f"{c.system:<24}{c.measure:<16}{c.system_mean:>9.4f}{c.baseline_mean:>10.4f}"
            f"{c.result.mean_difference:>+10.4f}{c.result.p_value:>10.4g}{c.adjusted_p:>10.4g}"
        )
    return "\n".join(lines) + "\n"
