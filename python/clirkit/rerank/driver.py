"""Sliding-window listwise reranking: the driver.

The window plan and the application of permutations live in Rust (``_native.RerankState``):
windows of ``window`` documents slide bottom-up over each query's top ``depth`` with stride
``stride`` (RankGPT's ``sliding_windows``: 9 windows for 100/20/10), and each answer is applied
before that query's next window is formed. Every step sends the current window of *all* queries
to the backend in one batch, which gives exactly the one-query-at-a-time result.

Reliability:

- a persistent cache (SQLite, standard library) keyed by (backend identity, query text, window
  doc ids in order, digest of the passages) stores every definitive answer as soon as it arrives,
  so an interrupted run resumes without repeating calls and a rerun is free;
- a failed window (timeout, server error, unparsable answer after retries) keeps its current
  order and is reported in :class:`RerankStats`. Transient failures (timeouts, refused
  connections, HTTP 5xx/429/401, malformed responses) are never cached: the next run asks again.
  Definitive ones (the model's unparsable answer) are, so reruns are reproducible, unless
  ``retry_failed=True``.

Output: per query, the reranked top ``depth`` followed by the rest of the first-stage list in
its original order; scores are rewritten to ``n, n-1, ..., 1`` (``n`` = number of candidates) so
the canonical order (score descending) is exactly the reranked order.
"""

from __future__ import annotations

import operator
import os
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, List, Mapping, Optional, Tuple, Union

from clirkit import _native
from clirkit._native import InvalidInputError
from clirkit._progress import ProgressBar
from clirkit._types import PathLike, RunDict, RunInput
from clirkit.fusion import load_run
from clirkit.rerank.backends import Backend, CallableBackend, WindowRequest, WindowResult
from clirkit.rerank.cache import RerankCache

__all__ = ["FailedWindow", "RerankStats", "rerank"]


@dataclass
class FailedWindow:
    """A window that kept its order: query id, window start position, and why."""

    qid: str
    start: int
    reason: str


@dataclass
class RerankStats:
    """What a reranking run did.

    ``calls`` counts model requests actually sent (retries included; one per window for a
    callable backend), ``cache_hits`` windows answered from the cache, ``repaired`` windows
    whose permutation needed repair, ``failures`` windows that kept their order. What the
    repairs fixed, summed over all windows: ``duplicates_dropped`` repeated ids,
    ``out_of_range_dropped`` ids outside the window, ``missing_appended`` positions the answer
    never named (appended in their current order).
    """

    queries: int = 0
    windows: int = 0
    calls: int = 0
    cache_hits: int = 0
    repaired: int = 0
    duplicates_dropped: int = 0
    out_of_range_dropped: int = 0
    missing_appended: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    failed_windows: List[FailedWindow] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"{self.queries} queries, {self.windows} windows: {self.calls} calls, "
            f"{self.cache_hits} cache hits, {self.repaired} repaired ({self.duplicates_dropped} duplicate, "
            f"{self.out_of_range_dropped} out-of-range ids dropped, {self.missing_appended} missing appended), "
            f"{self.failures} failed; "
            f"tokens {self.prompt_tokens} prompt + {self.completion_tokens} completion; "
            f"{self.seconds:.1f} s"
        )

    def to_dict(self) -> Dict[str, object]:
        """The statistics as plain JSON-able data."""
        out = dict(self.__dict__)
        out["failed_windows"] = [f.__dict__ for f in self.failed_windows]
        return out


def progress_bar(total: int, enabled: bool, unit: str = "windows") -> ProgressBar:
    """The reranking drivers' bar: ``total`` windows (listwise) or queries (pointwise)."""
    return ProgressBar(total, "reranking", unit, enabled=enabled)


# The binding reads ids as 64-bit integers. Zero, negative ids and ids past the window are all out
# of range, so an id outside this range is clamped into it: the window is repaired as it would be
# for any out-of-range id (and as the text parser does with a huge number).
_LARGEST_ID = 2**63 - 1


def _permutation_id(value: object) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(f"id {value!r} is not an integer") from None
    return min(max(number, 0), _LARGEST_ID)


def _checked(result: WindowResult) -> WindowResult:
    """``result`` with a list of ids made plain integers the binding accepts (and JSON can cache),
    or failed, saying why, when an id is not an integer: a malformed answer fails its window only."""
    if result.answer is None or isinstance(result.answer, str):
        return result
    try:
        ids = [_permutation_id(value) for value in result.answer]
    except (TypeError, ValueError) as err:  # TypeError: the answer is not a sequence
        return replace(result, answer=None, error=f"malformed permutation: {err}")
    return replace(result, answer=ids)


def _texts(source: Union[PathLike, Mapping[str, str]], ids: set, queries: bool) -> Mapping[str, str]:
    if isinstance(source, Mapping):
        return source
    return _native.load_texts(os.fspath(source), ids, queries)


