"""A sharded index's builds and searches draw clirkit's one progress bar, here with its shards in
threads (no Ray needed; through Ray actors in ``test_bm25.py`` and ``test_dense.py``): a build one bar
over the whole input read (dense: over the shards added), a search one bar over every query on every
shard, fed by the shards' counters; nothing when stderr is not a terminal or when quiet, and the same
run either way."""

from __future__ import annotations

import json
import random

import numpy as np
from clirkit.distributed.bm25 import ShardedBM25Index, build_sharded_bm25
from clirkit.distributed.dense import ShardedDenseIndex, build_sharded_dense, split_rows
from clirkit.distributed.impact import ShardedImpactIndex, build_sharded_impact
from conftest import BAR_CASES, SAMPLE, bar_stream, check_drawn

QUERIES = SAMPLE / "queries.jsonl"


def test_sharded_bm25_builds_and_searches(tmp_path, monkeypatch):
    corpus = SAMPLE / "corpus.jsonl"
    n = sum(1 for line in QUERIES.read_text(encoding="utf-8").splitlines() if line.strip())
    size = corpus.stat().st_size / (1 << 20)
    runs = []
    for case in BAR_CASES:
        stream, quiet = bar_stream(case, monkeypatch), case == "quiet"
        build_sharded_bm25(corpus, tmp_path / case, 3, threads=1, lang_field="lang", quiet=quiet)
        index = ShardedBM25Index.open(tmp_path / case, threads=2, quiet=quiet)
        index.search_file_to_trec(QUERIES, tmp_path / f"{case}.run", 10, tag="t")
        hits = index.batch_search([("q1", "water", "en")], 5)
        runs.append(((tmp_path / f"{case}.run").read_bytes(), hits))
        # One bar over the three shards' builds; a search's over every query on every shard.
        searched = f"{3 * n}/{3 * n} queries x 3 shards"
        check_drawn(case, stream, f"{size:,.1f}/{size:,.1f} MiB read", searched, "3/3 queries x 3 shards")
    assert runs[0] == runs[1] == runs[2]


def test_sharded_impact_searches(tmp_path, monkeypatch):
    rng = random.Random(8)
    vectors, queries = tmp_path / "docs.jsonl", tmp_path / "queries.jsonl"

    def vector() -> dict[str, float]:
        return {f"t{rng.randrange(200)}": rng.randint(1, 30) / 10 for _ in range(rng.randint(1, 15))}

    def lines(prefix: str, count: int) -> str:
        return "".join(json.dumps({"id": f"{prefix}{i}", "vector": vector()}) + "\n" for i in range(count))

    vectors.write_text(lines("d", 600), encoding="utf-8")
    queries.write_text(lines("q", 11), encoding="utf-8")
    build_sharded_impact(vectors, tmp_path / "sharded", 2, threads=1, quiet=True)
    runs = []
    for case in BAR_CASES:
        stream = bar_stream(case, monkeypatch)
        with ShardedImpactIndex.open(tmp_path / "sharded", threads=2, quiet=case == "quiet") as index:
            index.search_file_to_trec(queries, tmp_path / f"{case}.run", 10)
            runs.append(((tmp_path / f"{case}.run").read_bytes(), index.batch_search(queries, 5)))
        check_drawn(case, stream, "22/22 queries x 2 shards")
        assert stream.getvalue().count("22/22 queries x 2 shards") == 2 * (case == "terminal")
    assert runs[0] == runs[1] == runs[2]


def test_sharded_dense_builds_and_searches(tmp_path, monkeypatch):
    rng = np.random.default_rng(2)
    np.save(tmp_path / "docs.npy", rng.standard_normal((900, 16)).astype(np.float32))
    ids = [f"d{i}" for i in range(900)]
    queries, qids = rng.standard_normal((13, 16)).astype(np.float32), [f"q{i}" for i in range(13)]
    runs = []
    for case in BAR_CASES:
        stream, quiet = bar_stream(case, monkeypatch), case == "quiet"
        parts = split_rows(tmp_path / "docs.npy", ids, 3)
        build_sharded_dense(parts, tmp_path / case, pq=8, threads=1, quiet=quiet)
        with ShardedDenseIndex.open(tmp_path / case, threads=2, quiet=quiet) as index:
            index.search_trec(queries, qids, tmp_path / f"{case}.run", 10)
        runs.append((tmp_path / f"{case}.run").read_bytes())
        check_drawn(case, stream, "3/3 shards built", "39/39 queries x 3 shards")
    assert runs[0] == runs[1] == runs[2]
