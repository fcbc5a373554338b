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

Search is exact unless asked otherwise. :meth:`ImpactIndex.approximate` builds an approximate search
(statically pruned posting lists and a forward index, in memory) whose returned scores are exact but
which may miss documents of the exact top k; :meth:`ApproximateImpactIndex.audit` says how many, by
re-running a seeded sample of queries exactly, and :meth:`ApproximateImpactIndex.calibrate` picks the
cheapest settings whose Accuracy@10 on such a sample reaches a target with 95% confidence.

>>> approx = index.approximate(postings_per_term=4000)                       # doctest: +SKIP
>>> settings = approx.calibrate("queries.vectors.jsonl", target_accuracy=0.99).settings  # doctest: +SKIP
>>> approx.search_file("queries.vectors.jsonl", settings=settings)           # doctest: +SKIP
>>> approx.audit("queries.vectors.jsonl", 50, settings=settings).accuracy_at_10  # doctest: +SKIP
"""

from __future__ import annotations

import json
import numbers
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Union

from clirkit import _native
from clirkit._checks import checked_int
from clirkit._native import InvalidInputError
from clirkit._native_value import NativeValue
from clirkit._progress import MIB, indexing, searching
from clirkit._term_index import TermIndex
from clirkit._threads import checked_threads
from clirkit._types import PathLike
from clirkit.bm25 import SearchResults

DEFAULT_QUANTIZE = 100
RUN_TAG = "clirkit-impact"
DEFAULT_POSTINGS_PER_TERM = 4000
DEFAULT_CANDIDATES = 400

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
        vectors: PathLike | Sequence[PathLike],
        index: PathLike,
        *,
        quantize: int = DEFAULT_QUANTIZE,
        threads: int = 0,
        quiet: bool = False,
        memory_budget_mb: int = 1024,
    ) -> ImpactIndex:
        """Index JSONL vectors into directory ``index`` (written atomically) and open it.

        A negative, NaN or non-numeric weight, an empty vector, a term over 32766 bytes or a
        repeated id is an error naming the file and line. Terms whose impact rounds to 0 are left
        out (counted in the manifest). Several files are indexed one after another, as their
        concatenation (ids unique across them). Postings beyond ``memory_budget_mb`` are spilled to
        disk as sorted runs and merged: the files are the same whatever the budget."""
        files = [vectors] if isinstance(vectors, (str, os.PathLike)) else list(vectors)
        quantize = checked_int("quantize", quantize, 1, 2**32 - 1)
        memory_budget_mb = checked_int("memory_budget_mb", memory_budget_mb, 1, 2**40)
        with indexing("MiB read", quiet, scale=MIB) as progress:
            native = _native.ImpactIndex.build(
                [os.fspath(f) for f in files],
                os.fspath(index),
                quantize=quantize,
                threads=checked_threads(threads),
                progress=progress,
                memory_budget_mb=memory_budget_mb,
            )
        return ImpactIndex(native)

    @staticmethod
    def open(index: PathLike) -> ImpactIndex:
        """Open (memory-map) an index built by :meth:`build` or ``clirkit index impact``."""
        return ImpactIndex(_native.ImpactIndex.open(os.fspath(index)))

    quantize = NativeValue(int, "The factor weights are multiplied by before rounding to integer impacts.")

    def search(self, query: Vector, k: int = 10, *, strategy: str = "auto") -> list[tuple[str, float]]:
        """The top ``k`` (doc id, score) pairs for a ``{term: weight}`` query, best first. A query none
        of whose terms is in the index finds nothing (an empty list). ``strategy`` ("auto",
        "maxscore", "bmw", "exhaustive") changes the speed, never the hits."""
        return self.native.search(_pairs(query), k, strategy)

    def batch_search(
        self, queries: VectorQueries, k: int = 1000, *, threads: int = 0, quiet: bool = False
    ) -> SearchResults:
        """Search ``{qid: {term: weight}}`` (or ``[(qid, vector)]``) in parallel (GIL released;
        results independent of ``threads``); a progress bar on stderr when it is a terminal, unless
        ``quiet``."""
        items = queries.items() if isinstance(queries, Mapping) else queries
        pairs = [(str(qid), _pairs(vector)) for qid, vector in items]
        threads = checked_threads(threads)
        with searching(len(pairs), quiet) as progress:
            native = self.native.batch_search(pairs, k, threads, progress)
        return SearchResults(native, RUN_TAG)

    def search_file(
        self, queries_path: PathLike, k: int = 1000, *, threads: int = 0, quiet: bool = False
    ) -> SearchResults:
        """Search a queries file: JSONL vectors in the documents' layout, or TSV (``.tsv``/``.txt``):
        ``qid<TAB>term term ...`` (Anserini's pre-tokenized queries: each occurrence adds 1 to a
        term's weight) or ``qid<TAB>term<TAB>weight`` lines."""
        threads = checked_threads(threads)
        with searching(None, quiet) as progress:
            native = self.native.search_file(os.fspath(queries_path), k, threads, progress)
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
        with searching(None, quiet) as progress:
            return self.native.search_file_to_trec(
                os.fspath(queries_path), os.fspath(output), k, tag, threads, progress
            )

    def approximate(
        self, *, postings_per_term: int = DEFAULT_POSTINGS_PER_TERM, threads: int = 0
    ) -> ApproximateImpactIndex:
        """An approximate search over this index (built in memory; exact search stays what
        :meth:`search` does). Each term keeps its ``postings_per_term`` postings of highest impact
        (0 keeps all): more costs memory and time and misses less."""
        native = _native.ApproximateImpactIndex.build(
            self.native,
            postings_per_term=checked_int("postings_per_term", postings_per_term, 0, 2**63 - 1),
            threads=checked_threads(threads),
        )
        return ApproximateImpactIndex(native)

    def __repr__(self) -> str:
        return f"ImpactIndex(num_docs={self.num_docs}, num_terms={self.num_terms}, quantize={self.quantize})"


@dataclass(frozen=True)
class ApproximateSettings:
    """How an approximate query is searched; each knob trades speed against recall of the exact top k
    (returned scores are always exact).

    ``query_terms``: the query's heaviest terms whose pruned lists are walked for candidates (0: all).
    ``candidates``: documents of highest partial score re-scored exactly with the whole query (at least
    k are)."""

    query_terms: int = 0
    candidates: int = DEFAULT_CANDIDATES

    def __post_init__(self) -> None:
        checked_int("query_terms", self.query_terms, 0, 2**63 - 1)
        checked_int("candidates", self.candidates, 1, 2**63 - 1)

    def _native(self) -> tuple[int, int]:
        """The settings as the native index takes them."""
        return (self.query_terms, self.candidates)


@dataclass(frozen=True)
class QueryAudit:
    """One audited query: the share of its exact top 10 the approximate top 10 holds, and the relative
    shortfall of the approximate top 10's score sum against the exact one's."""

    query: str
    accuracy_at_10: float
    score_gap: float


@dataclass(frozen=True)
class AuditReport:
    """An audit of an approximate search: ``audited`` of ``of`` queries (drawn with ``seed``) re-run
    exactly; the mean and the worst Accuracy@10 and score gap over them."""

    audited: int
    of: int
    seed: int
    accuracy_at_10: float
    min_accuracy_at_10: float
    score_gap: float
    max_score_gap: float
    settings: ApproximateSettings
    queries: tuple[QueryAudit, ...]

    @staticmethod
    def from_json(text: str) -> AuditReport:
        raw = json.loads(text)
        params = raw.pop("params")
        queries = tuple(QueryAudit(**q) for q in raw.pop("queries"))
        return AuditReport(**raw, settings=ApproximateSettings(**params), queries=queries)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (what ``clirkit search impact --audit`` writes)."""
        return asdict(self)

    def summary(self) -> str:
        """One line for a log."""
        return (
            f"audit: {self.audited} of {self.of} queries re-run exactly (seed {self.seed}): "
            f"Accuracy@10 {self.accuracy_at_10:.4f} (min {self.min_accuracy_at_10:.4f}), "
            f"score gap {self.score_gap:.4%} (max {self.max_score_gap:.4%})"
        )


@dataclass(frozen=True)
class Calibration:
    """What :meth:`ApproximateImpactIndex.calibrate` chose: ``settings``, judged on ``sample`` of ``of``
    queries (drawn with ``seed``, re-run exactly), where they reached Accuracy@10 ``accuracy_at_10``;
    ``lower_bound`` is the one-sided ``confidence`` (95%) lower bound of the mean Accuracy@10 of all
    ``of`` queries under them (Student's t on the sample, finite-population corrected: the sample's mean
    when the sample is every query). ``reached``: whether that bound reaches ``target``; when not, the
    settings are those of highest bound, and the run likely falls short (its audit says by how much)."""

    settings: ApproximateSettings
    target: float
    sample: int
    of: int
    seed: int
    accuracy_at_10: float
    lower_bound: float
    confidence: float
    reached: bool

    @staticmethod
    def from_json(text: str) -> Calibration:
        raw = json.loads(text)
        settings = ApproximateSettings(**raw.pop("params"))
        return Calibration(**raw, settings=settings)

    def to_dict(self) -> dict[str, Any]:
        """The calibration as JSON-ready data (what an audit file records beside the audit)."""
        return asdict(self)

    def summary(self) -> str:
        """One line for a log."""
        s = self.settings
        verdict = "reaches" if self.reached else "falls short of"
        return (
            f"calibrated: query terms {s.query_terms or 'all'}, candidates {s.candidates}: Accuracy@10 "
            f"{self.accuracy_at_10:.4f} on {self.sample} of {self.of} queries (seed {self.seed}), "
            f"{self.confidence:.0%} lower bound {self.lower_bound:.4f} {verdict} the target {self.target}"
        )


Queries = Union[PathLike, VectorQueries]


def native_queries(queries: Queries) -> Union[str, list[tuple[str, list[tuple[str, float]]]]]:
    """Queries as the native searches take them: a file's path, or ``(qid, [(term, weight)])`` pairs."""
    if isinstance(queries, (str, os.PathLike)):
        return os.fspath(queries)
    items = queries.items() if isinstance(queries, Mapping) else queries
    return [(str(qid), _pairs(vector)) for qid, vector in items]


class ApproximateImpactIndex:
    """Approximate search over an :class:`ImpactIndex` (:meth:`ImpactIndex.approximate`): opt-in, with
    an audit against exact search. Results are :class:`~clirkit.bm25.SearchResults` in canonical order,
    their scores exact."""

    def __init__(self, native: _native.ApproximateImpactIndex) -> None:
        self.native = native

    postings_per_term = NativeValue(int)
    kept_postings = NativeValue(int, "Postings the pruned lists keep.")
    memory_bytes = NativeValue(int, "Bytes the structure holds in memory.")

    def search(
        self, query: Vector, k: int = 10, *, settings: ApproximateSettings = ApproximateSettings()
    ) -> list[tuple[str, float]]:
        """The approximate top ``k`` (doc id, score) pairs for a ``{term: weight}`` query."""
        return self.native.search(_pairs(query), k, settings._native())

    def batch_search(
        self,
        queries: Queries,
        k: int = 1000,
        *,
        settings: ApproximateSettings = ApproximateSettings(),
        threads: int = 0,
        quiet: bool = False,
    ) -> SearchResults:
        """Search a queries file (as :meth:`ImpactIndex.search_file` reads it) or ``{qid: vector}`` in
        parallel (results independent of ``threads``); a progress bar as :meth:`ImpactIndex.batch_search`'s."""
        given = native_queries(queries)
        threads = checked_threads(threads)
        with searching(None if isinstance(given, str) else len(given), quiet) as progress:
            native = self.native.batch_search(given, k, settings._native(), threads, progress)
        return SearchResults(native, RUN_TAG)

    def search_file_to_trec(
        self,
        queries_path: PathLike,
        output: PathLike,
        k: int = 1000,
        *,
        tag: str = RUN_TAG,
        settings: ApproximateSettings = ApproximateSettings(),
        threads: int = 0,
        quiet: bool = False,
    ) -> int:
        """A queries file searched straight to the TREC run ``output`` (atomically, streamed in query
        order). Returns the number of queries searched."""
        threads = checked_threads(threads)
        with searching(None, quiet) as progress:
            return self.native.search_file_to_trec(
                os.fspath(queries_path), os.fspath(output), k, tag, settings._native(), threads, progress
            )

    def audit(
        self,
        queries: Queries,
        n: int,
        *,
        seed: int = 0,
        k: int = 10,
        settings: ApproximateSettings = ApproximateSettings(),
        threads: int = 0,
    ) -> AuditReport:
        """Re-run ``n`` of ``queries`` (drawn with ``seed``; all of them when ``n`` is at least their
        number) exactly and compare each exact top 10 with the approximate search's top 10 at depth ``k``
        (what a run of depth ``k`` holds)."""
        text = self.native.audit(
            native_queries(queries),
            checked_int("n", n, 1, 2**63 - 1),
            checked_int("seed", seed, 0, 2**64 - 1),
            k,
            settings._native(),
            checked_threads(threads),
        )
        return AuditReport.from_json(text)

    def calibrate(
        self,
        queries: Queries,
        target_accuracy: float,
        *,
        sample: int = 50,
        seed: int = 0,
        k: int = 10,
        threads: int = 0,
    ) -> Calibration:
        """The settings of least counted work whose Accuracy@10 on all of ``queries`` reaches
        ``target_accuracy`` at depth ``k`` with 95% confidence, judged on ``sample`` of them (drawn with
        ``seed``, re-run exactly): the cheapest whose lower confidence bound on the sample reaches the
        target (:class:`Calibration` says how the bound is made). A larger sample gives a tighter bound,
        so cheaper settings; the whole query set as the sample makes the bound the exact mean. When no
        setting's bound reaches the target, those of highest bound (``reached`` false; audit the run to
        see the accuracy reached)."""
        text = self.native.calibrate(
            native_queries(queries),
            float(target_accuracy),
            checked_int("sample", sample, 1, 2**63 - 1),
            checked_int("seed", seed, 0, 2**64 - 1),
            k,
            checked_threads(threads),
        )
        return Calibration.from_json(text)

    def __repr__(self) -> str:
        return f"ApproximateImpactIndex(postings_per_term={self.postings_per_term}, kept_postings={self.kept_postings})"
