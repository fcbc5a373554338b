"""An OpenAI-compatible ``/chat/completions`` reranking backend (vLLM, SGLang, ...) with RankGPT's prompt,
using only the standard library: timeouts, retries with exponential backoff (longer when a 429 or 503
says ``Retry-After``), bounded concurrency and token accounting."""

from __future__ import annotations

import datetime
import email.utils
import json
import os
import socket
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from clirkit import _native
from clirkit._native import InvalidInputError
from clirkit.rerank.backends import Backend, WindowRequest, WindowResult

__all__ = ["OpenAIChatBackend", "rankgpt_messages"]


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
            raise InvalidInputError(
                "concurrency >= 1, retries >= 0, timeout > 0 and max_backoff >= 0 are required"
            )
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
