"""Sharded BM25: the corpus cut into document-partitioned shards (ranges of whole lines, in
corpus order) built in parallel, one pass merging the shards' statistics into the whole
collection's, and search by scatter-gather: every shard scores with the global statistics and
returns its exact top k, and the top k's merged in canonical order are the single index's run,
byte for byte.

Without Ray the shards are built one after another and searched in threads of this process; with
Ray (:mod:`clirkit.distributed.cluster`) each shard is built by a task (retried if its worker
dies) and searched by an actor that opens its shard by path (restarted, and its call retried, if
its worker dies)."""

from __future__ import annotations

import os
from typing import Any, Optional

from clirkit import _native
from clirkit._native import InvalidInputError
from clirkit._types import PathLike
from clirkit.bm25 import DEFAULT_B, DEFAULT_K1, Queries, query_triples
from clirkit.distributed import cluster
from clirkit.distributed.sharded import (
    ShardedManifest,
    ShardedSearch,
    ShardPlacement,
    ShardScatter,
    build_line_shards,
    read_manifest,
)

#: A query as the shards take it: (qid, text, lang or None).
QueryTriple = tuple[str, str, Optional[str]]


def _build_shard(
    corpus: str, line_range: tuple[int, int, int], shard_dir: str, options: dict[str, Any], threads: int
) -> int:
    """Build one shard (a Ray task, or a plain call); returns its document count."""
    index = _native.Bm25Index.build(corpus, shard_dir, threads=threads, range=line_range, **options)
    return index.num_docs


def build_sharded_bm25(
    corpus: PathLike,
    index: PathLike,
    shards: int,
    *,
    threads: int = 0,
    quiet: bool = False,
    ray: cluster.RayAddress = None,
    max_retries: int = 3,
    _crash_once: PathLike | None = None,
    **options: Any,
) -> ShardedBM25Index:
    """Index a plain JSONL corpus as ``shards`` shards into the sharded index ``index`` (written
    atomically: shards and statistics appear together) and open it. ``options`` are those of
    :meth:`clirkit.bm25.BM25Index.build` (``lang``, ``lang_field``, ``fields``,
    ``keep_first_duplicate``, ``memory_budget_mb``; not ``store_docvectors``); ids must be unique
    across the whole corpus.

    ``ray``: None or False builds the shards here, one after another on ``threads`` threads; an
    address (or True for Ray's default) builds them as Ray tasks, each on ``threads`` threads
    (0: one) and retried up to ``max_retries`` times if its worker dies. ``_crash_once`` (tests
    only) names a file whose first claimant ends its worker process mid-build."""
    if options.get("keep_first_duplicate"):
        # Each shard sees only its part: a duplicate across shards could not be dropped in corpus order.
        raise InvalidInputError(
            "keep_first_duplicate cannot go with shards: a duplicate id in two shards cannot be dropped in "
            "corpus order; remove the duplicates first, or build one index"
        )
    if options.pop("store_docvectors", False):
        raise InvalidInputError(
            "a sharded index cannot store document vectors (RM3 needs the whole collection)"
        )
    if "fields" in options:
        options["fields"] = list(options["fields"])
    placement = ShardPlacement(threads, quiet, ray, max_retries=max_retries, crash_once=_crash_once)
    build_line_shards("bm25", corpus, index, shards, _build_shard, options, placement)
    return ShardedBM25Index.open(index)


def _search_options(k: int, lang: str | None, k1: float, b: float) -> dict[str, Any]:
    if k < 1:
        raise InvalidInputError(f"k must be at least 1, got {k}")
    return {"k": k, "lang": lang, "k1": k1, "b": b}


def _checked_bm25(manifest: ShardedManifest) -> ShardedManifest:
    if manifest.kind != "bm25":
        raise InvalidInputError(f"{manifest.path}: a sharded {manifest.kind} index, not BM25")
    return manifest


class Bm25Shard:
    """One shard of a sharded BM25 index opened to score with the whole collection's statistics
    (:class:`~clirkit.distributed.sharded.ShardScatter` opens one per shard, here or in a Ray
    actor)."""

    def __init__(self, index: str, shard: int, threads: int) -> None:
        self._shard = _native.Bm25Index.open_shard(index, shard)
        self._threads = threads

    def search(self, queries: list[QueryTriple], options: dict[str, Any], progress: Any = None) -> bytes:
        found = self._shard.batch_search(queries, threads=self._threads, progress=progress, **options)
        return found.shard_hits()


