"""Sharded BM25 on a local Ray cluster started here: 4-shard indexes of the embedded sample
(several languages) and of SciFact give byte-identical runs to the single index at k=10 and
k=1000, searched through Ray and locally; a worker killed mid-build or mid-search changes
nothing; a missing shard or one of another build is refused. 33-45 s on the 2 shared cores
(the cluster's start ~10 s, SciFact's builds most of the rest); skipped without Ray, which needs
Python >= 3.10."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from clirkit import IndexFormatError  # noqa: E402
from clirkit.bm25 import BM25Index  # noqa: E402
from clirkit.cli import main  # noqa: E402
from clirkit.distributed import RayShardedBM25, ShardedBM25Index, build_sharded_bm25  # noqa: E402
from clirkit.distributed.cluster import connected  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    # Two CPUs: shard builds run two at a time and the four shard actors ask for half a CPU each.
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def single_run(corpus: Path, queries: Path, out: Path, k: int, **build) -> bytes:
    index = BM25Index.build(corpus, out / "single", quiet=True, **build)
    index.search_file_to_trec(queries, out / f"single-{k}.run", k, tag="t", quiet=True)
    return (out / f"single-{k}.run").read_bytes()


@pytest.fixture(scope="module")
def sample(cluster, sample_dir, tmp_path_factory):
    """The sample as a single index and as 4 shards built on the cluster, one build task's
    worker killed on its first try."""
    out = tmp_path_factory.mktemp("sample")
    corpus, queries = sample_dir / "corpus.jsonl", sample_dir / "queries.jsonl"
    runs = {k: single_run(corpus, queries, out, k, lang_field="lang") for k in (10, 1000)}
    marker = out / "crash-build"
    marker.touch()
    index = build_sharded_bm25(corpus, out / "sharded", 4, lang_field="lang", ray=True, _crash_once=marker)
    assert not marker.exists(), "a build worker was killed and its task retried"
    return out, queries, runs, index


@pytest.mark.parametrize("k", [10, 1000])
def test_sample_through_ray_and_locally_equals_the_single_index(sample, k):
    out, queries, runs, index = sample
    assert index.num_shards == 4 and index.num_docs == 227
    assert all(s.num_docs > 0 for s in index.manifest.shards)
    with RayShardedBM25(out / "sharded") as searcher:
        searcher.search_file_to_trec(queries, out / f"ray-{k}.run", k, tag="t")
    assert (out / f"ray-{k}.run").read_bytes() == runs[k]
    index.search_file_to_trec(queries, out / f"local-{k}.run", k, tag="t")
    assert (out / f"local-{k}.run").read_bytes() == runs[k]
    # The Python API's results are the single index's too.
    triples = [("q1", "Super Bowl", "en"), ("q2", "Denver Broncos", "de"), ("q3", "كم نقطة", "ar")]
    single = BM25Index.open(out / "single").batch_search(triples, k)
    assert index.batch_search(triples, k) == {q: single[q] for q, _, _ in triples}


def test_a_search_worker_killed_mid_search_changes_nothing(sample):
    out, queries, runs, _ = sample
    marker = out / "crash-search"
    marker.touch()
    with RayShardedBM25(out / "sharded", max_restarts=2, _crash_once=marker) as searcher:
        searcher.search_file_to_trec(queries, out / "crashed.run", 1000, tag="t")
        assert not marker.exists(), "a shard actor's worker was killed and restarted"
        # And a shard actor killed from outside is restarted too.
        ray.kill(searcher.actors[2], no_restart=False)
        searcher.search_file_to_trec(queries, out / "killed.run", 1000, tag="t")
    assert (out / "crashed.run").read_bytes() == runs[1000]
    assert (out / "killed.run").read_bytes() == runs[1000]


def test_the_cli_builds_and_searches_sharded(sample, tmp_path, sample_dir):
    out, queries, runs, _ = sample
    corpus = sample_dir / "corpus.jsonl"
    common = ["--quiet", "--threads", "1"]
    assert main(["index", "bm25", "--corpus", str(corpus), "--index", str(tmp_path / "s"), "--lang-field", "lang",
                 "--shards", "3", "--ray", *common]) == 0  # fmt: skip
    assert main(["verify", str(tmp_path / "s")]) == 0  # the shards' files are checked too
    for extra in (["--ray"], []):
        run = tmp_path / f"run{len(extra)}"
        args = [
            "search",
            "bm25",
            "--index",
            str(tmp_path / "s"),
            "--queries",
            str(queries),
            "--output",
            str(run),
        ]
        assert main([*args, "--k", "1000", "--tag", "t", *extra, *common]) == 0
        assert run.read_bytes() == runs[1000]
    with pytest.raises(SystemExit, match="--ray searches a sharded index"):
        main(["search", "bm25", "--index", str(out / "single"), "--queries", str(queries), "--output",
              str(tmp_path / "x"), "--ray"])  # fmt: skip


def test_missing_or_foreign_shards_are_refused(sample, tmp_path, sample_dir):
    out, _, _, _ = sample
    copy = tmp_path / "copy"
    shutil.copytree(out / "sharded", copy)
    meta = json.loads((copy / "meta.json").read_text())
    assert meta["format"] == "clirkit-sharded-bm25" and len(meta["shards"]) == 4
    # Shard 1 replaced by an index of another build.
    shutil.rmtree(copy / "shard-0001")
    shutil.copytree(out / "single", copy / "shard-0001")
    with pytest.raises(IndexFormatError, match=r"shard-0001.*shard 1 is of another build"):
        ShardedBM25Index.open(copy)
    with pytest.raises(IndexFormatError, match="another build"):
        RayShardedBM25(copy)
    shutil.rmtree(copy / "shard-0001")
    with pytest.raises(IndexFormatError, match="shard 1 of the sharded index is missing"):
        ShardedBM25Index.open(copy)
    # A directory of someone else's is never replaced by a sharded build.
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(IndexFormatError, match="not a clirkit index"):
        build_sharded_bm25(sample_dir / "corpus.jsonl", mine, 2, lang_field="lang")
    assert (mine / "notes.txt").read_text() == "keep"


@pytest.fixture(scope="module")
def scifact(cluster, shared, tmp_path_factory):
    data = shared("data", "beir-scifact")
    out = tmp_path_factory.mktemp("scifact")
    single = BM25Index.build(data / "corpus.jsonl", out / "single", quiet=True)
    build_sharded_bm25(data / "corpus.jsonl", out / "sharded", 4, ray=True)
    return out, data / "queries.jsonl", single


@pytest.mark.parametrize("k", [10, 1000])
def test_scifact_through_ray_equals_the_single_index(scifact, k):
    out, queries, single = scifact
    single.search_file_to_trec(queries, out / f"single-{k}.run", k, tag="t", quiet=True)
    # `connected` uses the cluster this process is already connected to.
    with connected(), RayShardedBM25(out / "sharded") as searcher:
        searcher.search_file_to_trec(queries, out / f"ray-{k}.run", k, tag="t")
    assert (out / f"ray-{k}.run").read_bytes() == (out / f"single-{k}.run").read_bytes()


def test_a_search_through_ray_draws_one_bar_fed_by_the_actors(sample, sample_dir, tmp_path, monkeypatch):
    """The shard actors count their queries; the bar polls and sums them (a terminal only). A build
    through Ray draws the shards built."""
    import sys

    from conftest import Terminal

    out, queries, runs, _ = sample
    n = sum(1 for line in queries.read_text(encoding="utf-8").splitlines() if line.strip())
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    build_sharded_bm25(sample_dir / "corpus.jsonl", tmp_path / "drawn", 2, lang_field="lang", ray=True)
    assert "2/2 shards built" in terminal.getvalue()
    for quiet in (False, True):
        with RayShardedBM25(out / "sharded", quiet=quiet) as searcher:
            searcher.search_file_to_trec(queries, out / ("quiet.run" if quiet else "drawn.run"), 10, tag="t")
    assert terminal.getvalue().count(f"{4 * n}/{4 * n} queries x 4 shards") == 1
    assert (out / "drawn.run").read_bytes() == (out / "quiet.run").read_bytes() == runs[10]
