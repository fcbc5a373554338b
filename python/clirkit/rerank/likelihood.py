"""LLM-likelihood pointwise scorers over an OpenAI-compatible ``/completions`` endpoint (vLLM,
llama.cpp's server, ...), for :func:`clirkit.rerank.pointwise.rerank_pointwise`:

- :class:`QueryLikelihoodScorer`: UPR (Sachan et al., 2022), score = log P(query | passage), the sum
  of the query tokens' prompt log-probabilities, read with ``echo`` and ``logprobs``; the query's
  tokens are found by their text offsets;
- :class:`YesNoScorer`: Qwen3-Reranker's prompt; score = log P("yes") - log(P("yes") + P("no")) for
  the next token, from its top log-probabilities.

One request per passage, ``concurrency`` in flight; the request safety of
:mod:`clirkit.rerank.http` (deadline, size cap, no redirects, key scrubbed) applies.
"""

from __future__ import annotations

import json
import math
from typing import Dict, List, Sequence

from clirkit.rerank.http import Attempts, HttpFailure, UnusableAnswer, scrub
from clirkit.rerank.logprobs import checked_logprob
from clirkit.rerank.openai_chat import ServerModel, concurrently
from clirkit.rerank.pointwise import PassageScore, Scorer

__all__ = [
    "QWEN3_RERANKER_INSTRUCTION",
    "QueryLikelihoodScorer",
    "YesNoScorer",
    "query_likelihood_prompt",
    "query_log_likelihood",
    "qwen3_reranker_prompt",
    "yes_no_log_odds",
]

#: UPR's prompt, the passage first, the question to be scored last.
_UPR_PREFIX = "Passage: {passage}\nPlease write a question based on this passage.\nQuestion:"


def query_likelihood_prompt(query: str, passage: str) -> tuple:
    """``(prompt, query_start)``: UPR's prompt with the query appended after a space, and the
    character offset at which the query's tokens begin (the space before it included, as
    tokenizers attach it to the first word)."""
    prefix = _UPR_PREFIX.format(passage=passage)
    return prefix + " " + query, len(prefix)


def query_log_likelihood(logprobs: dict, query_start: int, prompt_length: int) -> float:
    """The sum of the log-probabilities of the prompt tokens starting in ``[query_start,
    prompt_length)`` from a completions reply's ``logprobs`` (``tokens``, ``token_logprobs``,
    ``text_offset``); tokens past the prompt (the generated one) are left out."""
    offsets = logprobs["text_offset"]
    values = logprobs["token_logprobs"]
    if len(offsets) != len(values):
        raise ValueError("text_offset and token_logprobs differ in length")
    total, counted = 0.0, 0
    for offset, value in zip(offsets, values):
        if query_start <= offset < prompt_length:
            total += checked_logprob(value, f"query token at offset {offset}")
            counted += 1
    if counted == 0:
        raise UnusableAnswer("no prompt token at the query's offsets (does the server echo the prompt?)")
    if not math.isfinite(total):  # a sum of finite values below -1.8e308
        raise ValueError(f"the query's log-probability {total} is not finite")
    return total


# Qwen3-Reranker's prompt (its model card's format_instruction, prefix and suffix), verbatim.
QWEN3_RERANKER_INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"
_QWEN3_PREFIX = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
    'Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n'
)
_QWEN3_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


def qwen3_reranker_prompt(query: str, passage: str, instruction: str = QWEN3_RERANKER_INSTRUCTION) -> str:
    """Qwen3-Reranker's prompt for one (query, passage) pair."""
    return f"{_QWEN3_PREFIX}<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {passage}{_QWEN3_SUFFIX}"


def yes_no_log_odds(top_logprobs: object) -> float:
    """log P(yes) - log(P(yes) + P("no")) of the next token from its top log-probabilities: a
    ``{token: logprob}`` mapping (completions) or a list of ``{"token", "logprob"}`` (chat). Tokens
    are matched after stripping spaces, case-sensitively ("yes", "no"), probabilities of equal
    tokens added. A word absent from the top list counts as far less likely than any listed. A
    log-probability that is not finite and at most 0 makes the reply unusable (ValueError)."""
    if isinstance(top_logprobs, dict):
        pairs = list(top_logprobs.items())
    elif isinstance(top_logprobs, list):
        pairs = [(e.get("token"), e.get("logprob")) for e in top_logprobs if isinstance(e, dict)]
    else:
        raise TypeError("top log-probabilities are neither a mapping nor a list")
    mass = {"yes": 0.0, "no": 0.0}
    floor = 0.0
    for token, value in pairs:
        logprob = checked_logprob(value, f"top token {token!r}")
        floor = min(floor, logprob)
        word = str(token).strip()
        if word in mass:
            mass[word] += math.exp(logprob)
    if mass["yes"] > 1.0 + 1e-6 or mass["no"] > 1.0 + 1e-6:
        raise ValueError("the probabilities of 'yes' or of 'no' add up to more than 1")
    if mass["yes"] == 0.0 and mass["no"] == 0.0:
        raise UnusableAnswer("neither 'yes' nor 'no' among the next token's top log-probabilities")
    # An absent word is rarer than the least likely listed token: bound it an order of magnitude below.
    absent = math.exp(floor) / 10.0
    yes, no = mass["yes"] or absent, mass["no"] or absent
    return math.log(yes) - math.log(yes + no)


