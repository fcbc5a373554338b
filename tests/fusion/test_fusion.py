"""Fusion equals plain references written here from the formulas, on random runs with ties."""

from __future__ import annotations

import math
import random
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import clirkit
import pytest
from clirkit import NativeRun, fuse
from clirkit.fusion import fuse_native

Run = Dict[str, Dict[str, float]]


def canonical(docs: Dict[str, float]) -> List[Tuple[str, float]]:
    """Score descending, then doc id descending as bytes (trec_eval's order)."""
    by_id = sorted(docs.items(), key=lambda d: d[0].encode("utf-8"), reverse=True)
    return sorted(by_id, key=lambda d: d[1], reverse=True)


def random_run(rng: random.Random, queries: Sequence[str], pool: int) -> Run:
    run: Run = {}
    for q in queries:
        if rng.random() < 0.15:
            continue  # some queries are missing from some runs
        n = rng.randint(1, 40)
        ids = rng.sample([f"d{i}" for i in range(pool)] + ["dé", "d\u4e2d"], n)
        # Few distinct scores, so ties (broken by doc id) are everywhere.
        run[q] = {d: rng.choice([0.5, 1.0, 1.5, 2.0, -3.25]) for d in ids}
    return run


def ref_rrf(runs: Sequence[Run], k: float, weights: Sequence[float], depth: Optional[int]) -> Run:
    out: Run = {}
    for w, run in zip(weights, runs):
        for q, docs in run.items():
            acc = out.setdefault(q, {})
            for rank, (d, _) in enumerate(canonical(docs)[:depth], start=1):
                acc[d] = acc.get(d, 0.0) + w / (k + rank)
    return out


def normalized(docs: List[Tuple[str, float]], norm: str) -> List[Tuple[str, float]]:
    scores = [s for _, s in docs]
    if norm == "none":
        return docs
    if norm == "minmax":
        lo, hi = min(scores), max(scores)
        return [(d, (s - lo) / (hi - lo) if hi > lo else 0.0) for d, s in docs]
    total = 0.0
    for s in scores:
        total += s
    mean = total / len(scores)
    var = 0.0
    for s in scores:
        var += (s - mean) * (s - mean)
    std = math.sqrt(var / len(scores))
    return [(d, (s - mean) / std if std > 0 else 0.0) for d, s in docs]


def ref_comb(
    runs: Sequence[Run], weights: Sequence[float], depth: Optional[int], norm: str, mnz: bool
) -> Run:
    out: Run = {}
    hits: Dict[Tuple[str, str], int] = {}
    for w, run in zip(weights, runs):
        for q, docs in run.items():
            acc = out.setdefault(q, {})
            for d, s in normalized(canonical(docs)[:depth], norm):
                acc[d] = acc.get(d, 0.0) + w * s
                hits[(q, d)] = hits.get((q, d), 0) + 1
    if mnz:
        out = {q: {d: s * hits[(q, d)] for d, s in docs.items()} for q, docs in out.items()}
    return out


def as_lists(run: Run) -> List[Tuple[str, List[Tuple[str, float]]]]:
    return [(q, canonical(docs)) for q, docs in run.items()]


def got_lists(run: Run) -> List[Tuple[str, List[Tuple[str, float]]]]:
    return [(q, list(docs.items())) for q, docs in run.items()]


@pytest.fixture(scope="module")
def random_runs() -> List[Run]:
    rng = random.Random(7)
    queries = [f"q{i}" for i in range(60)]
    return [random_run(rng, queries, pool=50) for _ in range(3)]


@pytest.mark.parametrize("depth", [None, 1, 5])
@pytest.mark.parametrize("weights", [None, [1.0, 0.5, 2.0]])
def test_rrf_equals_the_formula(random_runs, weights, depth):
    got = fuse(random_runs, method="rrf", k=60, weights=weights, depth=depth)
    expected = ref_rrf(random_runs, 60.0, weights or [1.0] * 3, depth)
    # Exactly: same additions in the same order; queries in first-appearance order.
    assert got_lists(got) == as_lists(expected)


