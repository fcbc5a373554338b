"""An experiment's dense and multi-vector search stages (``write_search_run``) draw the search's
progress bar unless the run is quiet, and write the same run either way."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pytest
from clirkit.dense import DenseIndex
from clirkit.experiment.stage import RUN_FILE
from clirkit.experiment.systems.dense import write_search_run
from conftest import Terminal


@pytest.mark.parametrize("drop_self_hits", [False, True])
def test_search_stage_draws_its_bar_unless_quiet(drop_self_hits, tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    index = DenseIndex.build(rng.standard_normal((200, 8)).astype(np.float32), [f"d{i}" for i in range(200)])
    queries = rng.standard_normal((15, 8)).astype(np.float32)
    task = SimpleNamespace(drop_self_hits=drop_self_hits)
    runs = []
    for quiet in (False, True):
        terminal, out = Terminal(), tmp_path / f"out-{quiet}"
        out.mkdir()
        monkeypatch.setattr(sys, "stderr", terminal)
        ctx = SimpleNamespace(threads=2, quiet=quiet)
        qids = [f"q{i}" for i in range(15)]
        write_search_run(index, (queries, qids), out, 10, "t", task, maxp=False, ctx=ctx)
        assert ("15/15 queries" in terminal.getvalue()) is not quiet
        runs.append((out / RUN_FILE).read_bytes())
    assert runs[0] == runs[1]
