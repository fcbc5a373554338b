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

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional, Union

from clirkit import _native
from clirkit._native import InvalidInputError
from clirkit._native_value import NativeValue
from clirkit._progress import MIB, indexing, searching
from clirkit._term_index import TermIndex
from clirkit._threads import checked_threads
from clirkit._types import PathLike
from clirkit.sources import local_path

Queries = Union[
    Mapping[str, str],
    Sequence[tuple[str, str]],
    Sequence[tuple[str, str, Optional[str]]],
]

DEFAULT_K1 = 0.9
DEFAULT_B = 0.4


@dataclass(frozen=True)
class RM3:
    """RM3 pseudo-relevance feedback, as Anserini's ``Rm3Reranker`` (its defaults): the query is
    expanded with the ``fb_terms`` heaviest terms of a relevance model of its top ``fb_docs``
    documents, interpolated with weight ``original_weight`` for the original query, and searched
    again. ``filter_terms`` keeps only ``[a-z0-9]`` feedback terms (Anserini's English filter).
    Needs an index built with ``store_docvectors=True``."""

    fb_docs: int = 10
    fb_terms: int = 10
    original_weight: float = 0.5
    filter_terms: bool = True

    def _native(self) -> tuple[int, int, float, bool]:
        for name in ("fb_docs", "fb_terms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInputError(f"RM3 {name} must be a positive integer, got {value!r}")
        return (self.fb_docs, self.fb_terms, float(self.original_weight), bool(self.filter_terms))


def _rm3(rm3: RM3 | bool | None) -> RM3 | None:
    """``True`` means Anserini's defaults."""
    if rm3 is True:
        return RM3()
    if rm3 is None or rm3 is False:
        return None
    if not isinstance(rm3, RM3):
        raise InvalidInputError(f"rm3 must be an RM3, True or None, got {rm3!r}")
    return rm3


def _batch_options(
    k: int, threads: int, lang: str | None, k1: float, b: float, progress: Any, rm3: RM3 | bool | None
) -> tuple[int, int, str | None, float, float, Any, tuple[int, int, float, bool] | None]:
    """The native ``batch_search`` / ``search_file`` arguments after the queries, in their order
    (``progress``: the native counter a bar reads, or None)."""
    feedback = _rm3(rm3)
    return (
        k,
        checked_threads(threads),
        lang,
        k1,
        b,
        progress,
        None if feedback is None else feedback._native(),
    )


def query_triples(queries: Queries) -> list[tuple[str, str, str | None]]:
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

    def __init__(self, native: _native.SearchResults, default_tag: str = "clirkit-bm25") -> None:
        self.native = native
        self._default_tag = default_tag

    def __len__(self) -> int:
        return len(self.native)

    def __contains__(self, qid: object) -> bool:
        return isinstance(qid, str) and qid in self.native

    def __getitem__(self, qid: str) -> list[tuple[str, float]]:
        return self.native[qid]

    def __iter__(self) -> Iterator[str]:
        return iter(self.native.qids())

    def qids(self) -> list[str]:
        """Query ids in input order."""
        return self.native.qids()

    def expansion(self, qid: str) -> list[tuple[str, float]] | None:
        """The RM3 expansion of query ``qid``: (term, weight) pairs, heaviest first; None when the
        batch was searched without RM3."""
        return self.native.expansion(qid)

    def to_trec(self, path: PathLike, tag: str | None = None) -> None:
        """Write a TREC run file (``qid Q0 docid rank score tag``) in canonical order, atomically; the
        tag defaults to the searching index's kind (``clirkit-bm25``, ``clirkit-impact``)."""
        self.native.to_trec(os.fspath(path), tag or self._default_tag)

    def to_dict(self) -> dict[str, dict[str, float]]:
        """``{qid: {docid: score}}``, the shape pytrec_eval and :func:`clirkit.write_run` take."""
        return self.native.to_dict()


class CorpusFile(NamedTuple):
    """One file of a corpus given as several files read in sequence (:meth:`BM25Index.build`), with
    how its documents' language is chosen when the build has a ``lang_field``: ``lang`` for every
    document of the file, else the document's own field, else ``default_lang``."""

    path: PathLike
    lang: Optional[str] = None
    default_lang: Optional[str] = None


class BM25Index(TermIndex[_native.Bm25Index]):
    """A BM25 index on disk: Lucene 9's BM25Similarity (one-byte length norms, f32 arithmetic).
    Top-k by block-max MaxScore, or by exhaustive scoring where a cost model expects that to be
    faster (large k on a small collection); both return exactly the same hits, ties included."""

    @staticmethod
    def build(
        corpus: PathLike | Sequence[CorpusFile],
        index: PathLike,
        *,
        lang: str | None = None,
        lang_field: str | None = None,
        fields: Sequence[str] = ("title", "text"),
        threads: int = 0,
        keep_first_duplicate: bool = False,
        quiet: bool = False,
        memory_budget_mb: int = 1024,
        store_docvectors: bool = False,
    ) -> BM25Index:
        """Index a JSONL corpus (or a named collection's, ``irds:...``/``hf:...``) into directory ``index`` (written atomically) and open it.

        ``lang`` picks one analyzer for every document (English when neither it nor ``lang_field``
        is given); ``lang_field`` names a JSON field with each document's language code. ``fields``
        are joined with a space into the indexed text. Duplicate ids are an error unless
        ``keep_first_duplicate``. Postings beyond ``memory_budget_mb`` are spilled to disk.
        ``store_docvectors`` also writes each document's term vector (``docvectors.bin``), which
        RM3 needs. ``corpus`` may be several :class:`CorpusFile` read in sequence as one corpus (no
        concatenated copy written; ids unique across them, a duplicate naming both files): the index
        equals a build over the files concatenated, each document's ``lang_field`` set by its file's
        rule."""
        files: Union[str, list[tuple[str, Optional[str], Optional[str]]]]
        if isinstance(corpus, (str, os.PathLike)):
            files = os.fspath(local_path(corpus, "corpus"))
        else:
            files = [(os.fspath(local_path(f.path, "corpus")), f.lang, f.default_lang) for f in corpus]
        with indexing("MiB read", quiet, scale=MIB) as progress:
            native = _native.Bm25Index.build(
                files,
                os.fspath(index),
                lang=lang,
                lang_field=lang_field,
                fields=list(fields),
                threads=checked_threads(threads),
                keep_first_duplicate=keep_first_duplicate,
                progress=progress,
                memory_budget_mb=memory_budget_mb,
                store_docvectors=store_docvectors,
            )
        return BM25Index(native)

    @staticmethod
    def merge(inputs: Sequence[PathLike], index: PathLike) -> BM25Index:
        """Merge the indexes ``inputs`` (in order; built alike, ids unique across them) into a new
        index ``index`` and open it: its files equal those of one build over the inputs' corpora
        concatenated, with the global statistics (document count, average length) recomputed."""
        return BM25Index(_native.Bm25Index.merge([os.fspath(p) for p in inputs], os.fspath(index)))

    @staticmethod
    def open(index: PathLike) -> BM25Index:
        """Open (memory-map) an index built by :meth:`build` or ``clirkit index bm25``."""
        return BM25Index(_native.Bm25Index.open(os.fspath(index)))

    languages: NativeValue[list[str]] = NativeValue(
        list, "Language codes of the analyzers the documents were indexed with."
    )
    avgdl = NativeValue(float, "Average document length (Lucene's: over documents with at least one term).")
    has_docvectors = NativeValue(
        bool, "Whether the index stores document vectors (built with ``store_docvectors``)."
    )

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        lang: str | None = None,
        k1: float = DEFAULT_K1,
        b: float = DEFAULT_B,
        rm3: RM3 | bool | None = None,
    ) -> list[tuple[str, float]]:
        """The top ``k`` (doc id, score) pairs for ``query``, best first. ``lang`` is required only
        for an index holding several languages. ``rm3`` (an :class:`RM3`, or True for its
        defaults) searches the query's RM3 expansion instead."""
        feedback = _rm3(rm3)
        if feedback is None:
            return self.native.search(query, k, lang, k1, b)
        return self.native.search_rm3(query, feedback._native(), k, lang, k1, b)[0]

    def rm3_expansion(
        self,
        query: str,
        rm3: RM3 | bool = True,
        *,
        lang: str | None = None,
        k1: float = DEFAULT_K1,
        b: float = DEFAULT_B,
    ) -> list[tuple[str, float]]:
        """The RM3 expansion of ``query``: (term, weight) pairs, heaviest first (Pyserini's
        ``get_feedback_terms``)."""
        feedback = _rm3(rm3) or RM3()
        return self.native.search_rm3(query, feedback._native(), 1, lang, k1, b)[1]

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
        rm3: RM3 | bool | None = None,
    ) -> SearchResults:
        """Search many queries in parallel (GIL released; results independent of ``threads``).

        ``queries`` is ``{qid: text}``, ``[(qid, text)]`` or ``[(qid, text, lang)]``. Each query is
        analyzed with ``lang`` if given, else its own language, else the index's only language.
        With ``rm3``, each query's RM3 expansion is searched (see :meth:`SearchResults.expansion`).
        A progress bar is drawn on stderr when it is a terminal, unless ``quiet``."""
        triples = query_triples(queries)
        with searching(len(triples), quiet) as progress:
            native = self.native.batch_search(
                triples, *_batch_options(k, threads, lang, k1, b, progress, rm3)
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
        rm3: RM3 | bool | None = None,
    ) -> SearchResults:
        """Search a queries file: JSONL (``_id``/``id``, ``text``, optional ``lang``) or TSV
        (``id<TAB>text``, ``.tsv``/``.txt``); ``rm3`` and ``quiet`` as in :meth:`batch_search`."""
        path = os.fspath(local_path(queries_path, "queries"))
        with searching(None, quiet) as progress:
            native = self.native.search_file(path, *_batch_options(k, threads, lang, k1, b, progress, rm3))
        assert native is not None  # no output file was given
        return SearchResults(native)

    def search_file_to_trec(
        self, queries_path: PathLike, output: PathLike, k: int = 1000, **options: Any
    ) -> None:
        """:meth:`search_file` written straight to the TREC run ``output`` (atomically, the same bytes as
        ``search_file(...).to_trec(output, tag)``), streamed in query order so that memory holds one window
        of queries' results, not all of them. ``options``: ``tag`` (default ``"clirkit"``) and those of
        :meth:`search_file`."""
        tag = options.pop("tag", "clirkit")
        settings = {"threads": 0, "lang": None, "k1": DEFAULT_K1, "b": DEFAULT_B, "rm3": None, **options}
        quiet = bool(settings.pop("quiet", False))
        queries = os.fspath(local_path(queries_path, "queries"))
        with searching(None, quiet) as progress:
            native_options = _batch_options(k, progress=progress, **settings)
            self.native.search_file(queries, *native_options, os.fspath(output), tag)

    def __repr__(self) -> str:
        return (
            f"BM25Index(num_docs={self.num_docs}, num_terms={self.num_terms}, "
            f"languages={self.languages}, avgdl={self.avgdl:.2f})"
        )
