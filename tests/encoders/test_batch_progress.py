"""An encoder's batches advance the progress bar its caller made current (``clirkit._progress.counting``),
so an experiment's query-encoding stages show counts and an ETA on a terminal and nothing elsewhere."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from clirkit._progress import ProgressBar, counting
from clirkit.encoders.tokenization import map_batches
from clirkit.experiment.systems.dense import encode_task_queries
from conftest import Terminal


@pytest.mark.parametrize("workers", [1, 3])
def test_each_batch_advances_the_current_bar(workers):
    lengths = [5, 1, 4, 2, 3, 3, 1, 2, 6, 1]
    screen = Terminal()
    with counting(ProgressBar(len(lengths), "queries", "queries", stream=screen)) as bar:
        batches, sums = map_batches(lengths, 3, workers, lambda batch: int(batch.sum()))
    assert bar.done == len(lengths) and sum(sums) == sum(range(len(lengths)))
    assert "10/10 queries" in screen.getvalue()
    # No current bar: batches run as before, nothing is counted or drawn.
    assert map_batches(lengths, 3, workers, len)[1] == [len(b) for b in batches]
    assert bar.done == len(lengths)


class BatchedEncoder:
    """Encodes like the ONNX encoders: through map_batches, two texts a batch."""

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        batches, rows = map_batches([len(t) for t in texts], 2, 1, lambda b: np.asarray(b, dtype=np.float32))
        out = np.empty(len(texts), dtype=np.float32)
        for batch, values in zip(batches, rows):
            out[batch] = values
        return out


@pytest.mark.parametrize("quiet", [False, True])
def test_query_encoding_stages_draw_a_bar_unless_quiet(monkeypatch, quiet):
    screen = Terminal()
    monkeypatch.setattr("sys.stderr", screen)
    task = SimpleNamespace(queries=tuple((f"q{i}", "x" * (i + 1), "en") for i in range(5)))
    vectors = encode_task_queries(BatchedEncoder(), task, SimpleNamespace(quiet=quiet))
    assert vectors.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    drawn = screen.getvalue()
    assert ("5/5 queries" in drawn) is not quiet and (drawn == "") is quiet
