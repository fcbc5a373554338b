"""Dense vector search: exact flat search, or product quantization with 4-bit fast-scan.

``DenseRetriever.build(model, "corpus.jsonl", "work/docs")`` encodes a corpus with an ONNX model and
indexes it in one call; its ``search({qid: text})`` returns a run. ``DenseIndex.build(embeddings, ids)``
makes an exact (flat) index from vectors you already have; ``pq=M`` makes a PQ index
with ``M`` sub-quantizers (``nbits=4``: FAISS-style fast-scan, ``d/4`` bytes per vector for
``M=d/2``; ``nbits=8``: slower, finer), ``ivf=NLIST`` adds a coarse quantizer. Searching returns
numpy arrays of float32 scores and int64 internal ids (``-1`` where fewer than ``k`` hits), or a
run ``{qid: {docid: score}}``, or writes a TREC run file.

Scores are higher-is-better: the inner product for ``metric="ip"``, the negated squared
Euclidean distance for ``metric="l2"``. All work happens in Rust with the GIL released.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np

from clirkit import _native
from clirkit._native import InvalidInputError
from clirkit._native_value import NativeValue
from clirkit._progress import indexing, searching
from clirkit._threads import checked_threads
from clirkit._types import PathLike, RunDict
from clirkit.dense.vectors import as_matrix, load_matrix, streamable

__all__ = ["DenseIndex", "fastscan_kernels"]


def fastscan_kernels() -> list[str]:
    """The fast-scan kernels this CPU can run (``scalar``, ``avx2``, ``avx512``), slowest first."""
    return list(_native.fastscan_kernels())


class _Ids(Sequence):
    """The index's string ids by internal id (read lazily from the memory-mapped table)."""

    def __init__(self, native: Any) -> None:
        self.native = native

    def __len__(self) -> int:
        return int(self.native.ntotal)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self.native.id(j) for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        return self.native.id(i)

    def __contains__(self, item: object) -> bool:
        return isinstance(item, str) and self.native.find(item) is not None

    def index(self, value: Any, start: int = 0, stop: int | None = None) -> int:
        found = self.native.find(value) if isinstance(value, str) else None
        if found is None or found < start or (stop is not None and found >= stop):
            raise ValueError(f"{value!r} is not an id of this index")
        return int(found)


class NativeIndex:
    """What the dense and multi-vector indexes share: a native index handle (:attr:`native`, the
    ``clirkit._native`` object the drivers built on it call) with string ids."""

    def __init__(self, native: Any) -> None:
        self.native = native

    @property
    def ids(self) -> Sequence[str]:
        """String ids by internal id."""
        return _Ids(self.native)

    dim = NativeValue(int)
    ntotal = NativeValue(int, "Items (documents or passages) in the index (what :attr:`ids` counts).")
    has_vectors = NativeValue(bool, "Whether full vectors are stored (exact scoring needs them).")

    def __len__(self) -> int:
        return self.ntotal


def _all_paths(value: Any) -> bool:
    """``value`` is a non-empty list or tuple of paths (several ``.npy`` files)."""
    return (
        isinstance(value, (list, tuple))
        and bool(value)
        and all(isinstance(v, (str, os.PathLike)) for v in value)
    )


def _npy_source(
    embeddings: PathLike | Sequence[PathLike], rows: Sequence[Sequence[int] | None] | None
) -> list[tuple[Path, Sequence[int] | None]] | np.ndarray:
    """``.npy`` files (and per file the rows kept, in order, or None for all) as the native streamed
    readers take them: (file, rows) pairs; a file they cannot stream (float64, Fortran order, big
    endian, gzip) makes it the matrix of those rows, read into memory."""
    files = [embeddings] if isinstance(embeddings, (str, os.PathLike)) else list(embeddings)
    kept = [None] * len(files) if rows is None else [None if r is None else r for r in rows]
    if len(kept) != len(files):
        raise InvalidInputError(f"rows: {len(kept)} row lists for {len(files)} embedding files")
    if all(streamable(path) for path in files):
        return [(Path(p), r) for p, r in zip(files, kept)]
    # Other layouts (float64, Fortran order, big endian) and gzip files are read into memory.
    matrices = [load_matrix(p) if r is None else load_matrix(p)[list(r)] for p, r in zip(files, kept)]
    return matrices[0] if len(matrices) == 1 else np.concatenate(matrices)


