"""The one Python progress bar (``clirkit._progress``): counts, rate and ETA on a terminal, nothing at
all when stderr is not one or when quiet; reranking and encoding draw it."""

from __future__ import annotations

import io
import sys

from clirkit._progress import ProgressBar, duration
from clirkit.rerank import CallableScorer, rerank_pointwise
from conftest import Terminal


def test_a_bar_shows_counts_rate_and_eta_on_a_terminal_only():
    shown = Terminal()
    bar = ProgressBar(10, "reranking", "windows", stream=shown)
    bar.update(0)
    bar.shown = 0.0  # redraw now, whatever the clock
    bar.advance(3)
    line = bar.line(bar.first[0] + 2.0)
    assert "reranking" in line and "3/10 windows" in line and "(1.5/s, eta 0:00:04)" in line
    for _ in range(7):
        bar.advance()
    assert "10/10 windows" in shown.getvalue().rsplit("\r", 1)[1]  # the last drawing is complete
    assert shown.getvalue().endswith("\n")  # a complete bar ends its line
    piped, quiet = io.StringIO(), Terminal()
    for stream, enabled in ((piped, True), (quiet, False)):
        other = ProgressBar(5, "encoding", stream=stream, enabled=enabled)
        other.advance(5)
        other.close()
        assert stream.getvalue() == ""
    assert duration(3725) == "1:02:05"


def test_reranking_draws_the_bar_per_query(monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    run = {"q1": {"a": 2.0, "b": 1.0}, "q2": {"a": 1.0}}
    scorer = CallableScorer(lambda q, ps: [len(p) for p in ps], "length")
    rerank_pointwise(run, {"q1": "x", "q2": "y"}, {"a": "aa", "b": "b"}, scorer, progress=True)
    assert "2/2 queries" in terminal.getvalue()
    quiet = Terminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    rerank_pointwise(run, {"q1": "x", "q2": "y"}, {"a": "aa", "b": "b"}, scorer, progress=False)
    assert quiet.getvalue() == ""
