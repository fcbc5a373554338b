"""Dense search draws the one progress bar (``clirkit._progress``) of the queries searched, fed by the
core's progress counter while the search runs with the GIL released: counts and ETA on a terminal,
nothing when stderr is not one or with ``quiet``, and the same results either way."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from clirkit import _progress
from clirkit.dense import DenseIndex
from conftest import Terminal, check_search_bar_unless_quiet, search_command

# Flat, the small 4-bit PQ path, the general path (8 bits; 4 bits with IVF).
KINDS = {"flat": {}, "pq4": {"pq": 8}, "pq8": {"pq": 8, "nbits": 8}, "ivf": {"pq": 8, "ivf": 4}}


def vectors(n: int, d: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)


def searched(index: DenseIndex, queries: np.ndarray, out: Path, **options) -> tuple:
    """Every form of search: the arrays, the run, the TREC file's bytes (MaxP run too)."""
    qids = [f"q{i}" for i in range(len(queries))]
    scores, ids = index.search(queries, 10, threads=2, **options)
    run = index.search_run(queries, qids, 10, threads=2, **options)
    index.search_trec(queries, qids, out, 10, threads=2, **options)
    maxp = index.search_run(queries, qids, 3, maxp=True, threads=2, **options)
    return scores.tobytes(), ids.tobytes(), run, out.read_bytes(), maxp


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_terminal_shows_the_queries_searched_and_results_do_not_change(kind, tmp_path, monkeypatch):
    data, queries = vectors(400, 16, 1), vectors(37, 16, 2)
    ids = [f"d{i // 3}#{i % 3}" for i in range(len(data))]
    index = DenseIndex.build(data, ids, threads=1, **KINDS[kind])
    terminal, piped, quiet = Terminal(), io.StringIO(), Terminal()
    results = []
    for stream, options in ((terminal, {}), (piped, {}), (quiet, {"quiet": True})):
        monkeypatch.setattr(sys, "stderr", stream)
        results.append(searched(index, queries, tmp_path / "run.trec", **options))
    assert results[0] == results[1] == results[2]
    drawn = terminal.getvalue()
    assert drawn.count("37/37 queries") == 4 and "searching" in drawn and "eta" in drawn
    assert piped.getvalue() == "" and quiet.getvalue() == ""


def test_the_bar_is_read_while_the_search_runs(monkeypatch):
    """The counter advances as query chunks finish, and the drawing thread reads it meanwhile."""
    index = DenseIndex.build(vectors(20_000, 128, 3), [str(i) for i in range(20_000)])
    queries = vectors(1024, 128, 4)
    monkeypatch.setattr(_progress, "REDRAW_SECONDS", 0.001)
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    index.search(queries, 10, threads=1)
    counts = [int(c.replace(",", "")) for c in re.findall(r"([\d,]+)/1,024 queries", terminal.getvalue())]
    assert counts[0] == 0 and counts[-1] == 1024
    assert any(0 < c < 1024 for c in counts), counts


def test_cli_search_draws_the_bar_unless_quiet(tmp_path, monkeypatch):
    DenseIndex.build(vectors(300, 8, 5), [f"d{i}" for i in range(300)]).save(tmp_path / "index")
    np.save(tmp_path / "q.npy", vectors(12, 8, 6))
    (tmp_path / "q.ids.txt").write_text("".join(f"q{i}\n" for i in range(12)))
    output = tmp_path / "run.trec"
    command = search_command("dense", tmp_path / "index", tmp_path / "q.npy", output)
    command += ["--qids", str(tmp_path / "q.ids.txt"), "--k", "5"]
    check_search_bar_unless_quiet(command, output, monkeypatch, "12/12 queries")


def test_a_failed_search_ends_its_bar_and_its_thread(monkeypatch):
    import threading

    from clirkit import InvalidInputError

    index = DenseIndex.build(vectors(50, 8, 7), [f"d{i}" for i in range(50)])
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with pytest.raises(InvalidInputError, match="dimension"):
        index.search(vectors(5, 4, 8), 10)
    assert not [t for t in threading.enumerate() if t.name == "clirkit-progress"]
    assert terminal.getvalue().endswith("\n")  # the bar drawn at 0/5 has its line ended
    assert "0/5 queries" in terminal.getvalue()
