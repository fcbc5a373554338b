"""The backend interface of sliding-window reranking (:func:`clirkit.rerank.rerank`) and the simplest
backend, a callable.

A backend receives one batch of windows (every query's current window of a step) and yields
``(index, WindowResult)`` pairs as answers arrive, in any order; the driver caches each answer as
soon as it is yielded, so an interrupted run loses at most the windows in flight.

- :class:`CallableBackend`: any function taking a batch of :class:`WindowRequest` (each unpacks
  as ``(query, passages, qid, doc_ids)``) and returning one permutation per request.
- :class:`~clirkit.rerank.openai_chat.OpenAIChatBackend`: an OpenAI-compatible chat-completions client.
- :class:`~clirkit.rerank.pointwise.PointwiseBackend`: ranks each window by a score function.

A permutation is a text such as ``"[3] > [1] > [2]"`` or a sequence of 1-based positions; it is
repaired RankGPT-style (duplicates and out-of-range ids dropped, however large, missing ones
appended in their current order). ``None`` marks a failed window, which keeps its order; so does a
sequence holding anything but integers (integral floats pass), e.g. ``None`` or NaN.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

from clirkit._native import InvalidInputError
from clirkit.rerank.identity import derived_identity

Permutation = Union[str, Sequence[int], None]

__all__ = ["Backend", "CallableBackend", "Permutation", "WindowRequest", "WindowResult"]


class WindowRequest(NamedTuple):
    """One window to rank: the query text and the passages in their current order."""

    query: str
    passages: List[str]
    qid: str
    doc_ids: List[str]


@dataclass
class WindowResult:
    """A backend's answer for one window.

    ``answer`` is the permutation (text or 1-based positions), or None when the window failed;
    ``error`` then says why. ``calls`` counts model requests made for it, retries included.
    ``transient``: the failure may not recur (timeout, refused connection, HTTP 5xx/429/401, a
    malformed response), so it is not cached and a later run asks again. ``reasoning``: what a
    reasoning model thought before answering, kept in the cache for inspection.
    """

    answer: Permutation
    error: Optional[str] = None
    calls: int = 1
    prompt_tokens: int = 0
    completion_tokens: int = 0
    transient: bool = False
    reasoning: Optional[str] = None


class Backend:
    """Base class of reranking backends."""

    #: Part of every cache key: answers are reused only for the same identity.
    identity: str = "backend"

    def rank(self, requests: Sequence[WindowRequest]) -> Iterator[Tuple[int, WindowResult]]:
        """Yield ``(index into requests, result)`` for every request, in any order."""
        raise NotImplementedError

    def close(self) -> None:
        """Release resources (threads, sessions)."""


class CallableBackend(Backend):
    """Wrap ``fn(batch) -> [permutation, ...]``.

    ``fn`` gets up to ``batch_size`` :class:`WindowRequest` objects at a time and returns one
    permutation (text, 1-based positions, or None for failure) per request. An exception fails
    every window of that call. Each window counts as one call.

    ``identity`` names ``fn`` in cache keys: cached answers are reused only for the same one. Give
    it whenever ``fn``'s answers depend on something its code does not show (a model object, a
    file, a global setting), or to keep a cache across edits of ``fn`` or Python versions. Left
    out, it is ``fn``'s module and qualified name plus a digest of its bytecode, constants and
    names, default arguments, closure values, bound ``self`` or ``functools.partial`` arguments
    (the module's globals are not part of it). Only None, booleans, numbers, str, bytes, tuples
    and frozensets of them, and other such functions can be digested; for any other captured
    value, or a callable object, the answers cannot be told apart from another's, so using a
    cache raises :class:`InvalidInputError` (a ``ValueError``) asking for ``identity``.
    """

    def __init__(
        self,
        fn: Callable[[List[WindowRequest]], Sequence[Permutation]],
        identity: Optional[str] = None,
        batch_size: int = 256,
    ) -> None:
        if batch_size < 1:
            raise InvalidInputError("batch_size must be at least 1")
        self.fn = fn
        self.batch_size = batch_size
        self._identity = None if identity is None else f"callable:{identity}"

    @property
    def identity(self) -> str:  # type: ignore[override]
        """The cache identity; derived from ``fn`` on first use (:class:`InvalidInputError` where it cannot be)."""
        if self._identity is None:
            self._identity = f"callable:{derived_identity(self.fn)}"
        return self._identity

    def rank(self, requests: Sequence[WindowRequest]) -> Iterator[Tuple[int, WindowResult]]:
        for begin in range(0, len(requests), self.batch_size):
            batch = list(requests[begin : begin + self.batch_size])
            try:
                answers = list(self.fn(batch))
                if len(answers) != len(batch):
                    raise ValueError(f"returned {len(answers)} permutations for {len(batch)} windows")
            except Exception as err:  # noqa: BLE001 - any backend error fails its windows only
                for i in range(len(batch)):
                    yield begin + i, WindowResult(None, error=f"backend error: {err!r}")
                continue
            for i, answer in enumerate(answers):
                if answer is None:
                    yield begin + i, WindowResult(None, error="backend returned no permutation")
                else:
                    yield begin + i, WindowResult(answer)
