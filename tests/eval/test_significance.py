"""Paired t-test, randomization test, corrections, and `clirkit eval compare`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from clirkit import significance
from clirkit.cli import main


def test_t_test_matches_scipy_reference():
    a = [0.1, 0.2, 0.3, 0.4]
    b = [0.2, 0.25, 0.45, 0.5]
    r = significance.paired_t_test(a, b)  # scipy.stats.ttest_rel(b, a)
    assert r.statistic == pytest.approx(4.898979485566355)
    assert r.p_value == pytest.approx(0.01627660345942857, rel=1e-9)
    assert r.mean_difference == pytest.approx(0.1)
    try:
        from scipy import stats
    except ImportError:
        return
    import random

    rng = random.Random(3)
    for n in (5, 30, 200):
        x = [rng.random() for _ in range(n)]
        y = [v + rng.gauss(0.02, 0.1) for v in x]
        want = stats.ttest_rel(y, x)
        got = significance.paired_t_test(x, y)
        assert got.statistic == pytest.approx(want.statistic, rel=1e-9)
        assert got.p_value == pytest.approx(want.pvalue, rel=1e-7, abs=1e-14)


def test_randomization_test_is_seeded():
    a = [i % 5 / 10 for i in range(40)]
    b = [x + (0.1 if i % 3 else -0.05) for i, x in enumerate(a)]
    r1 = significance.randomization_test(a, b, 5000, seed=1)
    assert r1 == significance.randomization_test(a, b, 5000, seed=1)
    assert 0 < r1.p_value < 0.01
    assert significance.randomization_test(a, a, 100).p_value == 1.0
    # agrees with the t-test on a clear null
    c = [x + (0.01 if i % 2 else -0.01) for i, x in enumerate(a)]
    assert significance.randomization_test(a, c, 2000).p_value > 0.5


def test_corrections():
    p = [0.01, 0.04, 0.03, 0.5]
    assert significance.adjust_p_values(p, "bonferroni") == pytest.approx([0.04, 0.16, 0.12, 1.0])
    assert significance.adjust_p_values(p, "holm") == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert significance.adjust_p_values(p, "none") == p


def _write(path: Path, run: dict) -> Path:
    with path.open("w") as f:
        for q, docs in run.items():
            for i, (d, s) in enumerate(docs.items()):
                f.write(f"{q} Q0 {d} {i + 1} {s} t\n")
    return path


def test_compare_cli(tmp_path: Path, capsys):
    qrels = tmp_path / "qrels.trec"
    qrels.write_text("".join(f"q{i} 0 rel{i} 1\n" for i in range(30)))
    base = _write(tmp_path / "base.trec", {f"q{i}": {"x": 2.0, f"rel{i}": 1.0} for i in range(30)})
    better = _write(tmp_path / "better.trec", {f"q{i}": {f"rel{i}": 2.0, "x": 1.0} for i in range(30)})
    mixed = _write(
        tmp_path / "mixed.trec", {f"q{i}": {f"rel{i}": 2.0 if i % 2 else 0.5, "x": 1.0} for i in range(30)}
    )
    args = [
        "eval",
        "compare",
        "--qrels",
        str(qrels),
        "--run",
        f"base={base}",
        "--run",
        f"better={better}",
        "--run",
        f"mixed={mixed}",
        "-m",
        "MRR",
        "--json",
    ]
    assert main(args) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["system"] for r in rows] == ["better", "mixed"]
    assert rows[0]["difference"] == pytest.approx(0.5) and rows[0]["p"] == 0.0  # constant improvement
    assert rows[1]["mean"] == pytest.approx(0.75) and rows[1]["queries"] == 30
    assert rows[1]["p_adjusted"] == pytest.approx(rows[1]["p"])  # Holm: the larger of 2 p-values keeps its p
    assert main(args[:-1] + ["--test", "perm", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "better" in out and "mixed" in out and "(perm, holm)" in out
    assert not math.isnan(float(out.splitlines()[1].split()[-1]))
