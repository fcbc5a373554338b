"""Sharded dense indexes: searched through shards (threads, or Ray actors on a local cluster the
module starts), the run equals, byte for byte, the single index with the same codebook at k=10 and
k=1000, with and without re-scoring; a worker killed mid-build or mid-search changes nothing; Ray
Data encoding of a SciFact subset with e5 equals ``clirkit encode`` (skipped without ../shared).
Skipped without Ray (which needs Python >= 3.10)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from clirkit._native import IndexFormatError, InvalidInputError
from clirkit.dense import DenseIndex
from clirkit.distributed.dense import ShardedDenseIndex, build_sharded_dense, split_rows

ray = pytest.importorskip("ray")

# (pq, nbits, ivf): flat, 4-bit fast-scan, 8-bit, and both with IVF.
KINDS = [(None, 4, None), (8, 4, None), (8, 8, None), (8, 4, 6), (8, 8, 6)]


@pytest.fixture(scope="module")
def local_ray():
    # Two CPUs: the four shard actors ask for half a CPU each.
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def vectors(tmp_path_factory) -> tuple[Path, list[str], np.ndarray]:
    """Clustered vectors with repeated rows (equal scores exercise the tie rules across shards)."""
    rng = np.random.default_rng(5)
    n, d = 2400, 32
    centers = rng.normal(size=(12, d)).astype(np.float32)
    data = centers[rng.integers(0, 12, n)] + 0.2 * rng.normal(size=(n, d)).astype(np.float32)
    data[::9] = data[4]
    path = tmp_path_factory.mktemp("vectors") / "docs.npy"
    np.save(path, data.astype(np.float32))
    queries = (centers[rng.integers(0, 12, 15)] + 0.3 * rng.normal(size=(15, d))).astype(np.float32)
    return path, [f"d{i:05d}" for i in range(n)], queries


OPTIONS = {"train_size": 700, "seed": 3}


def _single(tmp: Path, npy: Path, ids: list[str], kind) -> DenseIndex:
    pq, nbits, ivf = kind
    return DenseIndex.build_file(npy, ids, tmp / "single", pq=pq, nbits=nbits, ivf=ivf, quiet=True, **OPTIONS)


def _sharded(tmp: Path, npy: Path, ids: list[str], kind, **build) -> None:
    pq, nbits, ivf = kind
    build_sharded_dense(
        split_rows(npy, ids, 4), tmp / "sharded", pq=pq, nbits=nbits, ivf=ivf, **OPTIONS, **build
    )


def _runs_equal(tmp: Path, single, sharded, queries: np.ndarray, **search) -> None:
    qids = [f"q{i}" for i in range(len(queries))]
    single.search_trec(queries, qids, tmp / "single.run", **{k: v for k, v in search.items() if k[0] != "_"})
    sharded.search_trec(queries, qids, tmp / "sharded.run", **search)
    want = (tmp / "single.run").read_bytes()
    assert want and (tmp / "sharded.run").read_bytes() == want, search


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: f"pq{k[0]}x{k[1]}-ivf{k[2]}")
def test_shards_in_threads_equal_the_single_index(tmp_path, vectors, kind):
    npy, ids, queries = vectors
    single = _single(tmp_path, npy, ids, kind)
    _sharded(tmp_path, npy, ids, kind)
    with ShardedDenseIndex.open(tmp_path / "sharded") as sharded:
        for k in (10, 1000):
            for refine in (None, 0, 2 * k):
                _runs_equal(tmp_path, single, sharded, queries, k=k, refine=refine, nprobe=3)


@pytest.mark.parametrize("kind", [(8, 4, None), (8, 8, 6)], ids=["pq8x4", "ivf6-pq8x8"])
def test_through_ray_with_a_worker_killed_mid_build_and_mid_search(tmp_path, vectors, local_ray, kind):
    npy, ids, queries = vectors
    single = _single(tmp_path, npy, ids, kind)
    build_marker = tmp_path / "crash-build"
    build_marker.touch()
    _sharded(tmp_path, npy, ids, kind, ray=True, _crash_once=build_marker)
    assert not build_marker.exists(), "a build worker was killed and its task retried"
    with ShardedDenseIndex.open(tmp_path / "sharded", ray=True) as sharded:
        for k in (10, 1000):
            for refine in (None, 0):
                _runs_equal(tmp_path, single, sharded, queries, k=k, refine=refine, nprobe=2)
        # A shard actor's process dies in round 1: Ray restarts it (it reopens its shard by
        # path) and retries the call.
        search_marker = tmp_path / "crash-search"
        search_marker.touch()
        _runs_equal(tmp_path, single, sharded, queries, k=1000, _crash_once=search_marker)
        assert not search_marker.exists(), "a shard actor was killed and its call retried"


def test_a_missing_or_rebuilt_shard_is_refused(tmp_path, vectors):
    npy, ids, _ = vectors
    build_sharded_dense(split_rows(npy, ids, 3), tmp_path / "a", pq=8, train_size=500)
    build_sharded_dense(split_rows(npy, ids, 3), tmp_path / "b", pq=8, train_size=500, seed=1)
    os.rename(tmp_path / "a" / "shard-0001", tmp_path / "old")
    with pytest.raises(IndexFormatError, match="shard 1 of the sharded index is missing"):
        ShardedDenseIndex.open(tmp_path / "a")
    os.rename(tmp_path / "b" / "shard-0001", tmp_path / "a" / "shard-0001")
    with pytest.raises(IndexFormatError, match="shard 1 is of another build"):
        ShardedDenseIndex.open(tmp_path / "a")
    with pytest.raises(InvalidInputError, match="2400 rows but 3 ids"):
        split_rows(npy, ids[:3], 2)


def test_ray_data_encoding_equals_clirkit_encode(tmp_path, shared, local_ray):
    model = shared("models", "multilingual-e5-small-int8")
    corpus = shared("data", "beir-scifact", "corpus.jsonl")
    subset = tmp_path / "corpus.jsonl"
    with open(corpus, "rb") as f:
        subset.write_bytes(b"".join(next(f) for _ in range(30)))
    subprocess.run(
        [sys.executable, "-m", "clirkit.cli", "encode", "--model", str(model), "--corpus", str(subset)]
        + ["--output", str(tmp_path / "one"), "--quiet", "--threads", "1"],
        check=True,
    )
    from clirkit.distributed.cluster import connected
    from clirkit.distributed.dense import parts_from_encoding
    from clirkit.distributed.encode import encode_shards

    with connected(True):
        result = encode_shards(
            model, subset, tmp_path / "shards", shards=3, encoder_options={"batch_size": 8}
        )
    assert result.encoded == [0, 1, 2] and result.rows == 30
    parts = parts_from_encoding(tmp_path / "shards")
    want = np.load(tmp_path / "one.npy")
    got = np.concatenate([p.matrix() for p in parts])
    assert [i for p in parts for i in p.ids] == (tmp_path / "one.ids.txt").read_text().split()
    assert float(np.max(np.abs(got - want))) <= 1e-6
    # A finished shard is not encoded again; a removed one is.
    os.remove(tmp_path / "shards" / "shard-0001.npy")
    with connected(True):
        again = encode_shards(model, subset, tmp_path / "shards", shards=3, encoder_options={"batch_size": 8})
    assert again.encoded == [1] and again.skipped == [0, 2]
    assert np.array_equal(np.concatenate([p.matrix() for p in parts_from_encoding(tmp_path / "shards")]), got)

    # Those e5 vectors as a PQ index: one shard per embedding shard, searched as the single index.
    single = DenseIndex.build_file(
        tmp_path / "one.npy", (tmp_path / "one.ids.txt").read_text().split(), tmp_path / "single", pq=48
    )
    build_sharded_dense(parts_from_encoding(tmp_path / "shards"), tmp_path / "sharded", pq=48)
    with ShardedDenseIndex.open(tmp_path / "sharded") as sharded:
        for k in (10, 1000):
            for refine in (None, 0):
                _runs_equal(tmp_path, single, sharded, want[:12], k=k, refine=refine)


def test_the_cli_builds_and_searches_a_sharded_dense_index(tmp_path, vectors, local_ray):
    from clirkit.cli import main

    npy, ids, queries = vectors
    (tmp_path / "ids.txt").write_text("".join(i + "\n" for i in ids))
    np.save(tmp_path / "q.npy", queries)
    (tmp_path / "qids.txt").write_text("".join(f"q{i}\n" for i in range(len(queries))))
    common = [
        "--embeddings",
        str(npy),
        "--ids",
        str(tmp_path / "ids.txt"),
        "--pq",
        "8",
        "--train-size",
        "700",
    ]
    assert main(["index", "dense", *common, "--index", str(tmp_path / "single"), "--quiet"]) == 0
    sharded = ["--index", str(tmp_path / "sharded"), "--shards", "3", "--quiet"]
    assert main(["index", "dense", *common, *sharded, "--ray"]) == 0
    runs = {}
    for name, index, extra in [
        ("single", "single", []),
        ("local", "sharded", []),
        ("ray", "sharded", ["--ray"]),
    ]:
        out = tmp_path / f"{name}.run"
        search = ["search", "dense", "--index", str(tmp_path / index), "--queries", str(tmp_path / "q.npy")]
        assert (
            main([*search, "--qids", str(tmp_path / "qids.txt"), "--output", str(out), "--quiet", *extra])
            == 0
        )
        runs[name] = out.read_bytes()
    assert runs["single"] and runs["local"] == runs["single"] and runs["ray"] == runs["single"]


def test_a_search_through_ray_draws_one_bar_fed_by_the_actors(tmp_path, vectors, local_ray, monkeypatch):
    """The shard actors count the queries their scans finish; the bar polls and sums them."""
    from conftest import Terminal

    npy, ids, queries = vectors
    qids = [f"q{i}" for i in range(len(queries))]
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    _sharded(tmp_path, npy, ids, (8, 4, None), ray=True)
    assert "4/4 shards built" in terminal.getvalue()
    for quiet in (False, True):
        with ShardedDenseIndex.open(tmp_path / "sharded", ray=True, quiet=quiet) as sharded:
            sharded.search_trec(queries, qids, tmp_path / ("quiet.run" if quiet else "drawn.run"), 10)
    n = 4 * len(queries)
    assert terminal.getvalue().count(f"{n}/{n} queries x 4 shards") == 1
    assert (tmp_path / "drawn.run").read_bytes() == (tmp_path / "quiet.run").read_bytes()
