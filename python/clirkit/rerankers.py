"""Old import path of the reranking backends, now in :mod:`clirkit.rerank` (``backends``,
``openai_chat``, ``pointwise``), kept so that existing code keeps working."""

from clirkit.rerank.backends import Backend, CallableBackend, Permutation, WindowRequest, WindowResult
from clirkit.rerank.openai_chat import OpenAIChatBackend, rankgpt_messages
from clirkit.rerank.pointwise import PointwiseBackend

__all__ = [
    "Backend",
    "CallableBackend",
    "OpenAIChatBackend",
    "Permutation",
    "PointwiseBackend",
    "WindowRequest",
    "WindowResult",
    "rankgpt_messages",
]
