"""Old import path of the reranking backends, now in :mod:`clirkit.rerank` (``backends``,
``openai_chat``, ``pointwise``, ``likelihood``), kept so that existing code keeps working."""

from clirkit.rerank.backends import Backend, CallableBackend, Permutation, WindowRequest, WindowResult
from clirkit.rerank.likelihood import QueryLikelihoodScorer, YesNoScorer
from clirkit.rerank.openai_chat import OpenAIChatBackend
from clirkit.rerank.pointwise import CallableScorer, PointwiseBackend
from clirkit.rerank.templates import rankgpt_messages

__all__ = [
    "Backend",
    "CallableBackend",
    "CallableScorer",
    "OpenAIChatBackend",
    "Permutation",
    "PointwiseBackend",
    "QueryLikelihoodScorer",
    "WindowRequest",
    "WindowResult",
    "YesNoScorer",
    "rankgpt_messages",
]
