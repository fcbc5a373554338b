"""Multi-vector late interaction (ColBERT scoring, a PLAID-style index), in Rust, without PyTorch.

Token vectors come as a ``(rows, dim)`` float32 matrix with ``offsets`` (item ``i`` owns rows
``offsets[i]:offsets[i + 1]``), as :mod:`clirkit.encoders.tokens` writes them to
``PREFIX.tokens.npy`` / ``PREFIX.offsets.npy`` / ``PREFIX.ids.txt`` (:func:`load_tokens`).

``MultiVectorIndex.build(tokens, offsets, ids, "work/mv")`` (or ``MultiVectorIndex.build_files(prefixes,
"work/mv")``, reading token files in place) writes an index directory: centroids by
k-means over a seeded token sample, each token stored as its centroid number (2 bytes) plus its residual
at ``nbits`` (1, 2 or 4) bits per dimension, and inverted lists; ``keep_vectors=True`` also stores the
full vectors for exact search. Searching follows PLAID: candidates from the ``ncells`` centroids nearest
each query token, approximate scores from centroid scores (pruned at ``centroid_score_threshold``, best
``ndocs`` kept, then unpruned), exact MaxSim over the decompressed tokens of the best ``rerank``. Budgets
left ``None`` take PLAID's defaults for ``k``. With full vectors stored, ``refine=True`` scores those last
``rerank`` documents with them instead (the ranking converges to exact MaxSim as the budgets grow), and
``exact=True`` scores every document with them.
Scores are MaxSim: the sum over query tokens of their best inner product with a document token.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clirkit import _native
from clirkit._checks import checked_int
from clirkit._native import InvalidInputError
from clirkit._native_value import NativeValue
from clirkit._progress import polled, searching
from clirkit._threads import checked_threads
from clirkit._types import PathLike
from clirkit.dense.index import NativeIndex, run_dict
from clirkit.dense.vectors import streamable
from clirkit.encoders.tokens import load_token_matrix, load_tokens, token_items, token_paths

__all__ = ["BUILD_DEFAULTS", "MultiVectorIndex", "load_tokens", "maxsim_search"]


def _tokens(tokens: Any, offsets: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    """C-contiguous float32 tokens and uint64 offsets (no copy when they already are)."""
    arr = np.asarray(tokens)
    if arr.ndim != 2 or not np.issubdtype(arr.dtype, np.floating):
        raise InvalidInputError(
            f"{what}: tokens must be a 2-D float array (rows are token vectors), got {arr.dtype} {arr.shape}"
        )
    off = np.asarray(offsets)
    if off.ndim != 1 or not np.issubdtype(off.dtype, np.integer):
        raise InvalidInputError(f"{what}: offsets must be a 1-D integer array, got {off.dtype} {off.shape}")
    if len(off) and off.min() < 0:
        raise InvalidInputError(f"{what}: offsets must not be negative")
    return np.ascontiguousarray(arr, dtype=np.float32), np.ascontiguousarray(off, dtype=np.uint64)


def _search_options(k: int, options: dict[str, Any]) -> tuple[Any, bool]:
    """The native search options, every count checked first (a clean error naming it), and ``quiet``."""
    for name in ("ncells", "ndocs", "rerank"):
        checked_int(name, options.get(name))
    native = {key: value for key, value in options.items() if key != "quiet"}
    return _native.MultiVectorSearchOptions(checked_int("k", k), **native), bool(options.get("quiet", False))


def _queries(offsets: np.ndarray) -> int:
    """How many items ``offsets`` delimit."""
    return max(len(offsets) - 1, 0)


#: The build options of :meth:`MultiVectorIndex.build` (``threads`` and ``quiet`` apart) with their
#: defaults, as ``clirkit index multivector`` has them (``centroids`` from the collection's size,
#: ``kmeans_sample`` 64 per centroid).
BUILD_DEFAULTS: dict[str, Any] = {
    "nbits": 2,
    "centroids": None,
    "kmeans_sample": None,
    "kmeans_iterations": 4,
    "seed": 0,
    "keep_vectors": False,
}


def _build_options(
    nbits: int,
    centroids: int | None,
    kmeans_sample: int | None,
    kmeans_iterations: int,
    seed: int,
    keep_vectors: bool,
    threads: int,
) -> dict[str, Any]:
    """The build options as the native build takes them, every count checked (a clean error naming it)."""
    return {
        "nbits": checked_int("nbits", nbits),
        "centroids": checked_int("centroids", centroids),
        "kmeans_sample": checked_int("kmeans_sample", kmeans_sample),
        "kmeans_iterations": checked_int("kmeans_iterations", kmeans_iterations),
        "seed": checked_int("seed", seed, 0, 2**64 - 1),
        "threads": checked_threads(threads),
        "keep_vectors": keep_vectors,
    }


def _build(
    parts: list[tuple[Any, ...]], dir: PathLike, options: dict[str, Any], quiet: bool
) -> MultiVectorIndex:
    """The native build of ``parts`` (tokens as a file or an array, offsets, ids, items kept or None),
    with its progress bar."""
    with polled(None, "indexing", "tokens assigned", enabled=not quiet) as progress:
        native = _native.MultiVectorIndex.build(parts, Path(dir), options, progress=progress)
    return MultiVectorIndex(native)


def maxsim_search(
    doc_tokens: Any,
    doc_offsets: Any,
    query_tokens: Any,
    query_offsets: Any,
    k: int = 1000,
    *,
    threads: int = 0,
    quiet: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact MaxSim of every query against every document, without an index: (scores float32 (q, k),
    document numbers int64 (q, k)), -inf / -1 padded; a progress bar of the queries searched is drawn
    on stderr when it is a terminal, unless ``quiet``."""
    d, do = _tokens(doc_tokens, doc_offsets, "documents")
    q, qo = _tokens(query_tokens, query_offsets, "queries")
    with searching(_queries(qo), quiet) as progress:
        return _native.maxsim_search(d, do, q, qo, k, threads, progress=progress)


