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
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union, overload

import numpy as np

from clirkit import _native
from clirkit._native import InvalidInputError

if TYPE_CHECKING:
    from clirkit.encoders import OnnxEncoder

PathLike = Union[str, "os.PathLike[str]"]

__all__ = ["DenseIndex", "DenseRetriever", "fastscan_kernels", "load_matrix", "read_ids"]


def fastscan_kernels() -> list[str]:
    """The fast-scan kernels this CPU can run (``scalar``, ``avx2``, ``avx512``), slowest first."""
    return list(_native.fastscan_kernels())


def _matrix(a: Any, what: str) -> np.ndarray:
    """A C-contiguous float32 2-D view of ``a`` (no copy when it already is one)."""
    arr = np.asarray(a)
    if arr.ndim == 1 and what == "queries":
        arr = arr.reshape(1, -1)
    if arr.ndim != 2:
        raise InvalidInputError(f"{what} must be a 2-D array (rows are vectors), got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.floating):
        raise InvalidInputError(f"{what} must hold floats (float32 or float16), got {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=np.float32)


def load_matrix(path: PathLike) -> np.ndarray:
    """Memory-map a ``.npy`` matrix; float32 stays mapped, float16/float64 are converted."""
    arr = np.load(os.fspath(path), mmap_mode="r")
    return _matrix(arr, f"{path}")


def read_ids(path: PathLike) -> list[str]:
    """One id per line (UTF-8); blank lines and surrounding whitespace in ids are errors."""
    ids: list[str] = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            text = line.rstrip("\r\n")
            if not text.strip() or text != text.strip():
                raise InvalidInputError(
                    f"{path}:{lineno}: an id line must be a non-empty id without surrounding spaces"
                )
            ids.append(text)
    return ids


class _Ids(Sequence):
    """The index's string ids by internal id (read lazily from the memory-mapped table)."""

    def __init__(self, native: Any) -> None:
        self._native = native

    def __len__(self) -> int:
        return int(self._native.ntotal)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self._native.id(j) for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        return self._native.id(i)

    def __contains__(self, item: object) -> bool:
        return isinstance(item, str) and self._native.find(item) is not None

    def index(self, value: Any, start: int = 0, stop: int | None = None) -> int:
        found = self._native.find(value) if isinstance(value, str) else None
        if found is None or found < start or (stop is not None and found >= stop):
            raise ValueError(f"{value!r} is not an id of this index")
        return int(found)


class DenseIndex:
    """A dense vector index; build with :meth:`build` or load with :meth:`open`."""

    def __init__(self, native: Any) -> None:
        self._native = native

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
    ) -> DenseIndex:
        """Index ``embeddings`` (n x d; float32, float16 converted), one unique id per row.

        ``pq=None`` is exact flat search. ``train_size`` caps the training sample (default
        65,536 rows); ``keep_vectors`` stores full vectors for ``refine``; ``seed`` makes
        training reproducible; ``threads=0`` uses all cores.
        """
        data = _matrix(embeddings, "embeddings")
        id_list = [i if isinstance(i, str) else str(i) for i in ids]
        native = _native.DenseIndex.build(
            data,
            id_list,
            pq=pq,
            nbits=nbits,
            ivf=ivf,
            metric=metric,
            train_size=train_size,
            seed=seed,
            threads=threads,
            keep_vectors=keep_vectors,
            quiet=quiet,
        )
        return DenseIndex(native)

    def save(self, dir: PathLike) -> None:
        """Write the index directory atomically (manifest ``clirkit-dense`` v1)."""
        self._native.save(Path(dir))

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
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` per query: (scores float32 (q, k), internal ids int64 (q, k), -1 padded).

        ``nprobe``: IVF lists scanned per query. ``refine``: re-score this many PQ candidates
        exactly with the stored vectors; ``None`` (default) re-scores the top ``k`` when the index
        stores vectors (as FAISS's ``PQ...,RFlat`` with k_factor 1) and uses PQ scores otherwise;
        ``0`` always returns PQ scores.
        """
        return self._native.search(
            _matrix(queries, "queries"), k, nprobe, self._refine_depth(k, refine), threads
        )

    def _refine_depth(self, k: int, refine: int | None) -> int:
        """The shortlist re-scored exactly: ``refine`` as given, or ``k`` by default on a PQ index
        with stored vectors (4-bit PQ alone loses 0.01-0.07 nDCG@10 on real embeddings; see
        benches/RESULTS.md)."""
        if refine is not None:
            return refine
        return k if self.kind != "flat" and self._native.has_vectors else 0

    @property
    def has_vectors(self) -> bool:
        """Whether full vectors are stored (flat search and exact ``refine`` need them)."""
        return bool(self._native.has_vectors)

    def search_run(
        self,
        queries: np.ndarray,
        qids: Sequence[str],
        k: int = 1000,
        *,
        maxp: bool = False,
        separator: str = "#",
        **kw: Any,
    ) -> dict[str, dict[str, float]]:
        """Search and return ``{qid: {docid: score}}`` (keyword options as :meth:`search`).

        ``maxp=True`` searches an index of passages (ids ``docid#k``, as ``clirkit encode --passages``
        writes them; ``separator`` splits them at its last occurrence) and returns ``k`` documents per
        query, each scored by its best passage: passages are fetched until ``k`` documents are certain or
        the index runs out (on a flat index, exactly what searching every passage and then
        :func:`clirkit.passages.maxp` give).
        """
        kw["refine"] = self._refine_depth(k, kw.get("refine"))
        pairs = self._native.search_run(
            _matrix(queries, "queries"), list(qids), k, maxp=separator if maxp else None, **kw
        )
        return {q: dict(docs) for q, docs in pairs}

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
        kw["refine"] = self._refine_depth(k, kw.get("refine"))
        self._native.search_trec(
            _matrix(queries, "queries"),
            list(qids),
            Path(path),
            k,
            tag,
            maxp=separator if maxp else None,
            **kw,
        )

    @property
    def ids(self) -> Sequence[str]:
        """String ids by internal id."""
        return _Ids(self._native)

    @property
    def dim(self) -> int:
        return int(self._native.dim)

    @property
    def ntotal(self) -> int:
        return int(self._native.ntotal)

    @property
    def metric(self) -> str:
        return str(self._native.metric)

    @property
    def kind(self) -> str:
        """``flat``, ``pq{M}x{nbits}`` or ``ivf{NLIST},pq{M}x{nbits}``."""
        return str(self._native.kind)

    def __len__(self) -> int:
        return self.ntotal

    def __repr__(self) -> str:
        return f"DenseIndex(kind={self.kind!r}, dim={self.dim}, ntotal={self.ntotal}, metric={self.metric!r})"


class DenseRetriever:
    """An ONNX encoder with the dense index of what it encoded: query texts in, runs out.

    >>> retriever = DenseRetriever.build("models/e5", "corpus.jsonl", "work/docs", passages=(180, 90))  # doctest: +SKIP
    >>> retriever.search({"q1": "what causes ulcers"}, k=100)  # {qid: {docid: score}}  # doctest: +SKIP

    ``maxp=True`` when the index holds passages (``docid#k``): :meth:`search` then returns ``k`` documents
    per query scored by their best passage (see :meth:`DenseIndex.search_run`).
    """

    def __init__(
        self, encoder: OnnxEncoder, index: DenseIndex, *, maxp: bool = False, separator: str = "#"
    ) -> None:
        self.encoder = encoder
        self.index = index
        self.maxp = maxp
        self.separator = separator

    @staticmethod
    def build(
        model: PathLike,
        corpus: PathLike,
        output_prefix: PathLike,
        *,
        passages: tuple[int, int] | None = None,
        fields: Sequence[str] | None = None,
        pq: int | None = None,
        index_dir: PathLike | None = None,
        device: str = "auto",
        threads: int = 0,
        quiet: bool = False,
        **encoder_options: Any,
    ) -> DenseRetriever:
        """Encode the JSONL ``corpus`` with the model directory ``model`` into ``PREFIX.npy`` +
        ``PREFIX.ids.txt`` (streamed and resumable: :func:`clirkit.encode_corpus.encode_file`), optionally
        as ``passages=(size, stride)`` token windows, and index the vectors (flat, or ``pq=M``); the index
        is saved to ``index_dir`` when given. ``encoder_options`` go to :class:`clirkit.encoders.OnnxEncoder`
        (pooling, prefixes, max_length, batch_size, fp16, ...)."""
        from clirkit.encode_corpus import encode_file, load_embeddings
        from clirkit.encoders import OnnxEncoder

        encoder = OnnxEncoder(model, device=device, threads=threads or None, **encoder_options)
        encode_file(encoder, corpus, output_prefix, fields=fields, passages=passages, quiet=quiet)
        embeddings, ids = load_embeddings(output_prefix)
        index = DenseIndex.build(embeddings, ids, pq=pq, threads=threads, quiet=quiet)
        if index_dir is not None:
            index.save(index_dir)
        return DenseRetriever(encoder, index, maxp=passages is not None)

    def search(
        self, queries: Mapping[str, str], k: int = 1000, **search_options: Any
    ) -> dict[str, dict[str, float]]:
        """Encode ``{qid: text}`` with the query prefix and return the top ``k`` per query as
        ``{qid: {docid: score}}`` (documents by MaxP when :attr:`maxp`; options as :meth:`DenseIndex.search`)."""
        qids = list(queries)
        vectors = self.encoder.encode_queries([queries[q] for q in qids])
        return self.index.search_run(
            vectors, qids, k, maxp=self.maxp, separator=self.separator, **search_options
        )
