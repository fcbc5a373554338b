"""Sharded indexes, built and searched across processes or machines on Ray (``clirkit[ray]``).

A sharded index is a directory of ordinary indexes, one per shard, with a manifest listing them
(:mod:`clirkit.distributed.sharded`); searching it gives, byte for byte, the run of the single
index over the whole corpus. Shards can be built and searched without Ray (one process, shards
in threads) or on a Ray cluster (:mod:`clirkit.distributed.cluster`): builds as Ray tasks, search
by scatter-gather through one actor per shard. Only this package imports Ray, and only when a
cluster is asked for."""

from __future__ import annotations

from clirkit.distributed.bm25 import RayShardedBM25, ShardedBM25Index, build_sharded_bm25
from clirkit.distributed.impact import ShardedImpactIndex, build_sharded_impact
from clirkit.distributed.sharded import ShardedManifest, ShardRecord, read_manifest, sharded_kind

__all__ = [
    "RayShardedBM25",
    "ShardRecord",
    "ShardedBM25Index",
    "ShardedImpactIndex",
    "ShardedManifest",
    "build_sharded_bm25",
    "build_sharded_impact",
    "read_manifest",
    "sharded_kind",
]