class MultiVectorIndex(NativeIndex):
    """A multi-vector index directory; build with :meth:`build` or open with :meth:`open`."""

    @staticmethod
    def build(
        tokens: Any,
        offsets: Any,
        ids: Iterable[str],
        dir: PathLike,
        *,
        nbits: int = 2,
        centroids: int | None = None,
        kmeans_sample: int | None = None,
        kmeans_iterations: int = 4,
        seed: int = 0,
        threads: int = 0,
        keep_vectors: bool = False,
        quiet: bool = False,
    ) -> MultiVectorIndex:
        """Index token matrices (one item per document or passage, named by ``ids``) into ``dir``
        (written atomically) and open it. ``centroids`` defaults to the largest power of two at most
        4·√tokens; ``kmeans_sample`` to 64 tokens per centroid. A progress bar of the token
        assignments to centroids (the k-means passes over the sample, then every token) is drawn on
        stderr when it is a terminal, unless ``quiet``."""
        data, off = _tokens(tokens, offsets, "documents")
        id_list = [i if isinstance(i, str) else str(i) for i in ids]
        options = _build_options(
            nbits, centroids, kmeans_sample, kmeans_iterations, seed, keep_vectors, threads
        )
        return _build([(data, off, id_list, None)], dir, options, quiet)

    @staticmethod
    def build_files(
        prefixes: PathLike | Sequence[PathLike],
        dir: PathLike,
        *,
        items: Sequence[Sequence[int] | None] | None = None,
        threads: int = 0,
        quiet: bool = False,
        **options: Any,
    ) -> MultiVectorIndex:
        """Index the token files of ``prefixes`` (``PREFIX.tokens.npy``, float32 or float16, with
        ``PREFIX.offsets.npy`` and ``PREFIX.ids.txt``), the items of one prefix after another, into
        ``dir``; ``items`` may give, per prefix, the item numbers kept (in the order given; None keeps
        every item). The token vectors are read in place, a chunk at a time, never copied into one
        matrix: memory holds the k-means sample, the centroids and two bytes per token. The index
        equals :meth:`build` on the kept items' tokens one prefix after another, with the same
        options. A token file the native reader cannot read in place (gzip, float64) is read into
        memory. ``options``: those of :meth:`build` (:data:`BUILD_DEFAULTS`)."""
        unknown = sorted(set(options) - set(BUILD_DEFAULTS))
        if unknown:
            raise TypeError(f"build_files() got unexpected keyword arguments: {', '.join(unknown)}")
        files = [prefixes] if isinstance(prefixes, (str, os.PathLike)) else list(prefixes)
        kept = [None] * len(files) if items is None else list(items)
        if len(kept) != len(files):
            raise InvalidInputError(f"items: {len(kept)} item lists for {len(files)} token prefixes")
        parts = []
        for prefix, keep in zip(files, kept):
            offsets, ids = token_items(prefix)
            path = token_paths(prefix)["tokens"]
            tokens = path if streamable(path) else load_token_matrix(path)
            chosen = None if keep is None else [checked_int("items", n, 0) for n in keep]
            parts.append((tokens, offsets, ids, chosen))
        return _build(parts, dir, _build_options(**{**BUILD_DEFAULTS, **options}, threads=threads), quiet)

    @staticmethod
    def open(dir: PathLike) -> MultiVectorIndex:
        """Open an index directory; its files are memory-mapped."""
        return MultiVectorIndex(_native.MultiVectorIndex.open(Path(dir)))

    def search(
        self, tokens: Any, offsets: Any, k: int = 1000, **options: Any
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` per query: (scores float32 (q, k), internal ids int64 (q, k)), -inf / -1 padded.

        Options: ``ncells``, ``centroid_score_threshold`` (``float("-inf")``: no pruning), ``ndocs``,
        ``rerank``, ``refine``, ``exact``, ``threads``, and ``quiet`` (no progress bar; one is drawn
        on stderr when it is a terminal).
        """
        q, qo = _tokens(tokens, offsets, "queries")
        native, quiet = _search_options(k, options)
        with searching(_queries(qo), quiet) as progress:
            return self.native.search(q, qo, native, progress=progress)

    def search_run(
        self,
        tokens: Any,
        offsets: Any,
        qids: Sequence[str],
        k: int = 1000,
        *,
        maxp: bool = False,
        separator: str = "#",
        **options: Any,
    ) -> dict[str, dict[str, float]]:
        """``{qid: {docid: score}}``; with ``maxp`` the index holds passages (``docid#k``) and each query
        gets ``k`` documents scored by their best passage among those scored (every passage with
        ``exact``). Options as :meth:`search`."""
        q, qo = _tokens(tokens, offsets, "queries")
        native, quiet = _search_options(k, options)
        with searching(_queries(qo), quiet) as progress:
            pairs = self.native.search_run(
                q, qo, list(qids), native, maxp=separator if maxp else None, progress=progress
            )
        return run_dict(pairs)

    def search_trec(
        self,
        tokens: Any,
        offsets: Any,
        qids: Sequence[str],
        path: PathLike,
        k: int = 1000,
        tag: str = "clirkit-multivector",
        *,
        maxp: bool = False,
        separator: str = "#",
        **options: Any,
    ) -> None:
        """Search and write a TREC run file atomically (canonical order); ``maxp`` as :meth:`search_run`."""
        q, qo = _tokens(tokens, offsets, "queries")
        native, quiet = _search_options(k, options)
        with searching(_queries(qo), quiet) as progress:
            self.native.search_run(
                q,
                qo,
                list(qids),
                native,
                maxp=separator if maxp else None,
                path=Path(path),
                tag=tag,
                progress=progress,
            )

    ndocs = NativeValue(int)
    ntokens = NativeValue(int)
    ncentroids = NativeValue(int)
    nbits = NativeValue(int)

    def compressed_bytes(self) -> int:
        """Bytes on disk of what compressed search reads (everything but the optional full vectors)."""
        return int(self.native.compressed_bytes())

    def __repr__(self) -> str:
        return (
            f"MultiVectorIndex(ndocs={self.ndocs}, ntokens={self.ntokens}, dim={self.dim}, "
            f"ncentroids={self.ncentroids}, nbits={self.nbits})"
        )