@pytest.mark.parametrize("method", ["combsum", "combmnz"])
@pytest.mark.parametrize("norm", ["minmax", "zscore", "none"])
def test_comb_methods_equal_the_formulas(random_runs, method, norm):
    weights = [0.3, 1.0, 2.5]
    got = fuse(random_runs, method=method, norm=norm, weights=weights, depth=10)
    expected = ref_comb(random_runs, weights, 10, norm, mnz=method == "combmnz")
    assert got_lists(got) == as_lists(expected)


def test_interpolation_and_top(random_runs):
    got = fuse(random_runs[:2], method="interpolate", alpha=0.3, norm="minmax", top=3)
    expected = ref_comb(random_runs[:2], [0.3, 1.0 - 0.3], None, "minmax", mnz=False)
    assert got_lists(got) == [(q, docs[:3]) for q, docs in as_lists(expected)]


def test_long_ids_around_the_inline_limit(tmp_path):
    """Ids of 15 bytes are held inline, longer ones in an arena: both kinds, sharing prefixes
    and tied scores, fuse and round-trip through files exactly."""
    rng = random.Random(11)
    pool = (
        [f"doc-0000000-{i:03}" for i in range(20)]  # 15 bytes
        + [f"doc-00000000-{i:03}" for i in range(20)]  # 16 bytes
        + [f"doc-00000000-{i:03}-\u00e9t\u00e9-{'x' * i}" for i in range(20)]
        + ["d\u4e2d\u6587\u6587\u6587\u6587", "d"]
    )
    runs = []
    for _ in range(3):
        runs.append(
            {
                f"q{q}": {d: rng.choice([0.5, 1.0, 2.0]) for d in rng.sample(pool, rng.randint(1, 30))}
                for q in range(15)
            }
        )
    got = fuse(runs, method="rrf", k=60, depth=12)
    assert got_lists(got) == as_lists(ref_rrf(runs, 60.0, [1.0] * 3, 12))
    got = fuse(runs, method="combmnz", norm="zscore")
    assert got_lists(got) == as_lists(ref_comb(runs, [1.0] * 3, None, "zscore", mnz=True))
    paths = []
    for i, run in enumerate(runs):
        paths.append(tmp_path / f"long{i}.trec")
        write_trec(paths[-1], run, rng)
    out = tmp_path / "fused.trec"
    fuse(paths, method="rrf", k=60, depth=12, output=out)
    assert clirkit.read_run(out) == fuse(runs, method="rrf", k=60, depth=12)


def write_trec(path: Path, run: Run, shuffle: random.Random) -> None:
    lines = [f"{q} Q0 {d} 0 {s!r} t\n" for q, docs in run.items() for d, s in docs.items()]
    shuffle.shuffle(lines)  # queries interleaved, documents in no particular order
    path.write_text("".join(lines), encoding="utf-8")


def test_files_dicts_and_threads_agree(tmp_path, random_runs):
    rng = random.Random(3)
    paths = []
    for i, run in enumerate(random_runs):
        paths.append(tmp_path / f"r{i}.trec")
        write_trec(paths[-1], run, rng)
    from_dicts = fuse(random_runs, depth=7)
    from_files = fuse(paths, depth=7)
    # Shuffled files change query order only: compare per query.
    assert from_files == from_dicts
    one = fuse_native([NativeRun.read(str(p)) for p in paths], depth=7, threads=1).to_list()
    two = fuse_native(paths, depth=7, threads=2).to_list()
    assert one == two
    out = tmp_path / "fused.trec"
    assert fuse(paths, depth=7, output=out, tag="x") is None
    assert clirkit.read_run(out) == from_files


