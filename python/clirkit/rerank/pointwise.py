"""Pointwise reranking: every candidate of the top ``depth`` scored on its own, then sorted.

- :func:`rerank_pointwise`: a full sort of each query's whole depth (not windows), one batched
  scorer call per query for the passages the cache does not have; each (query, passage) score is
  cached as it arrives, so a killed run resumes with only the missing scores.
- Scorers: :class:`CallableScorer` (any ``fn(query, passages) -> scores``, e.g. a cross-encoder's
  ``score``), :meth:`CallableScorer.from_encoder` (bi-encoder cosine), and the LLM-likelihood scorers
  of :mod:`clirkit.rerank.likelihood`.
- :class:`PointwiseBackend`: a score function applied per window of the listwise driver (kept for
  callers of :func:`clirkit.rerank.rerank`; a partial sort).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from clirkit._native import InvalidInputError
from clirkit._types import PathLike, RunDict, RunInput
from clirkit.fusion import load_run
from clirkit.rerank.backends import Backend, WindowRequest, WindowResult
from clirkit.rerank.cache import RerankCache
from clirkit.rerank.driver import FailedWindow, RerankStats, candidate_texts, opened_cache, progress_bar

__all__ = ["CallableScorer", "PassageScore", "PointwiseBackend", "Scorer", "rerank_pointwise"]


@dataclass
class PassageScore:
    """One passage's score, or why there is none (``transient``: asking again may succeed, so the
    failure is not cached). ``calls`` and the token counts: what the server was asked for it."""

    value: Optional[float]
    error: Optional[str] = None
    transient: bool = False
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Scorer:
    """Base class of pointwise scorers: ``score`` gets one query and all its unscored passages."""

    #: Part of every cache key: scores are reused only for the same identity.
    identity: str = "scorer"

    def score(self, query: str, passages: List[str]) -> List[PassageScore]:
        raise NotImplementedError

    def close(self) -> None:
        """Release resources (threads, sessions)."""


class CallableScorer(Scorer):
    """``fn(query, passages) -> scores`` (higher is better), named ``identity`` in cache keys. An
    exception, a wrong number of scores or a non-finite one fails the query's scoring."""

    def __init__(self, fn: Callable[[str, List[str]], Sequence[float]], identity: str) -> None:
        self.fn = fn
        self.identity = f"pointwise:{identity}"

    @classmethod
    def from_encoder(cls, encoder, identity: str) -> "CallableScorer":
        """Cosine similarity from an encoder with ``encode_queries(texts)`` and ``encode_passages(texts)``
        returning L2-normalized row vectors (e.g. ``clirkit.encoders.OnnxEncoder``)."""

        def cosine(query: str, passages: List[str]) -> List[float]:
            import numpy  # only with an encoder, so the CLI starts without it

            q = encoder.encode_queries([query])[0]
            return [float(numpy.dot(q, p)) for p in encoder.encode_passages(passages)]

        return cls(cosine, identity)

    def score(self, query: str, passages: List[str]) -> List[PassageScore]:
        try:
            values = [float(v) for v in self.fn(query, passages)]
            if len(values) != len(passages):
                raise ValueError(f"{len(values)} scores for {len(passages)} passages")
            bad = next((v for v in values if v != v or v in (float("inf"), float("-inf"))), None)
            if bad is not None:
                raise ValueError(f"non-finite score {bad}")
        except Exception as err:  # noqa: BLE001 - a scoring error fails this query only
            return [PassageScore(None, error=f"scorer error: {err!r}", calls=1) for _ in passages]
        scores = [PassageScore(v) for v in values]
        if scores:
            scores[0].calls = 1
        return scores