def candidate_texts(
    candidates: List[Tuple[str, List[str]]],
    queries: Union[PathLike, Mapping[str, str]],
    corpus: Union[PathLike, Mapping[str, str]],
    depth: int,
) -> Tuple[Mapping[str, str], Mapping[str, str]]:
    """The texts of the run's queries and of every query's top ``depth`` documents; a missing one is
    an :class:`InvalidInputError` naming it."""
    query_text = _texts(queries, {q for q, _ in candidates}, True)
    doc_text = _texts(corpus, {d for _, docs in candidates for d in docs[:depth]}, False)
    for qid, docs in candidates:
        if docs and qid not in query_text:
            raise InvalidInputError(f"query '{qid}' of the run has no text in the queries")
        missing = next((d for d in docs[:depth] if d not in doc_text), None)
        if missing is not None:
            raise InvalidInputError(f"document '{missing}' (query '{qid}') is not in the corpus")
    return query_text, doc_text


def opened_cache(cache: Union[None, PathLike, RerankCache]) -> Tuple[bool, Optional[RerankCache]]:
    """``(owned, store)``: the cache opened from a path (owned: to close), or as given."""
    if cache is None or isinstance(cache, RerankCache):
        return False, cache
    return True, RerankCache(cache)


def rerank(
    run: RunInput,
    queries: Union[PathLike, Mapping[str, str]],
    corpus: Union[PathLike, Mapping[str, str]],
    backend: Union[Backend, Callable],
    depth: int = 100,
    window: int = 20,
    stride: int = 10,
    cache: Union[None, PathLike, RerankCache] = None,
    retry_failed: bool = False,
    progress: bool = True,
) -> Tuple[RunDict, RerankStats]:
    """Rerank the top ``depth`` of every query of ``run`` with a listwise ``backend``.

    Args:
        run: first-stage run (TREC file path or ``dict[qid, dict[docid, score]]``).
        queries: queries JSONL/TSV path or ``dict[qid, text]``.
        corpus: corpus JSONL/TSV path (only the candidates' texts are loaded; ``title`` and
            ``text`` joined) or ``dict[docid, text]``.
        backend: a :class:`~clirkit.rerank.backends.Backend` or a callable (wrapped in
            :class:`~clirkit.rerank.backends.CallableBackend`; with a cache, a callable whose identity
            cannot be derived raises :class:`InvalidInputError`: wrap it with an explicit ``identity``).
        depth, window, stride: the window plan.
        cache: SQLite cache path (created if needed) or an open :class:`RerankCache`.
        retry_failed: ask the backend again for windows whose cached answer is a failure.
        progress: show a progress counter on a terminal.

    Returns:
        The reranked run (each query's dict iterates in the new order) and the statistics.
    """
    started = time.monotonic()
    if not isinstance(backend, Backend):
        backend = CallableBackend(backend)
    # Before any work: a callable whose identity cannot be derived is refused with a cache.
    identity = backend.identity if cache is not None else None
    candidates: List[Tuple[str, List[str]]] = [
        (qid, [d for d, _ in docs]) for qid, docs in load_run(run).to_list()
    ]
    state = _native.RerankState(candidates, depth, window, stride)

    query_text, doc_text = candidate_texts(candidates, queries, corpus, depth)
    own_cache, store = opened_cache(cache)
    stats = RerankStats(queries=len(candidates), windows=state.total_windows)
    failed: List[Tuple[int, int, str]] = []
    bar = progress_bar(state.total_windows, progress)

    def apply(query: int, start: int, result: WindowResult) -> None:
        status, duplicates, out_of_range, missing = state.apply(query, result.answer)
        if status == "repaired":
            stats.repaired += 1
            stats.duplicates_dropped += duplicates
            stats.out_of_range_dropped += out_of_range
            stats.missing_appended += missing
        elif status in ("failed", "unparsable"):
            stats.failures += 1
            reason = result.error or "unparsable answer"
            failed.append((query, start, reason))
        bar.advance()

    try:
        while True:
            pending = state.pending()
            if not pending:
                break
            requests: List[WindowRequest] = []
            slots: List[Tuple[int, int, Optional[str]]] = []
            for query, _step, start, doc_ids in pending:
                qid = candidates[query][0]
                text = query_text[qid]
                passages = [doc_text[d] for d in doc_ids]
                key = RerankCache.key(identity, text, doc_ids, passages) if identity is not None else None
                hit = store.get(key) if store is not None and key else None
                if hit is not None and (hit.answer is not None or not retry_failed):
                    stats.cache_hits += 1
                    apply(query, start, _checked(hit))
                    continue
                requests.append(WindowRequest(text, passages, qid, doc_ids))
                slots.append((query, start, key))
            answered = [False] * len(slots)
            for i, result in backend.rank(requests):
                if answered[i]:
                    raise RuntimeError(f"{type(backend).__name__} answered window #{i} of a batch twice")
                answered[i] = True
                result = _checked(result)
                query, start, key = slots[i]
                stats.calls += result.calls
                stats.prompt_tokens += result.prompt_tokens
                stats.completion_tokens += result.completion_tokens
                if store is not None and key and not result.transient:
                    store.put(key, result)
                apply(query, start, result)
            for (query, start, _), done in zip(slots, answered):
                if not done:
                    apply(query, start, WindowResult(None, error="backend gave no answer", calls=0))
    finally:
        bar.close()
        if own_cache and store is not None:
            store.close()
        backend.close()

    failed.sort(key=lambda f: (f[0], -f[1]))
    stats.failed_windows = [FailedWindow(candidates[q][0], s, r) for q, s, r in failed]
    stats.seconds = time.monotonic() - started
    return {qid: dict(docs) for qid, docs in state.result()}, stats
