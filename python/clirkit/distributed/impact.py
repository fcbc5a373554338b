"""Sharded impact (learned-sparse) indexes: the vectors file cut into document-partitioned shards
(ranges of whole lines, in file order) built here or as Ray tasks, and search by scatter-gather.

An impact score is the integer dot product of the query's and the document's impacts: it needs
no statistics of the whole collection, so every shard scores as the single index does. Exact
search: every shard returns its exact top k and the top k's merged in canonical order are the
single index's run, byte for byte. Approximate search: every shard builds its approximate
structure with the same ``postings_per_term`` and is searched with the same settings, and the
shards' top k's are merged the same way; its audit re-runs a seeded sample of the queries with
the exact sharded search and compares as :meth:`clirkit.impact.ApproximateImpactIndex.audit`
does (Accuracy@10, score gap).

The one difference from the single index: it refuses a query whose largest possible score, over
the whole collection, could reach 2^24 (where f32 stops holding every integer); a shard bounds
the query by its own documents only, so such a query may be searched here, its scores still exact.

Without Ray the shards are searched in threads of this process; with Ray
(:mod:`clirkit.distributed.cluster`) each shard is held by an actor that opens it by path
(restarted, and its call retried, if its worker dies)."""

from __future__ import annotations

import os
from typing import Any, Optional

from clirkit import _native
from clirkit._checks import checked_int
from clirkit._native import InvalidInputError
from clirkit._types import PathLike
from clirkit.distributed import cluster
from clirkit.distributed.sharded import ShardedManifest, ShardScatter, build_line_shards, read_manifest
from clirkit.impact import (
    DEFAULT_POSTINGS_PER_TERM,
    DEFAULT_QUANTIZE,
    RUN_TAG,
    ApproximateSettings,
    AuditReport,
    Queries,
    native_queries,
)

__all__ = ["ImpactShard", "ShardedImpactIndex", "build_sharded_impact"]

#: A query as the shards take it: (qid, [(term, weight), ...]).
QueryPairs = list[tuple[str, list[tuple[str, float]]]]


def _build_shard(
    vectors: str, line_range: tuple[int, int, int], shard_dir: str, options: dict[str, Any], threads: int
) -> int:
    """Build one shard (a Ray task, or a plain call); returns its document count."""
    index = _native.ImpactIndex.build([vectors], shard_dir, threads=threads, range=line_range, **options)
    return index.num_docs


def build_sharded_impact(
    vectors: PathLike,
    index: PathLike,
    shards: int,
    *,
    quantize: int = DEFAULT_QUANTIZE,
    memory_budget_mb: int = 1024,
    threads: int = 0,
    quiet: bool = False,
    ray: cluster.RayAddress = None,
    max_retries: int = 3,
    _crash_once: PathLike | None = None,
) -> ShardedImpactIndex:
    """Index a plain (uncompressed) JSONL vectors file as ``shards`` shards into the sharded index
    ``index`` (written atomically: shards and manifest appear together) and open it. ``quantize``
    and ``memory_budget_mb`` are those of :meth:`clirkit.impact.ImpactIndex.build`; ids must be
    unique across the whole file.

    ``ray``: None or False builds the shards here, one after another on ``threads`` threads; an
    address (or True for Ray's default) builds them as Ray tasks, each on ``threads`` threads
    (0: one) and retried up to ``max_retries`` times if its worker dies. ``_crash_once`` (tests
    only) names a file whose first claimant ends its worker process mid-build."""
    options = {
        "quantize": checked_int("quantize", quantize, 1, 2**32 - 1),
        "memory_budget_mb": checked_int("memory_budget_mb", memory_budget_mb, 1, 2**40),
    }
    build_line_shards(
        "impact",
        vectors,
        index,
        shards,
        _build_shard,
        options,
        threads=threads,
        quiet=quiet,
        ray=ray,
        max_retries=max_retries,
        crash_once=_crash_once,
    )
    return ShardedImpactIndex.open(index, threads=threads)


class ImpactShard:
    """One shard of a sharded impact index, opened by path (so a restarted Ray actor reopens it),
    with its approximate structures built on first use, one per ``postings_per_term``.
    ``search`` options: ``k``, and ``approximate``: None (exact) or ``{"postings_per_term": N,
    "settings": (query_terms, candidates)}``."""

    def __init__(self, index: str, shard: int, threads: int) -> None:
        self._index = _native.ImpactIndex.open_shard(index, shard)
        self._threads = threads
        self._approximate: dict[int, _native.ApproximateImpactIndex] = {}

    def search(self, queries: QueryPairs, options: dict[str, Any]) -> bytes:
        k, approximate = options["k"], options.get("approximate")
        if approximate is None:
            return self._index.batch_search(queries, k, self._threads, True).shard_hits()
        per_term = int(approximate["postings_per_term"])
        if per_term not in self._approximate:
            self._approximate[per_term] = _native.ApproximateImpactIndex.build(
                self._index, postings_per_term=per_term, threads=self._threads
            )
        settings = tuple(approximate["settings"])
        return (
            self._approximate[per_term].batch_search(queries, k, settings, self._threads, True).shard_hits()
        )


def _checked_impact(manifest: ShardedManifest) -> ShardedManifest:
    if manifest.kind != "impact":
        raise InvalidInputError(f"{manifest.path}: a sharded {manifest.kind} index, not impact")
    return manifest


def _query_pairs(queries: Queries) -> QueryPairs:
    """Queries as the shards take them: a file read as the single index reads it, or pairs."""
    given = native_queries(queries)
    return _native.read_impact_queries(given) if isinstance(given, str) else given


