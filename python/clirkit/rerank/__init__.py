"""Reranking, one module per concern:

- :mod:`~clirkit.rerank.driver`: :func:`rerank`, the sliding-window listwise loop over Rust's plan,
  and its statistics;
- :mod:`~clirkit.rerank.pointwise`: :func:`rerank_pointwise`, a full sort of each query's depth by
  a pointwise :class:`Scorer` (one batched call per query), and :class:`PointwiseBackend`;
- :mod:`~clirkit.rerank.likelihood`: LLM-likelihood scorers over ``/completions`` (UPR query
  likelihood, Qwen3-Reranker yes/no);
- :mod:`~clirkit.rerank.cache`: :class:`RerankCache`, every definitive answer in SQLite as it arrives;
- :mod:`~clirkit.rerank.backends`: the listwise backend interface and :class:`CallableBackend`;
- :mod:`~clirkit.rerank.identity`: the cache identity derived from a callable;
- :mod:`~clirkit.rerank.openai_chat`: :class:`OpenAIChatBackend` over an OpenAI-compatible server;
- :mod:`~clirkit.rerank.templates`: the listwise prompt families (``rankgpt``, ``rankzephyr``, ``first``);
- :mod:`~clirkit.rerank.http`: the guarded HTTP client (deadline, size cap, no redirects);
- :mod:`~clirkit.rerank.prompt_budget`: token budgets for prompt texts.
"""

from clirkit.rerank.backends import Backend, CallableBackend, Permutation, WindowRequest, WindowResult
from clirkit.rerank.cache import RerankCache
from clirkit.rerank.driver import FailedWindow, RerankStats, rerank
from clirkit.rerank.likelihood import QueryLikelihoodScorer, YesNoScorer
from clirkit.rerank.openai_chat import OpenAIChatBackend
from clirkit.rerank.pointwise import CallableScorer, PassageScore, PointwiseBackend, Scorer, rerank_pointwise
from clirkit.rerank.templates import TEMPLATES, rankgpt_messages, rankzephyr_messages

__all__ = [
    "TEMPLATES",
    "Backend",
    "CallableBackend",
    "CallableScorer",
    "FailedWindow",
    "OpenAIChatBackend",
    "PassageScore",
    "Permutation",
    "PointwiseBackend",
    "QueryLikelihoodScorer",
    "RerankCache",
    "RerankStats",
    "Scorer",
    "WindowRequest",
    "WindowResult",
    "YesNoScorer",
    "rankgpt_messages",
    "rankzephyr_messages",
    "rerank",
    "rerank_pointwise",
]
