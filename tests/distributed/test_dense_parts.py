"""Sharded dense builds over several ``.npy`` files and row selections (no Ray needed: shards built and
searched in threads): the rows of the parts, cut into shards by :func:`split_parts` (a shard may span
two files, or hold a selection of a file's rows), give the files of ``clirkit index dense --shards N``
on one file holding those rows in that order, byte for byte, and the same run; the stored vectors'
``--vector-dtype`` reaches the shards."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from clirkit._native import InvalidInputError
from clirkit.cli import main as cli
from clirkit.dense import DenseIndex
from clirkit.distributed.dense import ShardedDenseIndex, build_sharded_dense, split_parts


def _files(index: Path) -> dict[str, bytes]:
    """Every file of a sharded index, by its path inside it."""
    return {str(p.relative_to(index)): p.read_bytes() for p in sorted(index.rglob("*")) if p.is_file()}


@pytest.fixture
def parts(tmp_path):
    """Two embedding files (float32 and float16) and the rows a task keeps of each, with the one file
    holding exactly those rows in that order (the CLI's input)."""
    rng = np.random.default_rng(11)
    a = rng.standard_normal((90, 16)).astype(np.float32)
    b = rng.standard_normal((70, 16)).astype(np.float16)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    ids_a = [f"a{i}" for i in range(90)]
    ids_b = [f"b{i}" for i in range(70)]
    kept_b = [n for n in range(70) if n % 3 != 1]
    given = [
        (tmp_path / "a.npy", ids_a, None),
        (tmp_path / "b.npy", [ids_b[n] for n in kept_b], kept_b),
    ]
    np.save(tmp_path / "all.npy", np.concatenate([a, b[kept_b].astype(np.float32)]))
    ids = ids_a + [ids_b[n] for n in kept_b]
    (tmp_path / "all.ids.txt").write_text("".join(i + "\n" for i in ids), encoding="utf-8")
    return given, ids


@pytest.mark.parametrize("shards", [1, 3, 4])
def test_parts_and_selections_shard_as_the_cli_shards_their_rows(tmp_path, parts, shards):
    given, ids = parts
    cut = split_parts(given, shards)
    assert [len(p.ids) for shard in cut for p in shard] and sum(len(p.ids) for s in cut for p in s) == len(
        ids
    )
    assert [i for shard in cut for p in shard for i in p.ids] == ids
    if shards == 3:  # a shard spans the end of a.npy and the start of b.npy's kept rows
        assert [len(s) for s in cut] == [1, 2, 1]
    options = {"pq": 4, "train_size": 120, "seed": 2, "vector_dtype": "float16"}
    build_sharded_dense(cut, tmp_path / "exp", **options, threads=1)
    flags = ["--pq", "4", "--train-size", "120", "--seed", "2", "--vector-dtype", "float16"]
    assert cli(["index", "dense", "--embeddings", str(tmp_path / "all.npy"), "--ids",
                str(tmp_path / "all.ids.txt"), "--index", str(tmp_path / "cli"), "--shards", str(shards),
                *flags, "--threads", "1", "--quiet"]) == 0  # fmt: skip
    got = _files(tmp_path / "exp")
    assert got == _files(tmp_path / "cli")
    assert DenseIndex.open(tmp_path / "exp" / "shard-0000").vector_dtype == "float16"

    queries = np.random.default_rng(3).standard_normal((5, 16)).astype(np.float32)
    qids = [f"q{i}" for i in range(5)]
    single = DenseIndex.build_file([p for p, _, _ in given], ids, tmp_path / "single", rows=[r for *_, r in given],
                                   **options, quiet=True)  # fmt: skip
    single.search_trec(queries, qids, tmp_path / "single.trec", 30)
    with ShardedDenseIndex.open(tmp_path / "exp", threads=1) as sharded:
        sharded.search_trec(queries, qids, tmp_path / "sharded.trec", 30)
    assert (tmp_path / "sharded.trec").read_bytes() == (tmp_path / "single.trec").read_bytes()


def test_bad_parts_are_refused(tmp_path, parts):
    given, ids = parts
    with pytest.raises(InvalidInputError, match=r"shards must be between 1 and the 137 rows, got 138"):
        split_parts(given, 138)
    with pytest.raises(InvalidInputError, match=r"a\.npy has 90 rows but 89 ids are given"):
        split_parts([(given[0][0], given[0][1][:-1], None)], 2)
    with pytest.raises(InvalidInputError, match=r"b\.npy: 47 rows kept but 46 ids are given"):
        split_parts([(given[1][0], given[1][1][:-1], given[1][2])], 2)


def test_shards_are_streamed_from_the_files_with_the_budget(tmp_path, parts, monkeypatch):
    """No shard's rows are gathered into a matrix: each shard is encoded from the files a chunk at a
    time, the ``memory_mb`` budget shared by the shards encoded at once."""
    import clirkit.distributed.dense as sharded

    def refused(self):
        raise AssertionError(f"{self.npy}: rows gathered into a matrix")

    budgets = []
    real_add = DenseIndex.add

    def add(self, embeddings, ids, index_dir, **kw):
        budgets.append(kw["memory_mb"])
        assert not isinstance(embeddings, np.ndarray)
        return real_add(self, embeddings, ids, index_dir, **kw)

    monkeypatch.setattr(sharded.EmbeddingRows, "matrix", refused)
    monkeypatch.setattr(DenseIndex, "add", add)
    given, ids = parts
    build_sharded_dense(split_parts(given, 3), tmp_path / "exp", pq=4, memory_mb=10, threads=2)
    assert budgets == [5, 5, 5]
