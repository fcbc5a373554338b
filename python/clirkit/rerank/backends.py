"""Model backends for sliding-window reranking (:func:`clirkit.rerank.rerank`).

A backend receives one batch of windows (every query's current window of a step) and yields
``(index, WindowResult)`` pairs as answers arrive, in any order; the driver caches each answer as
soon as it is yielded, so an interrupted run loses at most the windows in flight.

- :class:`CallableBackend`: any function taking a batch of :class:`WindowRequest` (each unpacks
  as ``(query, passages, qid, doc_ids)``) and returning one permutation per request.
- :class:`OpenAIChatBackend`: an OpenAI-compatible ``/chat/completions`` client (vLLM, SGLang,
  ...) with RankGPT's prompt, timeouts, retries with exponential backoff (longer when a 429 or 503
  says ``Retry-After``), bounded concurrency and token accounting, using only the standard library.
- :class:`PointwiseBackend`: ranks each window by a score function (e.g. cosine similarity of an
  encoder), so reranking runs offline.

A permutation is a text such as ``"[3] > [1] > [2]"`` or a sequence of 1-based positions; it is
repaired RankGPT-style (duplicates and out-of-range ids dropped, however large, missing ones
appended in their current order). ``None`` marks a failed window, which keeps its order; so does a
sequence holding anything but integers (integral floats pass), e.g. ``None`` or NaN.
"""

from __future__ import annotations

import datetime
import email.utils
import functools
import hashlib
import json
import os
import socket
import time
import types
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

from clirkit import _native

Permutation = Union[str, Sequence[int], None]

