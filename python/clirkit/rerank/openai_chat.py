"""An OpenAI-compatible ``/chat/completions`` listwise reranking backend (vLLM, SGLang, llama.cpp, ...)
with a named prompt family (:mod:`clirkit.rerank.templates`), using only the standard library: a total
deadline per request, a response size cap, no redirects, retries with exponential backoff (longer when a
429 or 503 says ``Retry-After``), bounded concurrency and token accounting."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Dict, Iterator, Optional, Sequence, Tuple

from clirkit import _native
from clirkit._native import InvalidInputError
from clirkit.rerank.backends import Backend, WindowRequest, WindowResult
from clirkit.rerank.http import Attempts, HttpFailure, ModelClient, UnusableAnswer, scrub
from clirkit.rerank.templates import TEMPLATES, Truncate, first_token_permutation, split_reasoning

# Re-exported: RankGPT's prompt was first defined here.
from clirkit.rerank.templates import rankgpt_messages  # noqa: F401  isort: skip

__all__ = ["OpenAIChatBackend", "ServerModel", "rankgpt_messages"]

#: Default cap on one response's size: a ranking answer (or a reasoning one) is far smaller.
MAX_RESPONSE_BYTES = 8 * 1024 * 1024


class ServerModel:
    """What every backend of an OpenAI-compatible server shares: the guarded client with its retries,
    the concurrency, the token budgets of prompt texts and the extra request fields.

    Args:
        base_url: the server's API root, e.g. ``http://127.0.0.1:8000/v1``.
        model: the model name sent in each request (and part of the cache identity).
        api_key: bearer token (default: ``$OPENAI_API_KEY``, none if unset); never stored or printed.
        timeout: seconds per request, all of it (connect, send, answer).
        retries: extra attempts after a timeout, connection error, HTTP 401/408/429/5xx, malformed
            response, or an unusable answer; other HTTP errors fail at once.
        backoff: seconds before the first retry, doubled each time; a 429 or 503 answer's
            ``Retry-After`` (seconds or a date) makes the wait that long if it is longer.
        max_backoff: the longest wait before a retry, whatever the doubling or ``Retry-After``.
        concurrency: requests in flight at once.
        truncate: ``truncate(text, is_query)`` applied to the query and each passage first
            (token-aware truncation, :mod:`clirkit.rerank.prompt_budget`); ``truncate_identity``
            names it in the cache identity.
        extra_body: fields merged into each request last, e.g.
            ``{"chat_template_kwargs": {"enable_thinking": true}}``.
        max_response_bytes: a larger response fails its request.
    """

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
        truncate: Optional[Truncate] = None,
        truncate_identity: str = "",
        extra_body: Optional[Dict[str, object]] = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        if concurrency < 1 or retries < 0 or timeout <= 0 or max_backoff < 0 or max_response_bytes < 1:
            raise InvalidInputError(
                "concurrency >= 1, retries >= 0, timeout > 0, max_backoff >= 0 and max_response_bytes >= 1 "
                "are required"
            )
        self.model = model
        self.client = ModelClient(
            base_url,
            api_key if api_key is not None else os.environ.get("OPENAI_API_KEY"),
            timeout,
            retries,
            backoff,
            max_backoff,
            max_response_bytes,
        )
        self.concurrency = concurrency
        self.truncate = truncate
        self.truncate_identity = truncate_identity
        self.extra_body = dict(extra_body or {})

    def settings_identity(self) -> str:
        """The model, the extra fields and the truncation, for cache identities (the server's address
        is left out: the same model answers the same wherever it runs)."""
        return f"{self.model}:{json.dumps(self.extra_body, sort_keys=True)}{self.truncate_identity}"


class OpenAIChatBackend(Backend, ServerModel):
    """An OpenAI-compatible chat-completions client ranking windows with a prompt family.

    Args:
        base_url, model: the server and the model (see :class:`ServerModel` for the other options:
            ``api_key``, ``timeout``, ``retries``, ``backoff``, ``max_backoff``, ``concurrency``,
            ``truncate``, ``truncate_identity``, ``extra_body``, ``max_response_bytes``).
        template: the prompt family, ``rankgpt``, ``rankzephyr`` or ``first``.
        max_words: passages are cut to this many words (RankGPT and rank_llm use 300).
        temperature, max_tokens: sent with each request (FIRST always asks for one token).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        template: str = "rankgpt",
        max_words: int = 300,
        temperature: float = 0.0,
        max_tokens: Optional[int] = None,
        **server_options,
    ) -> None:
        if template not in TEMPLATES:
            raise InvalidInputError(f"unknown template '{template}': one of {', '.join(TEMPLATES)}")
        ServerModel.__init__(self, base_url, model, **server_options)
        self.template = TEMPLATES[template]
        self.url = self.client.base_url + "/chat/completions"
        self.max_words = max_words
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.identity = (
            f"openai-chat:{self.template.version}:words={max_words}:t={temperature}:max_tokens={max_tokens}"
            f":{self.settings_identity()}"
        )

    def payload(self, request: WindowRequest) -> Dict[str, object]:
        """The request body for one window."""
        messages = self.template.messages(request.query, request.passages, self.max_words, self.truncate)
        return self.template.payload(self.model, messages, self.temperature, self.max_tokens, self.extra_body)

    def _reader(self, num: int, result: WindowResult):
        def read(reply: dict):
            choice = reply["choices"][0]
            if self.template.first_token:
                content = choice["logprobs"]["content"]
                top = content[0]["top_logprobs"] if content else []
                order = first_token_permutation(top, num)
                if order is None:
                    raise UnusableAnswer("no identifier among the first token's top log-probabilities")
                return order
            message = choice["message"]
            text = message.get("content") or ""
            if not isinstance(text, str):
                raise TypeError("message content is not text")
            reasoning, answer = split_reasoning(text)
            served = message.get("reasoning_content") or message.get("reasoning")
            if isinstance(served, str) and served.strip():
                reasoning = served if reasoning is None else served + "\n" + reasoning
            result.reasoning = reasoning
            if _native.parse_permutation(answer, num) is None:
                raise UnusableAnswer(f"unparsable answer: {answer[:80]!r}")
            return answer

        return read

    def rank_one(self, request: WindowRequest) -> WindowResult:
        """Ask the model to rank one window, retrying as configured."""
        result = WindowResult(None, calls=0)
        attempts = Attempts()
        try:
            result.answer = self.client.ask(
                "/chat/completions",
                self.payload(request),
                self._reader(len(request.passages), result),
                attempts,
            )
        except HttpFailure as err:
            result.error, result.transient = str(err), err.transient
        except UnusableAnswer as err:
            result.error = str(err)
        result.calls = attempts.calls
        result.prompt_tokens, result.completion_tokens = attempts.prompt_tokens, attempts.completion_tokens
        if result.error is not None:
            result.error = scrub(result.error, self.client.api_key)
        return result

    def rank(self, requests: Sequence[WindowRequest]) -> Iterator[Tuple[int, WindowResult]]:
        yield from concurrently(self.rank_one, requests, self.concurrency)


def concurrently(work, items: Sequence, concurrency: int) -> Iterator[Tuple[int, object]]:
    """``(index, work(item))`` for every item, as they finish, ``concurrency`` at a time."""
    pool = ThreadPoolExecutor(max_workers=concurrency)
    try:
        futures = {pool.submit(work, item): i for i, item in enumerate(items)}
        for future in as_completed(futures):
            yield futures[future], future.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
