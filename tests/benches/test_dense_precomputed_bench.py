"""``benches/experiment/dense_precomputed.py`` at CI size: the experiment over precomputed float16
embeddings (PQ with refine) runs, reruns with every stage cached, and its run equals ``clirkit index
dense`` + ``clirkit search dense`` on the same files, byte for byte; peak RSS is measured. Sharded
(``--shards``), the same against ``clirkit index dense --shards``."""

from __future__ import annotations

import pytest
from conftest import bench_module


@pytest.mark.parametrize("shards", [0, 3])
def test_dense_precomputed_bench_equals_the_cli(tmp_path, shards):
    bench = bench_module("experiment/dense_precomputed")
    result = bench.main(
        [
            "--out",
            str(tmp_path),
            "--n",
            "3000",
            "--dim",
            "32",
            "--pq",
            "8",
            "--refine",
            "20",
            "--queries",
            "30",
            "--hits",
            "50",
            "--threads",
            "1",
            "--shards",
            str(shards),
        ]  # fmt: skip
    )
    assert result["equal_to_cli"] is True and result["index_shards"] == shards
    assert result["experiment"]["peak_rss_mib"] > 0 and result["rerun"]["peak_rss_mib"] > 0
    # query i is document i * n / queries plus a little noise: found near the top, unlike a random run
    assert result["ndcg_cut_10"] > 0.5
