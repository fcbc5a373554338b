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
from dataclasses import dataclass, field
from typing import Any

from clirkit import _native
from clirkit._checks import checked_int
from clirkit._native import InvalidInputError
from clirkit._types import PathLike
from clirkit.distributed import sharded
from clirkit.distributed.sharded import ShardedManifest
from clirkit.impact import (
    DEFAULT_POSTINGS_PER_TERM,
    DEFAULT_QUANTIZE,
    RUN_TAG,
    ApproximateSettings,
    AuditReport,
    Queries,
    native_queries,
)

__all__ = ["ImpactShard", "Pruning", "ShardedImpactIndex", "build_sharded_impact"]

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
    **placement: Any,
) -> ShardedImpactIndex:
    """Index a plain (uncompressed) JSONL vectors file as ``shards`` shards into the sharded index
    ``index`` (written atomically: shards and manifest appear together) and open it (in this
    process, on ``threads``). ``quantize`` and ``memory_budget_mb`` are those of
    :meth:`clirkit.impact.ImpactIndex.build`; ids must be unique across the whole file.
    ``placement``: the fields of :class:`~clirkit.distributed.sharded.ShardPlacement` (``threads``,
    ``quiet``, ``ray``: None builds the shards here, an address or True as Ray tasks,
    ``max_retries``, ``crash_once``)."""
    options = {
        "quantize": checked_int("quantize", quantize, 1, 2**32 - 1),
        "memory_budget_mb": checked_int("memory_budget_mb", memory_budget_mb, 1, 2**40),
    }
    where = sharded.ShardPlacement(**placement)
    sharded.build_line_shards("impact", vectors, index, shards, _build_shard, options, where)
    return ShardedImpactIndex.open(index, threads=where.threads)


@dataclass(frozen=True)
class Pruning:
    """An approximate sharded search: every shard's approximate structure keeps its
    ``postings_per_term`` postings of highest impact per term (as
    :meth:`clirkit.impact.ImpactIndex.approximate`), and every shard is searched with ``settings``."""

    settings: ApproximateSettings = field(default_factory=ApproximateSettings)
    postings_per_term: int = DEFAULT_POSTINGS_PER_TERM


class ImpactShard:
    """One shard of a sharded impact index, opened by path (so a restarted Ray actor reopens it),
    with its approximate structures built on first use, one per ``postings_per_term``.
    ``search`` options: ``k``, and ``approximate``: None (exact) or ``{"postings_per_term": N,
    "settings": (query_terms, candidates)}``."""

    def __init__(self, index: str, shard: int, threads: int) -> None:
        self._index = _native.ImpactIndex.open_shard(index, shard)
        self._threads = threads
        self._approximate: dict[int, _native.ApproximateImpactIndex] = {}

    def search(self, queries: QueryPairs, options: dict[str, Any], progress: Any = None) -> bytes:
        k, approximate = options["k"], options.get("approximate")
        if approximate is None:
            return self._index.batch_search(queries, k, self._threads, progress).shard_hits()
        per_term = int(approximate["postings_per_term"])
        if per_term not in self._approximate:
            self._approximate[per_term] = _native.ApproximateImpactIndex.build(
                self._index, postings_per_term=per_term, threads=self._threads
            )
        settings = tuple(approximate["settings"])
        found = self._approximate[per_term].batch_search(queries, k, settings, self._threads, progress)
        return found.shard_hits()


def _checked_impact(manifest: ShardedManifest) -> ShardedManifest:
    if manifest.kind != "impact":
        raise InvalidInputError(f"{manifest.path}: a sharded {manifest.kind} index, not impact")
    return manifest


def _query_pairs(queries: Queries) -> QueryPairs:
    """Queries as the shards take them: a file read as the single index reads it, or pairs."""
    given = native_queries(queries)
    return _native.read_impact_queries(given) if isinstance(given, str) else given