def test_fuse_cli(tmp_path, random_runs):
    rng = random.Random(5)
    paths = []
    for i, run in enumerate(random_runs):
        paths.append(str(tmp_path / f"r{i}.trec"))
        write_trec(Path(paths[-1]), run, rng)
    out = tmp_path / "cli.trec"
    cmd = [
        sys.executable,
        "-m",
        "clirkit.cli",
        "fuse",
        "--method",
        "rrf",
        "--k",
        "60",
        "--weights",
        "1,0.5,2",
        "--depth",
        "5",
        *paths,
        "--output",
        str(out),
    ]
    subprocess.run(cmd, check=True, timeout=60)
    assert clirkit.read_run(out) == fuse(random_runs, weights=[1, 0.5, 2], depth=5)
    first = out.read_text().splitlines()[0].split()
    assert first[1] == "Q0" and first[3] == "1" and first[5] == "clirkit-fuse"

    bad = tmp_path / "bad.trec"
    bad.write_text("q1 Q0 a 1 1.0 t\nq1 Q0 b 2 high t\n")
    res = subprocess.run(
        [sys.executable, "-m", "clirkit.cli", "fuse", paths[0], str(bad), "--output", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2
    assert "bad.trec:2: score 'high' is not a number" in res.stderr
    assert not (tmp_path / "x").exists()


def test_errors_are_clear(tmp_path):
    dup = tmp_path / "dup.trec"
    dup.write_text("q Q0 a 1 1 t\nq Q0 b 2 1 t\nq Q0 a 3 0.5 t\n")
    message = r"dup.trec:3: duplicate document 'a' for query 'q' \(first at line 1\)"
    with pytest.raises(clirkit.ParseError, match=message):
        fuse([dup])
    with pytest.raises(clirkit.InvalidInputError, match="2 weights given for 1 runs"):
        fuse([{"q": {"a": 1.0}}], weights=[1, 2])
    with pytest.raises(clirkit.InvalidInputError, match="exactly two runs"):
        fuse([{"q": {"a": 1.0}}], method="interpolate", alpha=0.5)
    with pytest.raises(clirkit.InvalidInputError, match="unknown fusion method 'borda'"):
        fuse([{"q": {"a": 1.0}}], method="borda")
    with pytest.raises(clirkit.InvalidInputError, match="not finite"):
        fuse([{"q": {"a": float("nan")}}])
    with pytest.raises(TypeError):
        fuse("run.trec")


def test_option_names_come_from_the_core_and_each_is_accepted(tmp_path):
    from clirkit import _native, fusion, significance
    from clirkit.commands import fuse as fuse_command
    from clirkit.experiment.config import model

    assert fusion.FUSION_METHODS == ("rrf", "combsum", "combmnz", "interpolate") == _native.FUSION_METHODS
    assert fusion.NORMALIZATIONS == ("minmax", "zscore", "none") == _native.NORMALIZATIONS
    assert significance.CORRECTIONS == ("holm", "bonferroni", "none") == _native.CORRECTIONS
    assert model.FUSION_METHODS is _native.FUSION_METHODS and model.NORMALIZATIONS is _native.NORMALIZATIONS
    run_a, run_b = {"q1": {"d1": 2.0, "d2": 1.0}}, {"q1": {"d2": 3.0, "d3": 1.0}}
    for method in fusion.FUSION_METHODS:
        for norm in fusion.NORMALIZATIONS:
            alpha = 0.5 if method == "interpolate" else None
            assert fusion.fuse([run_a, run_b], method=method, norm=norm, alpha=alpha)["q1"]
    for correction in significance.CORRECTIONS:
        assert len(significance.adjust_p_values([0.01, 0.2], correction)) == 2
    assert significance.adjust_p_values([0.01, 0.2], "none") == [0.01, 0.2]
    # The CLI offers exactly the core's names.
    import argparse

    top = argparse.ArgumentParser().add_subparsers()
    fuse_command.register(top, {})
    parser = top.choices["fuse"]
    choices = {a.dest: tuple(a.choices) for a in parser._actions if a.choices}
    assert choices["method"] == fusion.FUSION_METHODS and choices["norm"] == fusion.NORMALIZATIONS
