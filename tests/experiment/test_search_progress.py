"""An experiment's dense search stage (``search_dense``) draws the search's progress bar unless the run
is quiet, and writes the same run either way."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pytest
from clirkit.dense import DenseIndex
from clirkit.experiment.stage import RUN_FILE
from clirkit.experiment.systems.dense import search_dense
from conftest import Terminal


@pytest.mark.parametrize("drop_self_hits", [False, True])
def test_search_stage_draws_its_bar_unless_quiet(drop_self_hits, tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    data = rng.standard_normal((200, 8)).astype(np.float32)
    DenseIndex.build(data, [f"d{i}" for i in range(200)]).save(tmp_path / "index")
    queries = (rng.standard_normal((15, 8)).astype(np.float32), [f"q{i}" for i in range(15)])
    task = SimpleNamespace(drop_self_hits=drop_self_hits)
    runs = []
    for quiet in (False, True):
        terminal, out = Terminal(), tmp_path / f"out-{quiet}"
        out.mkdir()
        monkeypatch.setattr(sys, "stderr", terminal)
        ctx = SimpleNamespace(threads=2, quiet=quiet)
        search_dense(tmp_path / "index", queries, out, 10, task, {"refine": 0}, ctx, maxp=False)
        assert ("15/15 queries" in terminal.getvalue()) is not quiet
        runs.append((out / RUN_FILE).read_bytes())
    assert runs[0] == runs[1]
