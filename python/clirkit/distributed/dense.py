"""Sharded dense indexes whose search equals, byte for byte, one index with the same codebook.

The rows are cut into shards in order (shard ``s`` holds the global rows ``offset[s]..``). The
codebook (and IVF centroids) is trained once, on the seeded sample the single index trains on,
into ``codebook/`` (an index of just those rows); every shard is then encoded with it, in
parallel (Ray tasks, or threads). Searching is two rounds through the shards (Ray actors holding
a shard each, opened by path, or threads): each shard returns its part of the single index's PQ
shortlist with the selection keys and PQ scores (``DenseIndex.shortlist``), the coordinator
merges them into the single index's shortlist (:func:`clirkit._native.merge_dense_shortlists`);
when the search re-scores, the owning shards score exactly those rows with the stored vectors
(``DenseIndex.rescore``); the final top ``k`` is ordered as the single index orders it. A flat
index is one round: each shard's exact top ``k``, merged.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clirkit import _native
from clirkit._native import IndexFormatError, InvalidInputError
from clirkit._threads import checked_threads
from clirkit._types import PathLike, RunDict
from clirkit.dense.index import DenseIndex
from clirkit.dense.vectors import as_matrix, read_ids

__all__ = ["EmbeddingRows", "ShardedDenseIndex", "build_sharded_dense", "is_sharded_dense"]

FORMAT = "clirkit-sharded-dense"
VERSION = 1
MANIFEST = "meta.json"
CODEBOOK_DIR = "codebook"


def shard_name(i: int) -> str:
    return f"shard-{i:04d}"


@dataclass(frozen=True)
class EmbeddingRows:
    """Rows ``start..end`` of the ``.npy`` matrix ``npy`` with their ids: what one shard indexes."""

    npy: str
    start: int
    end: int
    ids: tuple[str, ...]

    def matrix(self) -> np.ndarray:
        """The rows as float32, read through a memory map (float16 converted)."""
        return as_matrix(np.load(self.npy, mmap_mode="r")[self.start : self.end], f"{self.npy}")


def split_rows(npy: PathLike, ids: Sequence[str], shards: int) -> list[EmbeddingRows]:
    """``npy`` (one row per id) cut into ``shards`` runs of consecutive rows of about equal size."""
    rows = np.load(os.fspath(npy), mmap_mode="r").shape[0]
    if rows != len(ids):
        raise InvalidInputError(f"{npy} has {rows} rows but {len(ids)} ids are given")
    if shards < 1 or shards > max(rows, 1):
        raise InvalidInputError(f"shards must be between 1 and the {rows} rows, got {shards}")
    bounds = [rows * s // shards for s in range(shards + 1)]
    return [EmbeddingRows(os.fspath(npy), a, b, tuple(ids[a:b])) for a, b in zip(bounds, bounds[1:])]


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
            out.append(as_matrix(np.load(p.npy, mmap_mode="r")[p.start + mine], p.npy))
        first += size
    return np.concatenate(out)


def _add_shard(codebook_dir: str, part: EmbeddingRows, shard_dir: str, threads: int) -> dict[str, Any]:
    """Encode one shard's rows with the codebook at ``codebook_dir`` into ``shard_dir``; its record."""
    codebook = DenseIndex.open(codebook_dir)
    shard = codebook.add(part.matrix(), part.ids, shard_dir, keep_rows=False, threads=threads, quiet=True)
    return {"dir": Path(shard_dir).name, "build": _build_stamp(shard_dir), "rows": shard.ntotal}


