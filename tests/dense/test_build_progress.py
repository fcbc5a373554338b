"""Dense builds draw clirkit's one progress bar over the rows encoded (a PQ build) or written (a
streamed build, an add), fed by the core's counter: on a terminal only, never when quiet, and the
same index either way."""

from __future__ import annotations

import numpy as np
from clirkit.dense import DenseIndex
from conftest import BAR_CASES, bar_stream, check_drawn


def test_builds_draw_the_rows_on_a_terminal_only(tmp_path, monkeypatch):
    rng = np.random.default_rng(5)
    data, more = rng.standard_normal((500, 16)).astype(np.float32), rng.standard_normal((70, 16))
    np.save(tmp_path / "data.npy", data)
    ids, new_ids = [f"d{i}" for i in range(500)], [f"n{i}" for i in range(70)]
    saved = []
    for case in BAR_CASES:
        stream, quiet = bar_stream(case, monkeypatch), case == "quiet"
        DenseIndex.build(data, ids, pq=4, threads=1, quiet=quiet).save(tmp_path / f"built-{case}")
        streamed = DenseIndex.build_file(
            tmp_path / "data.npy", ids, tmp_path / f"streamed-{case}", pq=4, quiet=quiet
        )
        added = streamed.add(more.astype(np.float32), new_ids, tmp_path / f"added-{case}", quiet=quiet)
        assert added.ntotal == 570
        dirs = [tmp_path / f"{kind}-{case}" for kind in ("built", "streamed", "added")]
        saved.append([sorted(p.read_bytes() for p in d.iterdir()) for d in dirs])
        check_drawn(case, stream, "indexing", "570/570 rows")
        assert stream.getvalue().count("500/500 rows") == 2 * (case == "terminal")
    assert saved[0] == saved[1] == saved[2]