class _CompletionsScorer(Scorer, ServerModel):
    """What the completions scorers share; options as :class:`~clirkit.rerank.openai_chat.ServerModel`."""

    kind = "completions"
    version = ""

    def __init__(self, base_url: str, model: str, **server_options) -> None:
        ServerModel.__init__(self, base_url, model, **server_options)
        self.identity = f"{self.kind}:{self.version}:{self.settings_identity()}"

    def request(self, query: str, passage: str):
        """``(payload, read)`` for one pair: ``read(reply)`` gives the score."""
        raise NotImplementedError

    def score_one(self, pair: Sequence[str]) -> PassageScore:
        query, passage = pair
        if self.truncate is not None:
            query, passage = self.truncate(query, True), self.truncate(passage, False)
        payload, read = self.request(query, passage)
        payload.update(self.extra_body)
        attempts = Attempts()
        result = PassageScore(None)
        try:
            result.value = float(self.client.ask("/completions", payload, read, attempts))
        except HttpFailure as err:
            result.error, result.transient = scrub(str(err), self.client.api_key), err.transient
        except UnusableAnswer as err:
            result.error = scrub(str(err), self.client.api_key)
        result.calls = attempts.calls
        result.prompt_tokens, result.completion_tokens = attempts.prompt_tokens, attempts.completion_tokens
        return result

    def score(self, query: str, passages: List[str]) -> List[PassageScore]:
        results: List[PassageScore] = [PassageScore(None)] * len(passages)
        for i, result in concurrently(self.score_one, [(query, p) for p in passages], self.concurrency):
            results[i] = result  # type: ignore[assignment]
        return results


class QueryLikelihoodScorer(_CompletionsScorer):
    """UPR query likelihood: score = log P(query | passage) under the model at ``base_url`` (options as
    :class:`~clirkit.rerank.openai_chat.ServerModel`).

    The request: UPR's prompt with the query appended, ``echo: true``, ``logprobs: 1``,
    ``max_tokens: 1`` (some servers, llama.cpp's among them, read 0 as "no limit"; the one
    generated token lies past the prompt and is not counted), greedy."""

    kind = "query-likelihood"
    version = "upr-v1"

    def request(self, query: str, passage: str):
        prompt, query_start = query_likelihood_prompt(query, passage)
        payload: Dict[str, object] = {
            "model": self.model,
            "prompt": prompt,
            "max_tokens": 1,
            "temperature": 0.0,
            "echo": True,
            "logprobs": 1,
        }

        def read(reply: dict) -> float:
            return query_log_likelihood(reply["choices"][0]["logprobs"], query_start, len(prompt))

        return payload, read


class YesNoScorer(_CompletionsScorer):
    """Qwen3-Reranker's yes/no relevance: score = log P(yes) - log(P(yes) + P(no)) for the next token
    after its prompt (``max_tokens: 1``, ``logprobs: 20``, greedy), ``instruction`` in the prompt."""

    kind = "yes-no"
    version = "qwen3-reranker-v1"

    def __init__(
        self, base_url: str, model: str, instruction: str = QWEN3_RERANKER_INSTRUCTION, **server_options
    ) -> None:
        super().__init__(base_url, model, **server_options)
        self.instruction = instruction
        self.identity += f":instruction={json.dumps(instruction)}"

    def request(self, query: str, passage: str):
        payload: Dict[str, object] = {
            "model": self.model,
            "prompt": qwen3_reranker_prompt(query, passage, self.instruction),
            "max_tokens": 1,
            "temperature": 0.0,
            "logprobs": 20,
        }

        def read(reply: dict) -> float:
            return yes_no_log_odds(reply["choices"][0]["logprobs"]["top_logprobs"][0])

        return payload, read