def _build_stamp(index_dir: PathLike) -> str:
    """An index's build stamp: its manifest's checksum (which covers every file's digest)."""
    try:
        meta = json.loads((Path(index_dir) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise IndexFormatError(f"{index_dir}: missing or unreadable {MANIFEST} ({err})") from None
    return str(meta.get("checksum", ""))


def build_sharded_dense(
    parts: Sequence[EmbeddingRows],
    index_dir: PathLike,
    *,
    pq: int | None = None,
    nbits: int = 4,
    ivf: int | None = None,
    metric: str = "ip",
    train_size: int | None = None,
    seed: int = 0,
    keep_vectors: bool = True,
    threads: int = 0,
    use_ray: bool = False,
) -> ShardedDenseIndex:
    """Index ``parts`` as one shard each into the sharded index ``index_dir``: the codebook trained
    once on the single index's seeded sample, the shards encoded with it in parallel (as Ray tasks
    on the cluster this process is connected to with ``use_ray``, else in threads)."""
    if not parts:
        raise InvalidInputError("a sharded index needs at least one shard")
    threads = checked_threads(threads)
    out = Path(index_dir)
    work = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        sample = _training_sample(parts, train_size, seed)
        DenseIndex.build(
            sample,
            [f"train-{i}" for i in range(len(sample))],
            pq=pq,
            nbits=nbits,
            ivf=ivf,
            metric=metric,
            train_size=len(sample),
            seed=seed,
            threads=threads,
            keep_vectors=keep_vectors,
            quiet=True,
        ).save(work / CODEBOOK_DIR)
        jobs = [
            (os.fspath(work / CODEBOOK_DIR), p, os.fspath(work / shard_name(i))) for i, p in enumerate(parts)
        ]
        if use_ray:
            records = _ray_map(_add_shard, [(*job, max(threads, 1)) for job in jobs])
        else:
            per_shard = threads if threads else 0
            with ThreadPoolExecutor(max_workers=min(len(jobs), os.cpu_count() or 1)) as pool:
                records = list(pool.map(lambda job: _add_shard(*job, per_shard), jobs))
        _check_unique_ids(parts)
        codebook = DenseIndex.open(work / CODEBOOK_DIR)
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "kind": codebook.kind,
            "dim": codebook.dim,
            "metric": codebook.metric,
            "has_vectors": codebook.has_vectors,
            "rows": sum(r["rows"] for r in records),
            "codebook": {"dir": CODEBOOK_DIR, "build": _build_stamp(work / CODEBOOK_DIR)},
            "shards": records,
        }
        (work / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        _replace_dir(work, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return ShardedDenseIndex(out, threads=threads)


def _check_unique_ids(parts: Sequence[EmbeddingRows]) -> None:
    seen: dict[str, int] = {}
    for s, p in enumerate(parts):
        for i in p.ids:
            if seen.setdefault(i, s) != s:
                raise InvalidInputError(f"duplicate id '{i}' in shards {seen[i]} and {s}")


def _replace_dir(work: Path, out: Path) -> None:
    """Move the finished ``work`` onto ``out``, which may be missing, empty, or a clirkit index."""
    if out.exists():
        if any(out.iterdir()) and not (out / MANIFEST).is_file():
            raise InvalidInputError(f"{out} exists and is not a clirkit index: not replacing it")
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        os.replace(out, old)
        os.replace(work, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(work, out)


def is_sharded_dense(index_dir: PathLike) -> bool:
    """Whether ``index_dir`` holds a sharded dense index."""
    try:
        meta = json.loads((Path(index_dir) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("format") == FORMAT


def read_manifest(index_dir: PathLike) -> dict[str, Any]:
    """The manifest of a sharded dense index, checked for format and version."""
    path = Path(index_dir) / MANIFEST
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise IndexFormatError(f"{path}: not a sharded dense index ({err})") from None
    if meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise IndexFormatError(
            f"{path}: format {meta.get('format')!r} v{meta.get('version')}, expected {FORMAT} v{VERSION}"
        )
    return meta


class DenseShard:
    """One shard of a sharded dense index, opened by path (so a restarted Ray actor reopens it) and
    refused when missing or of another build than the manifest records; answers the two rounds."""

    def __init__(self, index_dir: str, shard: int, threads: int) -> None:
        meta = read_manifest(index_dir)
        if not 0 <= shard < len(meta["shards"]):
            raise InvalidInputError(f"{index_dir}: no shard {shard} (the index has {len(meta['shards'])})")
        record = meta["shards"][shard]
        path = Path(index_dir) / record["dir"]
        if not (path / MANIFEST).is_file():
            raise IndexFormatError(f"{path}: shard {shard} of the sharded index is missing")
        stamp = _build_stamp(path)
        if stamp != record["build"]:
            raise IndexFormatError(
                f"{path}: shard {shard} is of another build (stamp {stamp}) than the sharded index "
                f"records ({record['build']}); rebuild the sharded index"
            )
        self._index = DenseIndex.open(path)
        self._threads = threads

    def shortlist(self, queries: np.ndarray, k: int, nprobe: int, refine: int) -> tuple[Any, ...]:
        return self._index._native.shortlist(queries, k, nprobe, refine, self._threads)

    def rescore(self, queries: np.ndarray, offsets: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return self._index._native.rescore(queries, offsets, rows, self._threads)

    def ids_of(self, rows: np.ndarray) -> list[str]:
        return self._index._native.ids_of(rows)

    def pid(self) -> int:
        """The process serving this shard (tests kill it to check that Ray restarts it)."""
        return os.getpid()


class ShardedDenseIndex:
    """A sharded dense index opened for search: its shards in threads of this process, or with
    ``use_ray`` in Ray actors (restarted, and their calls retried, when their process dies) on the
    cluster this process is connected to."""

    def __init__(self, index_dir: PathLike, *, threads: int = 0, use_ray: bool = False) -> None:
        self.dir = Path(index_dir)
        self.manifest = read_manifest(self.dir)
        records = self.manifest["shards"]
        self.offsets = [int(x) for x in np.cumsum([0] + [r["rows"] for r in records])[:-1]]
        threads = checked_threads(threads)
        self._use_ray = use_ray
        if use_ray:
            self._shards: list[Any] = _ray_actors(
                DenseShard, [(os.fspath(self.dir), s, max(threads, 1)) for s in range(len(records))]
            )
        else:
            self._shards = [DenseShard(os.fspath(self.dir), s, threads) for s in range(len(records))]
            self._pool = ThreadPoolExecutor(max_workers=len(records))

    @property
    def kind(self) -> str:
        return str(self.manifest["kind"])

    @property
    def ntotal(self) -> int:
        return int(self.manifest["rows"])

    def _call(self, method: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        """``method`` of every shard with its own arguments, in parallel; results in shard order."""
        if self._use_ray:
            import ray

            return ray.get([getattr(s, method).remote(*a) for s, a in zip(self._shards, args)])
        calls: list[Callable[[], Any]] = [
            (lambda s=s, a=a: getattr(s, method)(*a)) for s, a in zip(self._shards, args)
        ]
        return list(self._pool.map(lambda f: f(), calls))

    def search_hits(
        self, queries: np.ndarray, k: int = 1000, *, nprobe: int = 1, refine: int | None = None
    ) -> list[list[tuple[str, float]]]:
        """Per query, the single index's hits: (doc id, score) best first (its tie rule)."""
        q = as_matrix(queries, "queries")
        if refine is None:
            refine = k if self.kind != "flat" and self.manifest["has_vectors"] else 0
        nshards = len(self._shards)
        round1 = self._call("shortlist", [(q, k, nprobe, refine)] * nshards)
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


def _cpus_each(count: int) -> float:
    """A CPU share for each of ``count`` Ray workers that lets all of them run at once."""
    import ray

    cpus = float(ray.cluster_resources().get("CPU", 1))
    return max(0.01, min(1.0, cpus / count))


def _ray_map(fn: Callable[..., Any], args: Sequence[tuple[Any, ...]]) -> list[Any]:
    """``fn(*a)`` for each ``a`` as Ray tasks (a task whose worker dies is run again)."""
    import ray

    task = ray.remote(num_cpus=_cpus_each(len(args)), max_retries=3)(fn)
    return ray.get([task.remote(*a) for a in args])


def _ray_actors(cls: type, args: Sequence[tuple[Any, ...]]) -> list[Any]:
    """One Ray actor of ``cls`` per ``a`` in ``args``, restarted (and its calls retried) when its
    process dies: the constructor takes paths, so a restart reopens the same shard."""
    import ray

    actor = ray.remote(num_cpus=_cpus_each(len(args)), max_restarts=-1, max_task_retries=-1)(cls)
    return [actor.remote(*a) for a in args]


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
        ids = read_ids(ids_path)
        parts.append(EmbeddingRows(os.fspath(npy), 0, len(ids), tuple(ids)))
        rows = np.load(npy, mmap_mode="r").shape[0]
        if rows != len(ids):
            raise IndexFormatError(f"{npy} has {rows} rows but {ids_path} lists {len(ids)} ids")
    return parts