class ShardedImpactIndex(sharded.ShardedSearch):
    """A sharded impact index opened for search: its shards in threads of this process sharing
    ``threads`` cores (0: all), or with ``ray=True`` one Ray actor per shard on the cluster this
    process is connected to (:func:`clirkit.distributed.cluster.connected`; an actor whose
    worker dies is restarted and its call retried, up to ``max_retries`` times). Exact search
    gives the single index's run byte for byte; ``approximate`` searches (a
    :class:`clirkit.impact.ApproximateSettings`, each shard pruned to ``postings_per_term``) are
    opt-in and audited by :meth:`audit`. A search draws one progress bar over every query on every
    shard on stderr when it is a terminal, unless ``quiet``. :meth:`close` (or ``with``) ends the
    actors."""

    def __init__(self, manifest: ShardedManifest, **placement: Any) -> None:
        """``placement``: the fields of :class:`~clirkit.distributed.sharded.ShardPlacement`
        (``threads``, ``quiet``, ``ray``, ``cpus_per_shard``, ``max_retries``, ``crash_once``)."""
        self.manifest = _checked_impact(manifest)
        self.scatter = sharded.ShardScatter(manifest, ImpactShard, sharded.ShardPlacement(**placement))

    @staticmethod
    def open(index: PathLike, **options: Any) -> ShardedImpactIndex:
        """Open a sharded impact index (options as the constructor's); a missing shard, one of
        another build or a sharded index of another kind is refused, naming it."""
        return ShardedImpactIndex(sharded.read_manifest(index), **options)

    @property
    def quantize(self) -> int:
        """The factor every shard quantized weights with."""
        return int(self.manifest.fields["quantize"])

    def _parts(
        self, pairs: QueryPairs, k: int, pruning: Pruning | None, quiet: bool | None = None
    ) -> list[bytes]:
        checked_int("k", k, 1, 2**63 - 1)
        mode = None
        if pruning is not None:
            settings = pruning.settings
            mode = {
                "postings_per_term": checked_int(
                    "postings_per_term", pruning.postings_per_term, 0, 2**63 - 1
                ),
                "settings": [settings.query_terms, settings.candidates],
            }
        return self.scatter.parts(pairs, {"k": k, "approximate": mode}, quiet)

    def batch_search(
        self, queries: Queries, k: int = 1000, *, pruning: Pruning | None = None
    ) -> dict[str, list[tuple[str, float]]]:
        """The top ``k`` of each query (a queries file as :meth:`clirkit.impact.ImpactIndex.search_file`
        reads it, ``{qid: vector}`` or ``[(qid, vector)]``), ``{qid: [(docid, score), ...]}`` in query
        and canonical order: exact, or approximate with a ``pruning`` (:class:`Pruning`)."""
        pairs = _query_pairs(queries)
        merged = _native.merge_shard_hits(self._parts(pairs, k, pruning), [q for q, _ in pairs], k)
        assert merged is not None  # no output file was given
        return merged

    def search_file_to_trec(
        self, queries: PathLike, out: PathLike, k: int, *, tag: str = RUN_TAG, pruning: Pruning | None = None
    ) -> int:
        """Search a queries file and write the TREC run ``out`` (atomically): exact, the bytes
        :meth:`clirkit.impact.ImpactIndex.search_file_to_trec` writes on the single index; or
        approximate as :meth:`batch_search`. Returns the number of queries searched."""
        pairs = _native.read_impact_queries(os.fspath(queries))
        parts = self._parts(pairs, k, pruning)
        _native.merge_shard_hits(parts, [q for q, _ in pairs], k, os.fspath(out), tag)
        return len(pairs)

    def audit(
        self, queries: Queries, n: int, *, seed: int = 0, k: int = 10, pruning: Pruning | None = None
    ) -> AuditReport:
        """Re-run ``n`` of ``queries`` (drawn with ``seed`` as the single index's audit draws them)
        with the exact sharded search and compare each exact top 10 with the approximate sharded
        search's top 10 at depth ``k`` (what a run of depth ``k`` holds) under ``pruning`` (default
        :class:`Pruning`'s)."""
        pruning = pruning or Pruning()
        settings = pruning.settings
        pairs = _query_pairs(queries)
        n = checked_int("n", n, 1, 2**63 - 1)
        seed = checked_int("seed", seed, 0, 2**64 - 1)
        sampled = [pairs[i] for i in _native.audit_sample(len(pairs), n, seed)]
        depth = max(checked_int("k", k, 1, 2**63 - 1), 10)
        exact = self._parts(sampled, 10, None, quiet=True)
        approximate = self._parts(sampled, depth, pruning, quiet=True)
        qids = [q for q, _ in sampled]
        text = _native.audit_shard_hits(
            (exact, approximate), qids, (len(pairs), seed, k), (settings.query_terms, settings.candidates)
        )
        return AuditReport.from_json(text)

    def __repr__(self) -> str:
        return (
            f"ShardedImpactIndex({self.manifest.path!r}, num_docs={self.num_docs}, shards={self.num_shards})"
        )