def run_dict(pairs: Iterable[tuple[str, Iterable[tuple[str, float]]]]) -> RunDict:
    """``{qid: {docid: score}}`` from the native ``[(qid, [(docid, score)])]``."""
    return {q: dict(docs) for q, docs in pairs}


def _native_build_options(
    pq: int | None,
    nbits: int,
    ivf: int | None,
    metric: str,
    train_size: int | None,
    seed: int,
    threads: int,
    keep_vectors: bool,
    vector_dtype: str,
) -> dict[str, Any]:
    """The build options of :meth:`DenseIndex.build` as the native build takes them: every key of
    its keyword names, ``threads`` checked."""
    return {
        "pq": pq,
        "nbits": nbits,
        "ivf": ivf,
        "metric": metric,
        "train_size": train_size,
        "seed": seed,
        "threads": checked_threads(threads),
        "keep_vectors": keep_vectors,
        "vector_dtype": vector_dtype,
    }


class DenseIndex(NativeIndex):
    """A dense vector index; build with :meth:`build` or load with :meth:`open`."""

    @property
    def vector_dtype(self) -> str | None:
        """How the full vectors are stored: ``"float32"``, ``"float16"``, or None when not kept."""
        return self.native.vector_dtype

    @staticmethod
    def build(
        embeddings: np.ndarray,
        ids: Iterable[str],
        *,
        pq: int | None = None,
        nbits: int = 4,
        ivf: int | None = None,
        metric: str = "ip",
        train_size: int | None = None,
        seed: int = 0,
        threads: int = 0,
        keep_vectors: bool = True,
        quiet: bool = False,
        vector_dtype: str = "float32",
    ) -> DenseIndex:
        """Index ``embeddings`` (n x d; float32, float16 converted), one unique id per row.

        ``pq=None`` is exact flat search. ``train_size`` caps the training sample (default
        65,536 rows); ``keep_vectors`` stores full vectors for ``refine``, as float32 or, with
        ``vector_dtype="float16"`` (PQ only), as float16 at half the size (re-scoring widens them
        to float32); ``seed`` makes training reproducible; ``threads=0`` uses all cores. A progress
        bar over the rows encoded is drawn on stderr when it is a terminal, unless ``quiet``.
        """
        data = as_matrix(embeddings, "embeddings")
        id_list = [i if isinstance(i, str) else str(i) for i in ids]
        options = _native_build_options(
            pq, nbits, ivf, metric, train_size, seed, threads, keep_vectors, vector_dtype
        )
        with indexing("rows", quiet) as progress:
            native = _native.DenseIndex.build(data, id_list, {**options, "progress": progress})
        return DenseIndex(native)

    @staticmethod
    def build_file(
        embeddings: PathLike | Sequence[PathLike],
        ids: Iterable[str],
        index_dir: PathLike,
        *,
        rows: Sequence[Sequence[int] | None] | None = None,
        pq: int | None = None,
        nbits: int = 4,
        ivf: int | None = None,
        metric: str = "ip",
        train_size: int | None = None,
        seed: int = 0,
        threads: int = 0,
        keep_vectors: bool = True,
        quiet: bool = False,
        memory_mb: int = 256,
        vector_dtype: str = "float32",
    ) -> DenseIndex:
        """Index the ``.npy`` matrix ``embeddings`` (float32 or float16) into ``index_dir`` by streaming.

        The file is read a chunk of rows at a time (float16 converted per chunk) and the index
        files are written as the chunks are encoded, so memory stays near ``memory_mb`` MB plus the
        training sample and the ids, whatever the collection size (with ``ivf`` the codes, ``M``
        bytes per vector, are also held). The files equal those of :meth:`build` then :meth:`save`
        on the same vectors. Returns the index opened from ``index_dir``.

        ``embeddings`` may list several ``.npy`` files, whose rows are indexed one file after another
        (``ids`` then names the rows of all of them in that order), and ``rows`` may give, per file,
        the rows kept (in the order given; None keeps every row): so a collection encoded in several
        files, or part of one, is indexed without first copying its rows into one matrix.
        """
        options = _native_build_options(
            pq, nbits, ivf, metric, train_size, seed, threads, keep_vectors, vector_dtype
        )
        id_list = [i if isinstance(i, str) else str(i) for i in ids]
        source = _npy_source(embeddings, rows)
        if isinstance(source, np.ndarray):
            DenseIndex.build(source, id_list, quiet=quiet, **options).save(index_dir)
            return DenseIndex.open(index_dir)
        with indexing("rows", quiet) as progress:
            options = {**options, "progress": progress}
            native = _native.DenseIndex.build_npy(source, id_list, Path(index_dir), options, memory_mb)
        return DenseIndex(native)

    def add(
        self,
        embeddings: np.ndarray | PathLike | Sequence[PathLike],
        ids: Iterable[str],
        index_dir: PathLike,
        *,
        rows: Sequence[Sequence[int] | None] | None = None,
        keep_rows: bool = True,
        memory_mb: int = 256,
        threads: int = 0,
        quiet: bool = False,
    ) -> DenseIndex:
        """This index's vectors then ``embeddings`` (an array, or ``.npy`` files read in chunks, with
        ``rows`` as :meth:`build_file` takes them), encoded with this index's codebook, written to
        ``index_dir`` (this index's own directory is fine) and returned: the same index as building
        all the vectors at once with this codebook.

        ``keep_rows=False`` leaves this index's vectors out: a new index of ``embeddings`` encoded with
        this codebook (and IVF centroids), which can then be merged with this one (:meth:`merge`).
        """
        new: dict[str, Any] = {"ids": [i if isinstance(i, str) else str(i) for i in ids]}
        if isinstance(embeddings, (str, os.PathLike)) or _all_paths(embeddings):
            source = _npy_source(embeddings, rows)
            new["npy" if isinstance(source, list) else "embeddings"] = source
        elif rows is not None:
            raise InvalidInputError("rows applies to .npy files, not to an array of embeddings")
        else:
            new["embeddings"] = as_matrix(embeddings, "embeddings")
        return self._combined(index_dir, [self] if keep_rows else [], new, memory_mb, threads, quiet)

    @staticmethod
    def merge(
        indexes: Sequence[DenseIndex], index_dir: PathLike, *, memory_mb: int = 256, threads: int = 0
    ) -> DenseIndex:
        """The rows of ``indexes`` in order, written to ``index_dir``: they must have been trained
        with the same codebook (see :meth:`add` with ``keep_rows=False``); ids must be unique across them."""
        if not indexes:
            raise InvalidInputError("merge: give at least one index")
        return indexes[0]._combined(index_dir, list(indexes), {}, memory_mb, threads, True)

    def _combined(
        self,
        index_dir: PathLike,
        indexes: list[DenseIndex],
        new: dict[str, Any],
        memory_mb: int,
        threads: int,
        quiet: bool,
    ) -> DenseIndex:
        """``indexes`` then the vectors ``new`` (``ids`` with ``embeddings`` or ``npy``) written with
        this codebook to ``index_dir``, with a progress bar over the rows unless ``quiet``."""
        with indexing("rows", quiet) as progress:
            native = self.native.write_combined(
                Path(index_dir),
                [i.native for i in indexes],
                memory_mb=memory_mb,
                threads=checked_threads(threads),
                progress=progress,
                **new,
            )
        return DenseIndex(native)

    def save(self, dir: PathLike) -> None:
        """Write the index directory atomically (manifest ``clirkit-dense`` v2); an existing directory
        that is not a clirkit index is never replaced."""
        self.native.save(Path(dir))

    @staticmethod
    def open(dir: PathLike) -> DenseIndex:
        """Open a saved index; codes and vectors are memory-mapped, not read into memory."""
        return DenseIndex(_native.DenseIndex.open(Path(dir)))

    def search(
        self,
        queries: np.ndarray,
        k: int = 1000,
        *,
        nprobe: int = 1,
        refine: int | None = None,
        threads: int = 0,
        quiet: bool = False,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` per query: (scores float32 (q, k), internal ids int64 (q, k), -1 padded).

        ``nprobe``: IVF lists scanned per query. ``refine``: re-score this many PQ candidates
        exactly with the stored vectors; ``None`` (default) re-scores the top ``k`` when the index
        stores vectors (as FAISS's ``PQ...,RFlat`` with k_factor 1) and uses PQ scores otherwise;
        ``0`` always returns PQ scores. A progress bar of the queries searched is drawn on stderr
        when it is a terminal, unless ``quiet``.
        """
        matrix = as_matrix(queries, "queries")
        depth, threads = self._refine_depth(k, refine), checked_threads(threads)
        with searching(len(matrix), quiet) as progress:
            return self.native.search(matrix, k, nprobe, depth, threads, progress=progress)

    def _refine_depth(self, k: int, refine: int | None) -> int:
        """The shortlist re-scored exactly: ``refine`` as given, or ``k`` by default on a PQ index
        with stored vectors (4-bit PQ alone loses 0.01-0.07 nDCG@10 on real embeddings; see
        benches/RESULTS.md)."""
        if refine is not None:
            return refine
        return k if self.kind != "flat" and self.native.has_vectors else 0

    def _search_options(self, k: int, options: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """The keyword options of :meth:`search` as the native search takes them, and ``quiet``."""
        native = {key: value for key, value in options.items() if key != "quiet"}
        native["refine"] = self._refine_depth(k, options.get("refine"))
        native["threads"] = checked_threads(options.get("threads", 0))
        return native, bool(options.get("quiet", False))

    def search_run(
        self,
        queries: np.ndarray,
        qids: Sequence[str],
        k: int = 1000,
        *,
        maxp: bool = False,
        separator: str = "#",
        **kw: Any,
    ) -> RunDict:
        """Search and return ``{qid: {docid: score}}`` (keyword options as :meth:`search`).

        ``maxp=True`` searches an index of passages (ids ``docid#k``, as ``clirkit encode --passages``
        writes them; ``separator`` splits them at its last occurrence) and returns ``k`` documents per
        query, each scored by its best passage: passages are fetched until ``k`` documents are certain or
        the index runs out (on a flat index, exactly what searching every passage and then
        :func:`clirkit.encoders.passages.maxp` give); the progress bar counts the first fetch.
        """
        kw, quiet = self._search_options(k, kw)
        matrix = as_matrix(queries, "queries")
        with searching(len(matrix), quiet) as progress:
            pairs = self.native.search_run(
                matrix, list(qids), k, maxp=separator if maxp else None, progress=progress, **kw
            )
        return run_dict(pairs)

    def search_trec(
        self,
        queries: np.ndarray,
        qids: Sequence[str],
        path: PathLike,
        k: int = 1000,
        tag: str = "clirkit-dense",
        *,
        maxp: bool = False,
        separator: str = "#",
        **kw: Any,
    ) -> None:
        """Search and write a TREC run file atomically (canonical order); ``maxp`` as :meth:`search_run`."""
        kw, quiet = self._search_options(k, kw)
        matrix = as_matrix(queries, "queries")
        with searching(len(matrix), quiet) as progress:
            self.native.search_trec(
                matrix,
                list(qids),
                Path(path),
                k,
                tag,
                maxp=separator if maxp else None,
                progress=progress,
                **kw,
            )

    metric = NativeValue(str)
    kind = NativeValue(str, "``flat``, ``pq{M}x{nbits}`` or ``ivf{NLIST},pq{M}x{nbits}``.")

    def __repr__(self) -> str:
        return f"DenseIndex(kind={self.kind!r}, dim={self.dim}, ntotal={self.ntotal}, metric={self.metric!r})"
