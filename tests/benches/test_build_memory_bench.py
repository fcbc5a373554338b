"""``benches/multivector/build_memory.py`` builds the same index by the copying path and by reading the
token files in place, each in its own measured process, and refuses to delete folders it did not make."""

from __future__ import annotations

import pytest
from conftest import bench_module


def test_both_paths_build_the_same_index_and_are_measured(tmp_path):
    bench = bench_module("multivector/build_memory")
    result = bench.main(["--out", str(tmp_path), "--tokens", "6000", "--dim", "16", "--parts", "3",
                         "--centroids", "16", "--rounds", "1", "--threads", "1"])  # fmt: skip
    assert result["indexes identical"]
    assert [r["path"] for r in result["runs"]] == ["copying", "in place"]
    assert all(r["seconds"] > 0 and r["peak_rss_mib"] != 0 for r in result["runs"])
    assert sorted(p.name for p in (tmp_path / "data").glob("*.tokens.npy")) == [
        f"part{p}.tokens.npy" for p in range(3)
    ]


def test_a_foreign_data_folder_is_refused_and_kept(tmp_path):
    bench = bench_module("multivector/build_memory")
    mine = tmp_path / "data" / "notes.txt"
    mine.parent.mkdir()
    mine.write_text("not the bench's")
    with pytest.raises(SystemExit, match="not made by this script"):
        bench.main(["--out", str(tmp_path), "--tokens", "6000", "--dim", "16"])
    assert mine.read_text() == "not the bench's"
