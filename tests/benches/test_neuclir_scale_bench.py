"""``benches/experiment/neuclir_scale.py`` refuses, before writing anything, to delete a directory it did not
make (its ``data`` and ``work`` under ``--out``) and to start a run the file system cannot hold."""

from __future__ import annotations

import pytest
from conftest import bench_module


@pytest.mark.parametrize("folder", ["work", "data"])
def test_a_foreign_directory_is_refused_and_kept(tmp_path, folder):
    bench = bench_module("experiment/neuclir_scale")
    mine = tmp_path / folder / "notes.txt"
    mine.parent.mkdir()
    mine.write_text("not the bench's")
    with pytest.raises(SystemExit, match="not made by this script"):
        bench.main(["--out", str(tmp_path), "--docs", "1000", "--generator", "/nonexistent"])
    assert mine.read_text() == "not the bench's"
    assert sorted(p.name for p in tmp_path.iterdir()) == [folder]


def test_a_run_larger_than_the_free_disk_is_refused_up_front(tmp_path):
    bench = bench_module("experiment/neuclir_scale")
    with pytest.raises(SystemExit, match=r"need about \d+ GiB free .* GiB is free there"):
        bench.main(["--out", str(tmp_path / "out"), "--docs", str(10**12), "--generator", "/nonexistent"])
    assert not (tmp_path / "out").exists()
