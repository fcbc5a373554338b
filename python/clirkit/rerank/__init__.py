"""Sliding-window listwise reranking, one module per concern:

- :mod:`~clirkit.rerank.driver`: :func:`rerank`, the window loop over Rust's plan, and its statistics;
- :mod:`~clirkit.rerank.cache`: :class:`RerankCache`, every answer in SQLite as it arrives;
- :mod:`~clirkit.rerank.backends`: the backend interface and :class:`CallableBackend`;
- :mod:`~clirkit.rerank.identity`: the cache identity derived from a callable;
- :mod:`~clirkit.rerank.openai_chat`: :class:`OpenAIChatBackend`, RankGPT over an OpenAI-compatible server;
- :mod:`~clirkit.rerank.pointwise`: :class:`PointwiseBackend`, a score function per window (offline).
"""

from clirkit.rerank.backends import Backend, CallableBackend, Permutation, WindowRequest, WindowResult
from clirkit.rerank.cache import RerankCache
from clirkit.rerank.driver import FailedWindow, RerankStats, rerank
from clirkit.rerank.openai_chat import OpenAIChatBackend, rankgpt_messages
from clirkit.rerank.pointwise import PointwiseBackend

__all__ = [
    "Backend",
    "CallableBackend",
    "FailedWindow",
    "OpenAIChatBackend",
    "Permutation",
    "PointwiseBackend",
    "RerankCache",
    "RerankStats",
    "WindowRequest",
    "WindowResult",
    "rankgpt_messages",
    "rerank",
]