class ShardedImpactIndex:
    """A sharded impact index opened for search: its shards in threads of this process sharing
    ``threads`` cores (0: all), or with ``ray=True`` one Ray actor per shard on the cluster this
    process is connected to (:func:`clirkit.distributed.cluster.connected`; an actor whose
    worker dies is restarted and its call retried, up to ``max_restarts`` times). Exact search
    gives the single index's run byte for byte; ``approximate`` searches (a
    :class:`clirkit.impact.ApproximateSettings`, each shard pruned to ``postings_per_term``) are
    opt-in and audited by :meth:`audit`. :meth:`close` (or ``with``) ends the actors.
    ``_crash_once`` (tests only) names a file whose first claimant ends its actor's worker
    mid-search."""

    def __init__(
        self,
        manifest: ShardedManifest,
        *,
        threads: int = 0,
        ray: bool = False,
        cpus_per_shard: float | None = None,
        max_restarts: int = 3,
        _crash_once: PathLike | None = None,
    ) -> None:
        self.manifest = _checked_impact(manifest)
        self.scatter = ShardScatter(
            manifest,
            ImpactShard,
            threads=threads,
            ray=ray,
            cpus_per_shard=cpus_per_shard,
            max_restarts=max_restarts,
            crash_once=_crash_once,
        )

    @staticmethod
    def open(index: PathLike, **options: Any) -> ShardedImpactIndex:
        """Open a sharded impact index (options as the constructor's); a missing shard, one of
        another build or a sharded index of another kind is refused, naming it."""
        return ShardedImpactIndex(read_manifest(index), **options)

    @property
    def num_docs(self) -> int:
        return self.manifest.num_docs

    @property
    def num_shards(self) -> int:
        return len(self.manifest.shards)

    @property
    def quantize(self) -> int:
        """The factor every shard quantized weights with."""
        return int(self.manifest.fields["quantize"])

    def close(self) -> None:
        self.scatter.close()

    def __enter__(self) -> ShardedImpactIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _parts(
        self,
        pairs: QueryPairs,
        k: int,
        approximate: Optional[tuple[int, ApproximateSettings]],
    ) -> list[bytes]:
        checked_int("k", k, 1, 2**63 - 1)
        mode = None
        if approximate is not None:
            per_term, settings = approximate
            mode = {
                "postings_per_term": checked_int("postings_per_term", per_term, 0, 2**63 - 1),
                "settings": [settings.query_terms, settings.candidates],
            }
        return self.scatter.parts(pairs, {"k": k, "approximate": mode})

    def batch_search(
        self,
        queries: Queries,
        k: int = 1000,
        *,
        approximate: ApproximateSettings | None = None,
        postings_per_term: int = DEFAULT_POSTINGS_PER_TERM,
    ) -> dict[str, list[tuple[str, float]]]:
        """The top ``k`` of each query (a queries file as :meth:`clirkit.impact.ImpactIndex.search_file`
        reads it, ``{qid: vector}`` or ``[(qid, vector)]``), ``{qid: [(docid, score), ...]}`` in query
        and canonical order: exact, or with ``approximate`` settings approximate (each shard pruned
        to ``postings_per_term`` postings per term)."""
        pairs = _query_pairs(queries)
        mode = None if approximate is None else (postings_per_term, approximate)
        merged = _native.merge_shard_hits(self._parts(pairs, k, mode), [q for q, _ in pairs], k)
        assert merged is not None  # no output file was given
        return merged

    def search_file_to_trec(
        self,
        queries_path: PathLike,
        output: PathLike,
        k: int = 1000,
        *,
        tag: str = RUN_TAG,
        approximate: ApproximateSettings | None = None,
        postings_per_term: int = DEFAULT_POSTINGS_PER_TERM,
    ) -> int:
        """Search a queries file and write the TREC run ``output`` (atomically): exact, the bytes
        :meth:`clirkit.impact.ImpactIndex.search_file_to_trec` writes on the single index; or
        approximate as :meth:`batch_search`. Returns the number of queries searched."""
        pairs = _native.read_impact_queries(os.fspath(queries_path))
        mode = None if approximate is None else (postings_per_term, approximate)
        parts = self._parts(pairs, k, mode)
        _native.merge_shard_hits(parts, [q for q, _ in pairs], k, os.fspath(output), tag)
        return len(pairs)

    def audit(
        self,
        queries: Queries,
        n: int,
        *,
        seed: int = 0,
        k: int = 10,
        settings: ApproximateSettings | None = None,
        postings_per_term: int = DEFAULT_POSTINGS_PER_TERM,
    ) -> AuditReport:
        """Re-run ``n`` of ``queries`` (drawn with ``seed`` as the single index's audit draws them)
        with the exact sharded search and compare each exact top 10 with the approximate sharded
        search's top 10 at depth ``k`` (what a run of depth ``k`` holds) under ``settings`` (default
        :class:`clirkit.impact.ApproximateSettings`'s)."""
        settings = settings or ApproximateSettings()
        pairs = _query_pairs(queries)
        n = checked_int("n", n, 1, 2**63 - 1)
        seed = checked_int("seed", seed, 0, 2**64 - 1)
        sampled = [pairs[i] for i in _native.audit_sample(len(pairs), n, seed)]
        depth = max(checked_int("k", k, 1, 2**63 - 1), 10)
        exact = self._parts(sampled, 10, None)
        approximate = self._parts(sampled, depth, (postings_per_term, settings))
        text = _native.audit_shard_hits(
            exact,
            approximate,
            [q for q, _ in sampled],
            len(pairs),
            seed,
            k,
            (settings.query_terms, settings.candidates),
        )
        return AuditReport.from_json(text)

    def __repr__(self) -> str:
        return (
            f"ShardedImpactIndex({self.manifest.path!r}, num_docs={self.num_docs}, shards={self.num_shards})"
        )