__all__ = [
    "Backend",
    "CallableBackend",
    "OpenAIChatBackend",
    "PointwiseBackend",
    "WindowRequest",
    "WindowResult",
    "rankgpt_messages",
]


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
    """

    answer: Permutation
    error: Optional[str] = None
    calls: int = 1
    prompt_tokens: int = 0
    completion_tokens: int = 0


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
    cache raises ValueError asking for ``identity``.
    """

    def __init__(
        self,
        fn: Callable[[List[WindowRequest]], Sequence[Permutation]],
        identity: Optional[str] = None,
        batch_size: int = 256,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.fn = fn
        self.batch_size = batch_size
        self._identity = None if identity is None else f"callable:{identity}"

    @property
    def identity(self) -> str:  # type: ignore[override]
        """The cache identity; derived from ``fn`` on first use (ValueError where it cannot be)."""
        if self._identity is None:
            self._identity = f"callable:{_derived_identity(self.fn)}"
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


class _Undigestable(Exception):
    """A value whose content a digest cannot pin down: its state or its repr is not stable."""


# Types whose repr is their whole value, the same in every process.
_PLAIN_TYPES = (type(None), type(Ellipsis), bool, int, float, complex, str, bytes)


def _derived_identity(fn: Callable) -> str:
    """``module.qualname#digest`` of what decides ``fn``'s answers (see :class:`CallableBackend`)."""
    digest = hashlib.sha256()
    try:
        _digest(digest, fn, "the callable", set())
    except _Undigestable as err:
        raise ValueError(
            f"cannot derive a cache identity for {fn!r}: {err}, so answers cached for it could be "
            "confused with another backend's; pass CallableBackend(fn, identity='...') naming the "
            "model and settings behind it"
        ) from None
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{getattr(fn, '__module__', None)}.{name}#{digest.hexdigest()[:16]}"


def _digest(digest, value: object, where: str, active: set) -> None:
    """Feed ``value`` into ``digest``; ``where`` names it in errors, ``active`` holds the functions
    being digested (a function reaching itself through its closure is fed once)."""
    kind = type(value)
    if kind in _PLAIN_TYPES:
        digest.update(repr((kind.__name__, value)).encode("utf-8"))
    elif kind is tuple:
        digest.update(f"tuple {len(value)}".encode())
        for i, item in enumerate(value):
            _digest(digest, item, f"{where}[{i}]", active)
    elif kind is frozenset:
        # Iteration order follows string hashes, which vary between processes: sort the parts.
        parts = []
        for item in value:
            part = hashlib.sha256()
            _digest(part, item, f"an element of {where}", active)
            parts.append(part.hexdigest())
        digest.update(repr(("frozenset", sorted(parts))).encode())
    elif kind is types.CodeType:
        digest.update(repr(("code", value.co_code, value.co_names)).encode())
        _digest(digest, value.co_consts, f"a constant of {where}", active)
    elif kind is types.FunctionType:
        if id(value) in active:
            digest.update(b"recursion")
            return
        active.add(id(value))
        name = value.__qualname__
        digest.update(repr(("function", name)).encode())
        _digest(digest, value.__code__, name, active)
        _digest(digest, value.__defaults__, f"a default argument of {name}", active)
        keyword_defaults = tuple(sorted((value.__kwdefaults__ or {}).items()))
        _digest(digest, keyword_defaults, f"a default argument of {name}", active)
        for variable, cell in zip(value.__code__.co_freevars, value.__closure__ or ()):
            try:
                captured = cell.cell_contents
            except ValueError:  # a variable the enclosing function has not assigned yet
                digest.update(b"empty cell")
                continue
            _digest(digest, captured, f"closure variable '{variable}' of {name}", active)
        active.discard(id(value))
    elif kind is types.MethodType:
        _digest(digest, value.__func__, where, active)
        _digest(digest, value.__self__, f"the self bound to {value.__qualname__}", active)
    elif kind is functools.partial:
        _digest(digest, value.func, f"the function of {where}", active)
        _digest(digest, value.args, f"an argument of {where}", active)
        _digest(digest, tuple(sorted(value.keywords.items())), f"an argument of {where}", active)
    else:
        raise _Undigestable(f"{where} is a {kind.__module__}.{kind.__qualname__}")


class PointwiseBackend(Backend):
    """Rank each window by ``score_fn(query, passages) -> scores`` (higher is better; ties keep
    the current order)."""

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


def rankgpt_messages(query: str, passages: Sequence[str], max_words: int = 300) -> List[Dict[str, str]]:
    """RankGPT's chat prompt (Sun et al., 2023; ``create_permutation_instruction``): passages
    numbered [1]..[n] as alternating user/assistant turns, each cut to ``max_words`` words."""
    num = len(passages)
    messages = [
        {
            "role": "system",
            "content": "You are RankGPT, an intelligent assistant that can rank passages based on "
            "their relevancy to the query.",
        },
        {
            "role": "user",
            "content": f"I will provide you with {num} passages, each indicated by number identifier []. "
            f"\nRank the passages based on their relevance to query: {query}.",
        },
        {"role": "assistant", "content": "Okay, please provide the passages."},
    ]
    for rank, passage in enumerate(passages, start=1):
        content = " ".join(passage.replace("Title: Content: ", "").strip().split()[:max_words])
        messages.append({"role": "user", "content": f"[{rank}] {content}"})
        messages.append({"role": "assistant", "content": f"Received passage [{rank}]."})
    messages.append(
        {
            "role": "user",
            "content": f"Search Query: {query}. \nRank the {num} passages above based on their relevance "
            "to the search query. The passages should be listed in descending order using identifiers. "
            "The most relevant passages should be listed first. The output format should be [] > [], "
            "e.g., [1] > [2]. Only response the ranking results, do not say any word or explain.",
        }
    )
    return messages


class _Retryable(Exception):
    """A failure worth another attempt (timeout, 5xx, 429, connection, unparsable answer);
    ``retry_after``: the seconds the server asked to wait, if it did."""

    def __init__(self, message: str, retry_after: Optional[float] = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _retry_after_seconds(value: Optional[str]) -> Optional[float]:
    """The wait a ``Retry-After`` header asks for (delta-seconds or an HTTP date), or None when it
    is absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # "-0000": RFC 5322's UTC of unknown origin
        when = when.replace(tzinfo=datetime.timezone.utc)
    return max(0.0, when.timestamp() - time.time())


class OpenAIChatBackend(Backend):
    """An OpenAI-compatible chat-completions client with RankGPT's prompt.

    Args:
        base_url: the server's API root, e.g. ``http://127.0.0.1:8000/v1``.
        model: the model name sent in each request (and part of the cache identity).
        api_key: bearer token (default: ``$OPENAI_API_KEY``, none if unset).
        timeout: seconds per request.
        retries: extra attempts after a timeout, connection error, HTTP 408/429/5xx, or an answer
            without a usable identifier; other HTTP errors fail at once.
        backoff: seconds before the first retry, doubled each time; a 429 or 503 answer's
            ``Retry-After`` (seconds or a date) makes the wait that long if it is longer.
        max_backoff: the longest wait before a retry, whatever the doubling or ``Retry-After``.
        concurrency: requests in flight at once.
        max_words: passages are cut to this many words (RankGPT uses 300).
        temperature, max_tokens, extra_body: sent with each request.
    """

    PROMPT_VERSION = "rankgpt-v1"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: Optional[str] = None,
        timeout: float = 60.0,
        retries: int = 3,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        concurrency: int = 8,
        max_words: int = 300,
        temperature: float = 0.0,
        max_tokens: Optional[int] = None,
        extra_body: Optional[Dict[str, object]] = None,
    ) -> None:
        if concurrency < 1 or retries < 0 or timeout <= 0 or max_backoff < 0:
            raise ValueError("concurrency >= 1, retries >= 0, timeout > 0 and max_backoff >= 0 are required")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.concurrency = concurrency
        self.max_words = max_words
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.extra_body = dict(extra_body or {})
        # The server's address is left out: the same model answers the same wherever it runs.
        extra = json.dumps(self.extra_body, sort_keys=True)
        self.identity = (
            f"openai-chat:{model}:{self.PROMPT_VERSION}:words={max_words}:t={temperature}"
            f":max_tokens={max_tokens}:{extra}"
        )

    def _post(self, body: bytes) -> dict:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as err:
            detail = err.read()[:200].decode("utf-8", "replace")
            message = f"HTTP {err.code}: {detail}"
            if err.code in (408, 429) or err.code >= 500:
                header = err.headers.get("Retry-After") if err.code in (429, 503) else None
                raise _Retryable(message, _retry_after_seconds(header)) from err
            raise RuntimeError(message) from err
        except (socket.timeout, TimeoutError) as err:
            raise _Retryable(f"timed out after {self.timeout:g} s") from err
        except urllib.error.URLError as err:
            if isinstance(err.reason, (socket.timeout, TimeoutError)):
                raise _Retryable(f"timed out after {self.timeout:g} s") from err
            raise _Retryable(f"connection failed: {err.reason}") from err
        except (ConnectionError, json.JSONDecodeError, UnicodeDecodeError) as err:
            raise _Retryable(f"bad response: {err}") from err

    def rank_one(self, request: WindowRequest) -> WindowResult:
        """Ask the model to rank one window, retrying as configured."""
        payload: Dict[str, object] = {
            "model": self.model,
            "messages": rankgpt_messages(request.query, request.passages, self.max_words),
            "temperature": self.temperature,
        }
        if self.max_tokens is not None:
            payload["max_tokens"] = self.max_tokens
        payload.update(self.extra_body)
        body = json.dumps(payload).encode("utf-8")
        result = WindowResult(None, calls=0)
        retry_after: Optional[float] = None  # what the last failure asked to wait, if anything
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(min(max(self.backoff * 2 ** (attempt - 1), retry_after or 0.0), self.max_backoff))
            result.calls += 1
            try:
                reply = self._post(body)
                usage = reply.get("usage") or {}
                result.prompt_tokens += int(usage.get("prompt_tokens") or 0)
                result.completion_tokens += int(usage.get("completion_tokens") or 0)
                text = reply["choices"][0]["message"]["content"] or ""
                if _native.parse_permutation(text, len(request.passages)) is None:
                    raise _Retryable(f"unparsable answer: {text[:80]!r}")
                result.answer, result.error = text, None
                return result
            except _Retryable as err:
                result.error = str(err)
                retry_after = err.retry_after
            except (RuntimeError, KeyError, IndexError, TypeError, AttributeError) as err:
                result.error = str(err) if isinstance(err, RuntimeError) else f"bad response: {err!r}"
                return result
        return result

    def rank(self, requests: Sequence[WindowRequest]) -> Iterator[Tuple[int, WindowResult]]:
        pool = ThreadPoolExecutor(max_workers=self.concurrency)
        try:
            futures = {pool.submit(self.rank_one, r): i for i, r in enumerate(requests)}
            for future in as_completed(futures):
                yield futures[future], future.result()
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