def rerank_pointwise(
    run: RunInput,
    queries: Union[PathLike, Mapping[str, str]],
    corpus: Union[PathLike, Mapping[str, str]],
    scorer: Scorer,
    depth: int = 100,
    cache: Union[None, PathLike, RerankCache] = None,
    progress: bool = True,
):
    """Rerank each query's top ``depth`` by ``scorer``: a full sort (ties keep the first-stage order),
    the rest of the run after it in its order, scored n, n-1, ..., 1 (n candidates) as the listwise
    driver does.

    Each query is one scorer call with all its passages not in the cache. A query any of whose
    passages could not be scored keeps its first-stage order and is reported as a failed window
    (start 0); its definitive scores are cached all the same.

    Returns ``(run, stats)`` as :func:`clirkit.rerank.rerank` does; in the statistics, ``windows``
    counts queries (one full-depth window each), ``cache_hits`` queries served wholly from the cache
    and ``calls`` model requests (one per scorer call for a callable)."""
    if depth < 1:
        raise InvalidInputError("depth must be at least 1")
    started = time.monotonic()
    candidates: List[Tuple[str, List[str]]] = [
        (qid, [d for d, _ in docs]) for qid, docs in load_run(run).to_list()
    ]
    query_text, doc_text = candidate_texts(candidates, queries, corpus, depth)
    own_cache, store = opened_cache(cache)
    stats = RerankStats(queries=len(candidates), windows=sum(1 for _, docs in candidates if docs))
    bar = progress_bar(stats.windows, progress, "queries")
    out: RunDict = {}
    try:
        for qid, docs in candidates:
            top = docs[:depth]
            if not top:
                out[qid] = {}
                continue
            query = query_text[qid]
            passages = [doc_text[d] for d in top]
            keys = [RerankCache.score_key(scorer.identity, query, p) for p in passages]
            known: Dict[str, float] = store.get_scores(keys) if store is not None else {}
            todo = [i for i, key in enumerate(keys) if key not in known]
            errors: List[str] = []
            if todo:
                results = scorer.score(query, [passages[i] for i in todo])
                if len(results) != len(todo):
                    raise RuntimeError(
                        f"{type(scorer).__name__} gave {len(results)} scores for {len(todo)} passages"
                    )
                for i, result in zip(todo, results):
                    stats.calls += result.calls
                    stats.prompt_tokens += result.prompt_tokens
                    stats.completion_tokens += result.completion_tokens
                    if result.value is None or not math.isfinite(result.value):
                        errors.append(result.error or f"score {result.value} is not finite")
                        continue
                    known[keys[i]] = result.value
                    if store is not None:
                        store.put_score(keys[i], result.value)
            else:
                stats.cache_hits += 1
            if errors:
                stats.failures += 1
                more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
                stats.failed_windows.append(FailedWindow(qid, 0, errors[0] + more))
                order = list(range(len(top)))
            else:
                order = sorted(range(len(top)), key=lambda i: (-known[keys[i]], i))
            ranked = [top[i] for i in order] + docs[depth:]
            n = len(ranked)
            out[qid] = {d: float(n - r) for r, d in enumerate(ranked)}
            bar.advance()
    finally:
        bar.close()
        if own_cache and store is not None:
            store.close()
        scorer.close()
    stats.seconds = time.monotonic() - started
    return out, stats


class PointwiseBackend(Backend):
    """Rank each window of the listwise driver by ``score_fn(query, passages) -> scores`` (higher is
    better; ties keep the current order). :func:`rerank_pointwise` sorts the whole depth instead."""

    def __init__(self, score_fn: Callable[[str, List[str]], Sequence[float]], name: str) -> None:
        self.score_fn = score_fn
        self.identity = f"pointwise:{name}"

    @classmethod
    def from_encoder(cls, encoder, name: str, memo_size: int = 100_000) -> "PointwiseBackend":
        """Cosine similarity from an encoder with ``encode_queries(texts)`` and
        ``encode_passages(texts)`` returning L2-normalized row vectors (e.g.
        ``clirkit.encoders.OnnxEncoder``). Embeddings are memoized, since windows overlap."""
        memo: Dict[Tuple[str, str], object] = {}

        def embed(kind: str, texts: List[str]) -> List[object]:
            missing = [t for t in dict.fromkeys(texts) if (kind, t) not in memo]
            if missing:
                if len(memo) + len(missing) > memo_size:
                    memo.clear()
                encode = encoder.encode_queries if kind == "q" else encoder.encode_passages
                for text, vector in zip(missing, encode(missing)):
                    memo[(kind, text)] = vector
            return [memo[(kind, t)] for t in texts]

        def cosine(query: str, passages: List[str]) -> List[float]:
            import numpy  # only with an encoder, so the CLI starts without it

            (q,) = embed("q", [query])
            return [float(numpy.dot(q, p)) for p in embed("p", passages)]

        return cls(cosine, name)

    def rank(self, requests: Sequence[WindowRequest]) -> Iterator[Tuple[int, WindowResult]]:
        for i, req in enumerate(requests):
            try:
                scores = [float(s) for s in self.score_fn(req.query, req.passages)]
                if len(scores) != len(req.passages):
                    raise ValueError(f"{len(scores)} scores for {len(req.passages)} passages")
            except Exception as err:  # noqa: BLE001 - a scoring error fails this window only
                yield i, WindowResult(None, error=f"scorer error: {err!r}")
                continue
            order = sorted(range(len(scores)), key=lambda j: (-scores[j], j))
            yield i, WindowResult([j + 1 for j in order])
