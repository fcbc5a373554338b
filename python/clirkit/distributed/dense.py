"""Sharded dense indexes whose search equals, byte for byte, one index with the same codebook.

The rows are cut into shards in order (shard ``s`` holds the global rows ``offset[s]..``); a shard's
rows may come from several ``.npy`` files, or be a selection of a file's rows (a task's documents
spread over files, or a language's rows of one file), as :meth:`clirkit.dense.DenseIndex.build_file`
reads them (:func:`split_parts`). The codebook (and IVF centroids) is trained once, on the seeded
sample the single index trains on, into ``codebook/`` (an index of just those rows); every shard is
then encoded with it, in parallel (Ray tasks, or threads). Searching is two rounds through the shards
(Ray actors holding a shard each, opened by path, or threads): each shard returns its part of the
single index's PQ shortlist with the selection keys and PQ scores (``DenseIndex.shortlist``), the
coordinator merges them into the single index's shortlist
(:func:`clirkit._native.merge_dense_shortlists`); when the search re-scores, the owning shards score
exactly those rows with the stored vectors (``DenseIndex.rescore``); the final top ``k`` is ordered as
the single index orders it. A flat index is one round: each shard's exact top ``k``, merged.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from clirkit import _native
from clirkit._native import InvalidInputError
from clirkit._progress import ProgressBar, counting
from clirkit._threads import checked_threads, worker_count
from clirkit._types import PathLike, RunDict
from clirkit.dense.index import DenseIndex
from clirkit.dense.vectors import as_matrix, load_vectors, read_ids
from clirkit.distributed.cluster import (
    RayAddress,
    cluster_cpus,
    connected,
    crash_if_marked,
    require_ray,
    task_threads,
)
from clirkit.distributed.sharded import (
    CountedShard,
    ShardedManifest,
    read_manifest,
    searching_shards,
    shard_actors,
    shards_built,
)

__all__ = [
    "EmbeddingRows",
    "ShardedDenseIndex",
    "build_sharded_dense",
    "parts_from_encoding",
    "split_parts",
    "split_rows",
]


@dataclass(frozen=True, eq=False)
class EmbeddingRows:
    """Rows of the ``.npy`` matrix ``npy`` with their ids: ``start..end``, or, given ``rows`` (row
    numbers of the file, in the order they are indexed), ``rows[start:end]``. A shard indexes one of
    these, or several one after another."""

    npy: str
    start: int
    end: int
    ids: tuple[str, ...]
    rows: Optional[np.ndarray] = None

    def file_rows(self, positions: np.ndarray) -> np.ndarray:
        """The file's row numbers at ``positions`` (counted from this run's first row)."""
        at = self.start + positions
        return at if self.rows is None else self.rows[at]

    def selection(self) -> Optional[Sequence[int]]:
        """The file's rows, in order, as :meth:`clirkit.dense.DenseIndex.build_file` takes a file's
        ``rows``: None for every row of the file."""
        if self.rows is not None:
            return self.rows[self.start : self.end]
        if self.start == 0 and self.end == np.load(self.npy, mmap_mode="r").shape[0]:
            return None
        return range(self.start, self.end)

    def matrix(self) -> np.ndarray:
        """The rows as float32, read through a memory map (float16 converted)."""
        data = np.load(self.npy, mmap_mode="r")
        if self.rows is None:
            return as_matrix(data[self.start : self.end], self.npy)
        return as_matrix(data[self.rows[self.start : self.end]], self.npy)


#: What one shard indexes: rows of one file, or of several one after another.
Shard = Union[EmbeddingRows, Sequence[EmbeddingRows]]


def split_parts(
    parts: Sequence[tuple[PathLike, Sequence[str], Optional[Sequence[int]]]], shards: int
) -> list[tuple[EmbeddingRows, ...]]:
    """The rows of ``parts`` (``.npy`` file, the ids of its rows indexed, those rows in order or None
    for all), one part after another as :meth:`clirkit.dense.DenseIndex.build_file` indexes them, cut
    into ``shards`` runs of consecutive rows of about equal size: each shard's runs of one file."""
    spans = []  # (npy, ids, rows or None), the index's rows in order
    for npy, ids, rows in parts:
        npy = os.fspath(npy)
        ids = tuple(ids)
        if rows is None:
            count = np.load(npy, mmap_mode="r").shape[0]
            if count != len(ids):
                raise InvalidInputError(f"{npy} has {count} rows but {len(ids)} ids are given")
            spans.append((npy, ids, None))
        else:
            kept = np.asarray(rows, dtype=np.int64)
            if len(kept) != len(ids):
                raise InvalidInputError(f"{npy}: {len(kept)} rows kept but {len(ids)} ids are given")
            spans.append((npy, ids, kept))
    total = sum(len(ids) for _, ids, _ in spans)
    if shards < 1 or shards > max(total, 1):
        raise InvalidInputError(f"shards must be between 1 and the {total} rows, got {shards}")
    bounds = [total * s // shards for s in range(shards + 1)]
    out: list[tuple[EmbeddingRows, ...]] = []
    for a, b in zip(bounds, bounds[1:]):
        pieces = []
        first = 0  # the index row of the span's first row
        for npy, ids, kept in spans:
            lo, hi = max(a, first) - first, min(b, first + len(ids)) - first
            if lo < hi:
                if kept is None:
                    pieces.append(EmbeddingRows(npy, lo, hi, ids[lo:hi]))
                else:  # only this run's row numbers travel with it (to a Ray task)
                    pieces.append(EmbeddingRows(npy, 0, hi - lo, ids[lo:hi], kept[lo:hi]))
            first += len(ids)
        out.append(tuple(pieces))
    return out


def split_rows(npy: PathLike, ids: Sequence[str], shards: int) -> list[EmbeddingRows]:
    """``npy`` (one row per id) cut into ``shards`` runs of consecutive rows of about equal size."""
    return [shard for (shard,) in split_parts([(npy, ids, None)], shards)]


def _pieces(shard: Shard) -> tuple[EmbeddingRows, ...]:
    return (shard,) if isinstance(shard, EmbeddingRows) else tuple(shard)


def _training_sample(parts: Sequence[EmbeddingRows], train_size: int | None, seed: int) -> np.ndarray:
    """The rows (of all parts, in order) the single index would train its codebook on."""
    total = sum(p.end - p.start for p in parts)
    wanted = _native.dense_training_rows(total, train_size, seed)
    out = []
    first = 0
    for p in parts:
        size = p.end - p.start
        mine = wanted[(wanted >= first) & (wanted < first + size)] - first
        if len(mine):
            out.append(as_matrix(np.load(p.npy, mmap_mode="r")[p.file_rows(mine)], p.npy))
        first += size
    return np.concatenate(out)


def _add_shard(
    codebook_dir: str,
    pieces: tuple[EmbeddingRows, ...],
    shard_dir: str,
    threads: int,
    memory_mb: int,
    crash_once: str | None = None,
) -> int:
    """Encode one shard's rows with the codebook at ``codebook_dir`` into ``shard_dir`` (a Ray task,
    or a plain call), streamed from the files about ``memory_mb`` MB at a time; returns its row count."""
    crash_if_marked(crash_once)
    codebook = DenseIndex.open(codebook_dir)
    files, rows = [p.npy for p in pieces], [p.selection() for p in pieces]
    ids = [i for p in pieces for i in p.ids]
    grow = {"memory_mb": memory_mb, "threads": threads, "quiet": True}
    return codebook.add(files, ids, shard_dir, rows=rows, keep_rows=False, **grow).ntotal


def build_sharded_dense(
    parts: Sequence[Shard],
    index_dir: PathLike,
    *,
    pq: int | None = None,
    nbits: int = 4,
    ivf: int | None = None,
    metric: str = "ip",
    train_size: int | None = None,
    seed: int = 0,
    keep_vectors: bool = True,
    vector_dtype: str = "float32",
    memory_mb: int = 256,
    threads: int = 0,
    ray: RayAddress = None,
    max_retries: int = 3,
    quiet: bool = False,
    _crash_once: PathLike | None = None,
) -> ShardedDenseIndex:
    """Index ``parts`` as one shard each (an :class:`EmbeddingRows`, or several read one after
    another: :func:`split_parts`) into the sharded index ``index_dir`` (written atomically) and open
    it: the codebook (and IVF centroids) trained once on the rows the single index over all of them
    trains on, so that the sharded index searches as that index does; the shards encoded with it in
    parallel, each streamed from the files as :meth:`clirkit.dense.DenseIndex.build_file` reads
    them (``memory_mb`` for the chunks of the shards encoded at once here; of each Ray task). Options
    are those of :meth:`clirkit.dense.DenseIndex.build` (the shards keep their vectors as
    ``vector_dtype`` says).

    ``ray``: None or False adds the shards here, in threads; an address (or True for Ray's default)
    adds them as Ray tasks, each retried up to ``max_retries`` times if its worker dies. A progress
    bar over the shards added is drawn on stderr when it is a terminal, unless ``quiet``.
    ``_crash_once`` (tests only) names a file whose first claimant ends its worker mid-build."""
    if not parts:
        raise InvalidInputError("a sharded index needs at least one shard")
    threads = checked_threads(threads)
    shards = [_pieces(p) for p in parts]
    if not all(shards):
        raise InvalidInputError("every shard needs at least one run of rows")
    build = _native.ShardedDenseBuild(os.path.abspath(index_dir), len(shards))
    try:
        codebook_dir = os.fspath(build.codebook_dir())
        sample = _training_sample([p for pieces in shards for p in pieces], train_size, seed)
        kind = {"pq": pq, "nbits": nbits, "ivf": ivf, "metric": metric, "keep_vectors": keep_vectors}
        kind["vector_dtype"] = vector_dtype  # the shards, written with the codebook's index, keep it
        sample_ids = [f"train-{i}" for i in range(len(sample))]
        # Trained on all of the sample with the same seed: the single index's codebook.
        codebook = DenseIndex.build(
            sample, sample_ids, train_size=len(sample), seed=seed, threads=threads, quiet=True, **kind
        )
        codebook.save(codebook_dir)
        jobs = [(codebook_dir, p, os.fspath(build.shard_dir(i))) for i, p in enumerate(shards)]
        crash = None if _crash_once is None else os.fspath(_crash_once)
        if ray:
            with connected(ray) as ray_module:
                cpus = min(float(threads or 1), cluster_cpus(ray_module))
                task = ray_module.remote(num_cpus=cpus, max_retries=max_retries)(_add_shard)
                refs = [task.remote(*job, task_threads(cpus), memory_mb, crash) for job in jobs]
                shards_built(ray_module, refs, quiet)
        else:
            workers = min(len(jobs), worker_count(threads))
            each = max(1, worker_count(threads) // len(jobs))
            bar = ProgressBar(len(jobs), "indexing", "shards built", enabled=not quiet)
            with counting(bar), ThreadPoolExecutor(max_workers=workers) as pool:
                bar.update(0)
                added = [pool.submit(_add_shard, *job, each, memory_mb // workers, crash) for job in jobs]
                for future in as_completed(added):
                    future.result()
                    bar.advance()
        build.finish()
    except BaseException:
        build.abort()
        raise
    return ShardedDenseIndex.open(index_dir)


class DenseShard(CountedShard):
    """One shard of a sharded dense index, opened by path (so a restarted Ray actor reopens it) and
    refused when missing or of another build; answers the rounds of a search, counting the queries
    its round 1 (the scan) finishes: in the counter given (a thread of this process) or, held by a
    Ray actor and ``counted``, in its own (:class:`~clirkit.distributed.sharded.CountedShard`)."""

    def __init__(self, index_dir: str, shard: int, threads: int) -> None:
        self._index = DenseIndex(_native.DenseIndex.open_shard(index_dir, shard))
        self._threads = threads

    def shortlist(
        self,
        queries: np.ndarray,
        k: int,
        nprobe: int,
        refine: int,
        crash_once: str | None = None,
        counted: Any = None,
    ) -> tuple[Any, ...]:
        crash_if_marked(crash_once)
        # A bool from the coordinator of Ray actors; the native counter (or None) in a thread here.
        progress = self.count_with(counted) if isinstance(counted, bool) else counted
        return self._index.native.shortlist(queries, k, nprobe, refine, self._threads, progress)

    def rescore(self, queries: np.ndarray, offsets: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return self._index.native.rescore(queries, offsets, rows, self._threads)

    def ids_of(self, rows: np.ndarray) -> list[str]:
        return self._index.native.ids_of(rows)


class ShardedDenseIndex:
    """A sharded dense index opened for search: its shards in threads of this process, or with
    ``ray=True`` one Ray actor per shard on the cluster this process is connected to
    (:func:`clirkit.distributed.cluster.connected`); an actor whose worker dies is restarted (it
    reopens its shard by path) and its call retried, up to ``max_restarts`` times. A search draws
    one progress bar over every query on every shard on stderr when it is a terminal, unless
    ``quiet``. :meth:`close` (or ``with``) ends the actors."""

    def __init__(
        self,
        manifest: ShardedManifest,
        *,
        threads: int = 0,
        ray: bool = False,
        max_restarts: int = 3,
        quiet: bool = False,
    ) -> None:
        if manifest.kind != "dense":
            raise InvalidInputError(f"{manifest.path}: a sharded {manifest.kind} index, not dense")
        self.manifest = manifest
        self.quiet = quiet
        self.offsets = [int(x) for x in np.cumsum([0] + [r.num_docs for r in manifest.shards])[:-1]]
        path = os.path.abspath(manifest.path)
        count = len(manifest.shards)
        self._ray = require_ray() if ray else None
        if self._ray is not None:
            actor, threads_each = shard_actors(self._ray, DenseShard, count, None, max_restarts)
            self._shards: list[Any] = [actor.remote(path, s, threads_each) for s in range(count)]
        else:
            each = max(1, worker_count(checked_threads(threads)) // count)
            self._shards = [DenseShard(path, s, each) for s in range(count)]
            self._pool = ThreadPoolExecutor(max_workers=count)

    @staticmethod
    def open(index: PathLike, **options: Any) -> ShardedDenseIndex:
        """Open a sharded dense index (options as the constructor's); a missing shard or one of
        another build is refused."""
        return ShardedDenseIndex(read_manifest(index), **options)

    def close(self) -> None:
        """End the shard actors (or the threads)."""
        if self._ray is not None:
            for a in self._shards:
                self._ray.kill(a, no_restart=True)
        else:
            self._pool.shutdown()
        self._shards = []

    def __enter__(self) -> ShardedDenseIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def kind(self) -> str:
        return str(self.manifest.fields["kind"])

    @property
    def ntotal(self) -> int:
        return self.manifest.num_docs

    def _call(self, method: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        """``method`` of every shard with its own arguments, in parallel; results in shard order."""
        if self._ray is not None:
            return self._ray.get([getattr(s, method).remote(*a) for s, a in zip(self._shards, args)])
        calls: list[Callable[[], Any]] = [
            (lambda s=s, a=a: getattr(s, method)(*a)) for s, a in zip(self._shards, args)
        ]
        return list(self._pool.map(lambda f: f(), calls))

    def search_hits(
        self,
        queries: np.ndarray,
        k: int = 1000,
        *,
        nprobe: int = 1,
        refine: int | None = None,
        _crash_once: PathLike | None = None,
    ) -> list[list[tuple[str, float]]]:
        """Per query, the single index's hits: (doc id, score) best first (its tie rule). ``refine``
        as :meth:`clirkit.dense.DenseIndex.search` takes it. A progress bar over every query's scan
        on every shard is drawn on stderr when it is a terminal, unless the index was opened
        ``quiet``. ``_crash_once`` (tests only) names a file whose first claimant ends its shard's
        worker mid-search."""
        q = as_matrix(queries, "queries")
        if refine is None:
            refine = k if self.kind != "flat" and self.manifest.fields["has_vectors"] else 0
        nshards = len(self._shards)
        crash = None if _crash_once is None else os.fspath(_crash_once)
        # Once into the object store, read there by every actor.
        shared_q = q if self._ray is None else self._ray.put(q)
        with searching_shards(len(q), self._shards, self._ray, self.quiet) as counted:
            round1 = self._call("shortlist", [(shared_q, k, nprobe, refine, crash, counted)] * nshards)
        length, rescores = round1[0][0], round1[0][1]
        offsets, shards, rows, scores = _native.merge_dense_shortlists(
            [r[2] for r in round1], self.offsets, length
        )
        query_of = np.repeat(np.arange(len(q)), np.diff(offsets))
        if rescores:
            scores = scores.copy()
            masks = [shards == s for s in range(nshards)]
            exact = self._call("rescore", [(q, _offsets_of(query_of[m], len(q)), rows[m]) for m in masks])
            for m, e in zip(masks, exact):
                scores[m] = e
        offsets, shards, rows, scores = _native.dense_top_hits(
            (offsets, shards, rows, scores), self.offsets, k
        )
        masks = [shards == s for s in range(nshards)]
        names = self._call("ids_of", [(rows[m],) for m in masks])
        doc_ids = np.empty(len(rows), dtype=object)
        for m, n in zip(masks, names):
            doc_ids[m] = n
        return [
            list(zip(doc_ids[a:b].tolist(), scores[a:b].tolist())) for a, b in zip(offsets[:-1], offsets[1:])
        ]

    def search_run(self, queries: np.ndarray, qids: Sequence[str], k: int = 1000, **kw: Any) -> RunDict:
        """``{qid: {docid: score}}`` as :meth:`clirkit.dense.DenseIndex.search_run` gives it."""
        return {
            q: dict(h) for q, h in zip(_checked_qids(qids, len(queries)), self.search_hits(queries, k, **kw))
        }

    def search_trec(
        self,
        queries: np.ndarray,
        qids: Sequence[str],
        path: PathLike,
        k: int = 1000,
        tag: str = "clirkit-dense",
        **kw: Any,
    ) -> None:
        """Write the run file the single index's ``search_trec`` writes (queries in the given order)."""
        qids = _checked_qids(qids, len(as_matrix(queries, "queries")))
        hits = self.search_hits(queries, k, **kw)
        _native.write_run_pairs(Path(path), list(zip(qids, hits)), tag)


def _offsets_of(query_of: np.ndarray, nq: int) -> np.ndarray:
    """Offsets (nq + 1) of values grouped by query, from each value's query (non-decreasing)."""
    counts = np.bincount(query_of, minlength=nq)
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def _checked_qids(qids: Sequence[str], nq: int) -> list[str]:
    qids = list(qids)
    if len(qids) != nq:
        raise InvalidInputError(f"{len(qids)} query ids for {nq} queries: give exactly one id per query")
    if len(set(qids)) != len(qids):
        raise InvalidInputError("duplicate query ids: give each query its own id")
    return qids


def parts_from_files(embeddings: PathLike, ids: PathLike, shards: int) -> list[EmbeddingRows]:
    """``embeddings`` (.npy) with the ids file ``ids``, cut into ``shards`` row runs."""
    return split_rows(embeddings, read_ids(ids), shards)


def parts_from_encoding(encoding_dir: PathLike, shards: int | None = None) -> list[EmbeddingRows]:
    """The embedding shards of ``encoding_dir`` (:func:`clirkit.distributed.encode.encode_shards`
    output), one index shard each, in order; every one must be done."""
    from clirkit.distributed.encode import encoded_shard_files

    files = encoded_shard_files(encoding_dir)
    if shards is not None and shards != len(files):
        raise InvalidInputError(
            f"{encoding_dir} holds {len(files)} embedding shards, one index shard each; --shards {shards} "
            "does not match (leave it out)"
        )
    parts = []
    for npy, ids_path in files:
        _, ids = load_vectors(npy, ids_path, mapped=True)
        parts.append(EmbeddingRows(os.fspath(npy), 0, len(ids), tuple(ids)))
    return parts
