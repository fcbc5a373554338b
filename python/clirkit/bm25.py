"""BM25 retrieval with Lucene's scoring (Anserini's rankings) and no JVM.

Build an index from a JSONL corpus (BEIR ``_id``/``title``/``text`` or NeuCLIR ``id``/``title``/``text``),
one analyzer for the whole corpus (``lang``) or one per document (``lang_field``), then search it one
query at a time or in multi-threaded batches. The index is memory-mapped: opening is near-instant and
costs page cache, not heap.

>>> index = BM25Index.build("corpus.jsonl", "idx", lang="en")      # doctest: +SKIP
>>> index.search("what causes rain", k=5)                           # doctest: +SKIP
>>> index.batch_search({"q1": "rain"}, k=1000).to_trec("run.trec")  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Optional, Union

from clirkit import _native
from clirkit._native import InvalidInputError
from clirkit._threads import checked_threads
from clirkit._types import PathLike

Queries = Union[
    Mapping[str, str],
    Sequence[tuple[str, str]],
    Sequence[tuple[str, str, Optional[str]]],
]

DEFAULT_K1 = 0.9
DEFAULT_B = 0.4


def _query_triples(queries: Queries) -> list[tuple[str, str, str | None]]:
    """Normalize the accepted query shapes to (qid, text, lang-or-None) triples."""
    if isinstance(queries, Mapping):
        return [(str(q), text, None) for q, text in queries.items()]
    triples = []
    for item in queries:
        if len(item) == 2:
            triples.append((str(item[0]), item[1], None))
        elif len(item) == 3:
            triples.append((str(item[0]), item[1], item[2]))  # type: ignore[misc]
        else:
            raise InvalidInputError(f"a query must be (qid, text) or (qid, text, lang), got {item!r}")
    return triples


class SearchResults:
    """Results of a batch search, held natively until asked for: per query (in input order), the
    top-k (doc id, score) pairs in canonical order (score descending, then doc id descending)."""

    def __init__(self, native: _native.SearchResults) -> None:
        self._native = native

    def __len__(self) -> int:
        return len(self._native)

    def __contains__(self, qid: object) -> bool:
        return isinstance(qid, str) and qid in self._native

    def __getitem__(self, qid: str) -> list[tuple[str, float]]:
        return self._native[qid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._native.qids())

    def qids(self) -> list[str]:
        """Query ids in input order."""
        return self._native.qids()

    def to_trec(self, path: PathLike, tag: str = "clirkit-bm25") -> None:
        """Write a TREC run file (``qid Q0 docid rank score tag``) in canonical order, atomically."""
        self._native.to_trec(os.fspath(path), tag)

    def to_dict(self) -> dict[str, dict[str, float]]:
        """``{qid: {docid: score}}``, the shape pytrec_eval and :func:`clirkit.write_run` take."""
        return self._native.to_dict()


class BM25Index:
    """A BM25 index on disk: Lucene 9's BM25Similarity (one-byte length norms, f32 arithmetic).
    Top-k by block-max MaxScore, or by exhaustive scoring where a cost model expects that to be
    faster (large k on a small collection); both return exactly the same hits, ties included."""

    def __init__(self, native: _native.Bm25Index) -> None:
        self._native = native

    @staticmethod
    def build(
        corpus: PathLike,
        index: PathLike,
        *,
        lang: str | None = None,
        lang_field: str | None = None,
        fields: Sequence[str] = ("title", "text"),
        threads: int = 0,
        keep_first_duplicate: bool = False,
        quiet: bool = False,
        memory_budget_mb: int = 1024,
    ) -> BM25Index:
        """Index a JSONL corpus into directory ``index`` (written atomically) and open it.

        ``lang`` picks one analyzer for every document (English when neither it nor ``lang_field``
        is given); ``lang_field`` names a JSON field with each document's language code. ``fields``
        are joined with a space into the indexed text. Duplicate ids are an error unless
        ``keep_first_duplicate``. Postings beyond ``memory_budget_mb`` are spilled to disk."""
        return BM25Index(
            _native.Bm25Index.build(
                os.fspath(corpus),
                os.fspath(index),
                lang=lang,
                lang_field=lang_field,
                fields=list(fields),
                threads=checked_threads(threads),
                keep_first_duplicate=keep_first_duplicate,
                quiet=quiet,
                memory_budget_mb=memory_budget_mb,
            )
        )

    @staticmethod
    def open(index: PathLike) -> BM25Index:
        """Open (memory-map) an index built by :meth:`build` or ``clirkit index bm25``."""
        return BM25Index(_native.Bm25Index.open(os.fspath(index)))

    @property
    def num_docs(self) -> int:
        """Number of documents, empty ones included."""
        return self._native.num_docs

    @property
    def num_terms(self) -> int:
        """Number of distinct terms."""
        return self._native.num_terms

    @property
    def languages(self) -> list[str]:
        """Language codes of the analyzers the documents were indexed with."""
        return self._native.languages

    @property
    def avgdl(self) -> float:
        """Average document length (Lucene's: over documents with at least one term)."""
        return self._native.avgdl

    @property
    def manifest(self) -> dict[str, Any]:
        """The index's ``meta.json``: format, statistics, analyzers, fields, build parameters."""
        return json.loads(self._native.manifest_json)

    def verify(self) -> None:
        """Check every file's checksum (reads the whole index); raises IndexFormatError if corrupt."""
        self._native.verify()

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        lang: str | None = None,
        k1: float = DEFAULT_K1,
        b: float = DEFAULT_B,
    ) -> list[tuple[str, float]]:
        """The top ``k`` (doc id, score) pairs for ``query``, best first. ``lang`` is required only
        for an index holding several languages."""
        return self._native.search(query, k, lang, k1, b)

    def batch_search(
        self,
        queries: Queries,
        k: int = 1000,
        *,
        threads: int = 0,
        lang: str | None = None,
        k1: float = DEFAULT_K1,
        b: float = DEFAULT_B,
        quiet: bool = False,
    ) -> SearchResults:
        """Search many queries in parallel (GIL released; results independent of ``threads``).

        ``queries`` is ``{qid: text}``, ``[(qid, text)]`` or ``[(qid, text, lang)]``. Each query is
        analyzed with ``lang`` if given, else its own language, else the index's only language."""
        native = self._native.batch_search(
            _query_triples(queries), k, checked_threads(threads), lang, k1, b, quiet
        )
        return SearchResults(native)

    def search_file(
        self,
        queries_path: PathLike,
        k: int = 1000,
        *,
        threads: int = 0,
        lang: str | None = None,
        k1: float = DEFAULT_K1,
        b: float = DEFAULT_B,
        quiet: bool = False,
    ) -> SearchResults:
        """Search a queries file: JSONL (``_id``/``id``, ``text``, optional ``lang``) or TSV
        (``id<TAB>text``, ``.tsv``/``.txt``)."""
        native = self._native.search_file(
            os.fspath(queries_path), k, checked_threads(threads), lang, k1, b, quiet
        )
        return SearchResults(native)

    def __repr__(self) -> str:
        return (
            f"BM25Index(num_docs={self.num_docs}, num_terms={self.num_terms}, "
            f"languages={self.languages}, avgdl={self.avgdl:.2f})"
        )
