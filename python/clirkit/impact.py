"""Impact-scored retrieval over term-weight vectors (SPLADE-family learned sparse retrieval, or any
collection in Anserini's JSON vector layout) with no JVM.

Documents are ``{"id" | "_id": ..., "contents": ..., "vector": {"term": weight, ...}}`` lines. Weights
(integers or floats) are quantized to integer impacts as ``round(weight * quantize)`` (default 100,
Anserini's convention for float weights; recorded in the index manifest); query weights are
quantized the same way, and a document's score is the exact integer dot product of the two. Ties are
broken by doc id, descending (the canonical order), so results never depend on the algorithm or the
thread count.

>>> index = ImpactIndex.build("docs.vectors.jsonl", "idx")                  # doctest: +SKIP
>>> index.search({"rain": 1.3, "cause": 0.4}, k=5)                           # doctest: +SKIP
>>> index.search_file("queries.vectors.jsonl", k=1000).to_trec("run.trec")   # doctest: +SKIP
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Mapping, Sequence
from typing import Any, Union

from clirkit import _native
from clirkit._checks import checked_int
from clirkit._native import InvalidInputError
from clirkit._term_index import TermIndex
from clirkit._threads import checked_threads
from clirkit._types import PathLike
from clirkit.bm25 import SearchResults

DEFAULT_QUANTIZE = 100
RUN_TAG = "clirkit-impact"

Vector = Union[Mapping[str, float], Sequence[tuple[str, float]]]
VectorQueries = Union[Mapping[str, Vector], Sequence[tuple[str, Vector]]]


def _pairs(vector: Vector) -> list[tuple[str, float]]:
    """``(term, weight)`` pairs; a weight that is not a number (a string, a bool, None) is refused,
    as the vector file reader refuses it."""
    items = vector.items() if isinstance(vector, Mapping) else vector
    pairs = []
    for term, weight in items:
        if isinstance(weight, bool) or not isinstance(weight, numbers.Real):
            raise InvalidInputError(f"the weight of term {term!r} is {weight!r}, not a number")
        pairs.append((str(term), float(weight)))
    return pairs


class ImpactIndex(TermIndex[_native.ImpactIndex]):
    """An impact index on disk: block-max postings of integer impacts, top-k by block-max pruning over
    document blocks or, where the query's postings are many next to the collection, by scoring every
    posting (integer sums either way); every strategy returns the same hits."""

    @staticmethod
    def build(
        vectors: PathLike,
        index: PathLike,
        *,
        quantize: int = DEFAULT_QUANTIZE,
        threads: int = 0,
        quiet: bool = False,
    ) -> ImpactIndex:
        """Index JSONL vectors into directory ``index`` (written atomically) and open it.

        A negative, NaN or non-numeric weight, an empty vector, a term over 32766 bytes or a
        repeated id is an error naming the file and line. Terms whose impact rounds to 0 are left
        out (counted in the manifest)."""
        return ImpactIndex(
            _native.ImpactIndex.build(
                os.fspath(vectors),
                os.fspath(index),
                quantize=checked_int("quantize", quantize, 1, 2**32 - 1),
                threads=checked_threads(threads),
                quiet=quiet,
            )
        )

    @staticmethod
    def open(index: PathLike) -> ImpactIndex:
        """Open (memory-map) an index built by :meth:`build` or ``clirkit index impact``."""
        return ImpactIndex(_native.ImpactIndex.open(os.fspath(index)))

    @property
    def quantize(self) -> int:
        """The factor weights are multiplied by before rounding to integer impacts."""
        return self._native.quantize

    def search(self, query: Vector, k: int = 10, *, strategy: str = "auto") -> list[tuple[str, float]]:
        """The top ``k`` (doc id, score) pairs for a ``{term: weight}`` query, best first. A query none
        of whose terms is in the index finds nothing (an empty list). ``strategy`` ("auto",
        "maxscore", "bmw", "exhaustive") changes the speed, never the hits."""
        return self._native.search(_pairs(query), k, strategy)

    def batch_search(
        self, queries: VectorQueries, k: int = 1000, *, threads: int = 0, quiet: bool = False
    ) -> SearchResults:
        """Search ``{qid: {term: weight}}`` (or ``[(qid, vector)]``) in parallel (GIL released;
        results independent of ``threads``)."""
        items = queries.items() if isinstance(queries, Mapping) else queries
        native = self._native.batch_search(
            [(str(qid), _pairs(vector)) for qid, vector in items], k, checked_threads(threads), quiet
        )
        return SearchResults(native, RUN_TAG)

    def search_file(
        self, queries_path: PathLike, k: int = 1000, *, threads: int = 0, quiet: bool = False
    ) -> SearchResults:
        """Search a queries file: JSONL vectors in the documents' layout, or TSV (``.tsv``/``.txt``):
        ``qid<TAB>term term ...`` (Anserini's pre-tokenized queries: each occurrence adds 1 to a
        term's weight) or ``qid<TAB>term<TAB>weight`` lines."""
        native = self._native.search_file(os.fspath(queries_path), k, checked_threads(threads), quiet)
        return SearchResults(native, RUN_TAG)

    def search_file_to_trec(
        self, queries_path: PathLike, output: PathLike, k: int = 1000, *, tag: str = RUN_TAG, **options: Any
    ) -> int:
        """:meth:`search_file` written straight to the TREC run ``output`` (atomically, the same bytes as
        ``search_file(...).to_trec(output, tag)``), streamed in query order so that memory holds one window
        of queries' results, not all of them. ``options``: ``threads`` and ``quiet`` as in :meth:`search_file`.
        Returns the number of queries searched."""
        threads, quiet = checked_threads(options.pop("threads", 0)), options.pop("quiet", False)
        if options:
            raise TypeError(f"unexpected options: {', '.join(sorted(options))}")
        return self._native.search_file_to_trec(
            os.fspath(queries_path), os.fspath(output), k, tag, threads, quiet
        )

    def __repr__(self) -> str:
        return f"ImpactIndex(num_docs={self.num_docs}, num_terms={self.num_terms}, quantize={self.quantize})"