class _ShardedSearch(ShardedSearch):
    """What every way of searching a sharded BM25 index shares: each shard's exact top k of the
    queries (from its :class:`~clirkit.distributed.sharded.ShardScatter`), merged into the single
    index's run."""

    def _parts(self, triples: list[QueryTriple], options: dict[str, Any]) -> list[bytes]:
        return self.scatter.parts(triples, options)

    def batch_search(
        self,
        queries: Queries,
        k: int = 1000,
        *,
        lang: str | None = None,
        k1: float = DEFAULT_K1,
        b: float = DEFAULT_B,
    ) -> dict[str, list[tuple[str, float]]]:
        """The top ``k`` of each query (queries as :meth:`clirkit.bm25.BM25Index.batch_search`
        takes them), ``{qid: [(docid, score), ...]}`` in query and canonical order."""
        triples = query_triples(queries)
        parts = self._parts(triples, _search_options(k, lang, k1, b))
        merged = _native.merge_shard_hits(parts, [q for q, _, _ in triples], k)
        assert merged is not None  # no output file was given
        return merged

    def search_file_to_trec(
        self,
        queries_path: PathLike,
        output: PathLike,
        k: int = 1000,
        *,
        tag: str = "clirkit",
        lang: str | None = None,
        k1: float = DEFAULT_K1,
        b: float = DEFAULT_B,
    ) -> None:
        """Search a queries file and write the TREC run ``output`` (atomically): the bytes
        :meth:`clirkit.bm25.BM25Index.search_file_to_trec` writes on the single index."""
        triples = _native.read_bm25_queries(os.fspath(queries_path))
        parts = self._parts(triples, _search_options(k, lang, k1, b))
        _native.merge_shard_hits(parts, [q for q, _, _ in triples], k, os.fspath(output), tag)


class ShardedBM25Index(_ShardedSearch):
    """A sharded BM25 index searched in this process: each shard opened (memory-mapped) to score
    with the whole collection's statistics, shards searched in threads sharing ``threads`` cores
    (0: all), hits merged into the run of the single index over all documents. A search draws one
    progress bar over every query on every shard on stderr when it is a terminal, unless ``quiet``."""

    def __init__(self, manifest: ShardedManifest, *, threads: int = 0, quiet: bool = False) -> None:
        self.manifest = _checked_bm25(manifest)
        self.scatter = ShardScatter(manifest, Bm25Shard, ShardPlacement(threads=threads, quiet=quiet))

    @staticmethod
    def open(index: PathLike, *, threads: int = 0, quiet: bool = False) -> ShardedBM25Index:
        """Open a sharded BM25 index; a missing shard or one of another build is refused."""
        return ShardedBM25Index(read_manifest(index), threads=threads, quiet=quiet)

    def __repr__(self) -> str:
        return f"ShardedBM25Index({self.manifest.path!r}, num_docs={self.num_docs}, shards={self.num_shards})"


class RayShardedBM25(_ShardedSearch):
    """Scatter-gather search of a sharded BM25 index on the connected Ray cluster: one actor per
    shard holds its shard memory-mapped; a batch of queries goes to every actor once (through the
    object store), each returns its exact top k, and the hits are merged here. An actor whose
    worker dies is restarted and its call retried (up to ``max_restarts`` times), so the run is
    unchanged. Use within :func:`clirkit.distributed.cluster.connected`; :meth:`close` (or
    ``with``) ends the actors. A search draws one progress bar over every query on every shard (the
    actors' counts) unless ``quiet``. ``_crash_once`` (tests only) names a file whose first
    claimant ends its actor's worker process mid-search."""

    def __init__(
        self,
        index: PathLike,
        *,
        cpus_per_shard: float | None = None,
        max_restarts: int = 3,
        quiet: bool = False,
        _crash_once: PathLike | None = None,
    ) -> None:
        self.manifest = _checked_bm25(read_manifest(index))
        placement = ShardPlacement(
            ray=True,
            cpus_per_shard=cpus_per_shard,
            max_retries=max_restarts,
            quiet=quiet,
            crash_once=_crash_once,
        )
        self.scatter = ShardScatter(self.manifest, Bm25Shard, placement)

    @property
    def actors(self) -> list[Any]:
        """The shard actors, in shard order."""
        return self.scatter.actors
