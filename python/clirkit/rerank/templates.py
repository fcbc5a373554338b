"""Listwise prompt families, by name, and the reading of their answers.

- ``rankgpt``: RankGPT's multi-turn chat prompt (Sun et al., 2023), the answer a generated
  permutation ``[3] > [1] > ...``;
- ``rankzephyr``: RankZephyr's single-turn prompt as castorini/rank_llm sends it
  (``rank_zephyr_template.yaml``: system message, then one user turn of prefix, numbered passages
  and suffix; greedy decoding; ``chat_template_kwargs`` turning thinking off);
- ``first``: FIRST (Reddy et al., 2024): RankZephyr's prompt with alphabetic identifiers
  (``rank_zephyr_alpha_template.yaml``) and a single generated token; the ranking is read from
  that token's top log-probabilities over the identifiers ``A``, ``B``, ...

Reasoning models think before they answer: :func:`split_reasoning` takes the answer from after
``</think>`` or an explicit answer marker, so the reasoning never reaches the permutation parser;
the reasoning is kept (in the cache) for inspection.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from clirkit.rerank.logprobs import checked_logprob

__all__ = [
    "TEMPLATES",
    "ListwiseTemplate",
    "first_token_permutation",
    "rankgpt_messages",
    "rankzephyr_messages",
    "split_reasoning",
]

Truncate = Callable[[str, bool], str]
"""``truncate(text, is_query)``: the text cut to the prompt's budget."""


def _words(text: str, max_words: int) -> str:
    return " ".join(text.split()[:max_words])


def rankgpt_messages(
    query: str, passages: Sequence[str], max_words: int = 300, truncate: Optional[Truncate] = None
) -> List[Dict[str, str]]:
    """RankGPT's chat prompt (``create_permutation_instruction``): passages numbered [1]..[n] as
    alternating user/assistant turns, each cut to ``max_words`` words (after ``truncate``, if given)."""
    if truncate is not None:
        query = truncate(query, True)
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
        text = passage.replace("Title: Content: ", "").strip()
        if truncate is not None:
            text = truncate(text, False)
        messages.append({"role": "user", "content": f"[{rank}] {_words(text, max_words)}"})
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


# rank_llm's rank_zephyr_template.yaml and rank_zephyr_alpha_template.yaml, verbatim.
_RANKLLM_SYSTEM = (
    "You are RankLLM, an intelligent assistant that can rank passages based on their relevancy to the query"
)
_ZEPHYR_PREFIX = (
    "I will provide you with {num} passages, each indicated by a numerical identifier []. "
    "Rank the passages based on their relevance to the search query: {query}.\n"
)
_ZEPHYR_ALPHA_PREFIX = (
    "I will provide you with {num} passages, each indicated by an alphabetical identifier []. "
    "Rank the passages based on their relevance to the search query: {query}.\n"
)
_ZEPHYR_SUFFIX = (
    "Search Query: {query}.\n"
    "Rank the {num} passages above based on their relevance to the search query. All the passages should be "
    "included and listed using identifiers, in descending order of relevance. The output format should be "
    "[] > [], e.g., {example}, Answer concisely and directly and only respond with the ranking results, "
    "do not say any word or explain."
)


def _bracketed_numbers_to_parentheses(text: str) -> str:
    """rank_llm's ``_replace_number``: ``[3]`` in a query or passage becomes ``(3)``, so it cannot
    be taken for an identifier."""
    return re.sub(r"\[(\d+)\]", r"(\1)", text)


def rankzephyr_messages(
    query: str,
    passages: Sequence[str],
    max_words: int = 300,
    alphabetic: bool = False,
    truncate: Optional[Truncate] = None,
) -> List[Dict[str, str]]:
    """RankZephyr's prompt (``alphabetic``: FIRST's, identifiers ``[A]``, ``[B]``, ...) as rank_llm's
    ``SingleTurnListwiseInferenceHandler`` builds it: passages stripped and cut to ``max_words``
    words, bracketed numbers in query and passages turned into parentheses."""
    if truncate is not None:
        query = truncate(query, True)
    query = _bracketed_numbers_to_parentheses(query)
    num = len(passages)
    prefix = (_ZEPHYR_ALPHA_PREFIX if alphabetic else _ZEPHYR_PREFIX).format(num=num, query=query)
    body = []
    for rank, passage in enumerate(passages, start=1):
        text = passage.strip()
        if truncate is not None:
            text = truncate(text, False)
        identifier = chr(ord("A") + rank - 1) if alphabetic else str(rank)
        body.append(f"[{identifier}] {_bracketed_numbers_to_parentheses(_words(text, max_words))}\n")
    example = "[B] > [A]" if alphabetic else "[2] > [1]"
    suffix = _ZEPHYR_SUFFIX.format(num=num, query=query, example=example)
    return [
        {"role": "system", "content": _RANKLLM_SYSTEM},
        {"role": "user", "content": prefix + "".join(body) + suffix},
    ]


_THINK_CLOSE = re.compile(r"</think\s*>", re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think\s*>", re.IGNORECASE)
_ANSWER_TAG = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.IGNORECASE | re.DOTALL)
_ANSWER_MARKER = re.compile(r"(?:final\s+answer|final\s+ranking|answer|ranking)\s*[:：]", re.IGNORECASE)


def split_reasoning(text: str) -> Tuple[Optional[str], str]:
    """``(reasoning, answer)`` of a model's output: the answer is what follows ``</think>`` (an
    unclosed ``<think>`` is all reasoning), then inside ``<answer>…</answer>`` or after the last
    ``Answer:``/``Final answer:``/``Ranking:`` marker; reasoning is None when there was none."""
    reasoning: List[str] = []
    closes = list(_THINK_CLOSE.finditer(text))
    close = closes[-1] if closes else None
    if close is not None:
        reasoning.append(_THINK_OPEN.sub("", text[: close.start()], count=1).strip())
        text = text[close.end() :]
    elif _THINK_OPEN.search(text):
        return _THINK_OPEN.sub("", text, count=1).strip(), ""
    tags = list(_ANSWER_TAG.finditer(text))
    if tags:
        before = text[: tags[-1].start()].strip()
        if before:
            reasoning.append(before)
        text = tags[-1].group(1)
    else:
        markers = list(_ANSWER_MARKER.finditer(text))
        if markers and markers[-1].start() > 0:
            before = text[: markers[-1].start()].strip()
            if before:
                reasoning.append(before)
            text = text[markers[-1].end() :]
        elif markers:
            text = text[markers[-1].end() :]
    return ("\n".join(reasoning) if reasoning else None), text.strip()


def first_token_permutation(top_logprobs: Sequence[Dict[str, object]], num: int) -> Optional[List[int]]:
    """FIRST's ranking from the first generated token's top log-probabilities: identifiers ``A``..
    (``num`` of them) by descending log-probability (a token's surrounding spaces and brackets
    ignored; the best of equal identifiers kept, as rank_llm's ``_evaluate_logits`` does); positions
    1-based. None when no identifier is among them; ValueError when an identifier's log-probability is
    not finite and at most 0."""
    best: Dict[int, float] = {}
    for entry in top_logprobs:
        if not isinstance(entry, dict):
            continue
        token = str(entry.get("token", "")).strip().strip("[]").strip()
        if len(token) != 1 or not ("A" <= token <= "Z"):
            continue
        logprob = checked_logprob(entry.get("logprob"), f"identifier {token}")
        position = ord(token) - ord("A") + 1
        if position <= num:
            best[position] = max(best.get(position, -math.inf), logprob)
    if not best:
        return None
    return sorted(best, key=lambda p: (-best[p], p))


@dataclass(frozen=True)
class ListwiseTemplate:
    """A named prompt family: how a window becomes a chat request and how its answer is read.

    ``first_token``: the answer is read from the first generated token's top log-probabilities
    (FIRST) rather than from generated text."""

    name: str
    version: str
    first_token: bool = False

    def messages(
        self, query: str, passages: Sequence[str], max_words: int, truncate: Optional[Truncate]
    ) -> List[Dict[str, str]]:
        if self.name == "rankgpt":
            return rankgpt_messages(query, passages, max_words, truncate)
        return rankzephyr_messages(query, passages, max_words, alphabetic=self.first_token, truncate=truncate)

    def payload(
        self,
        model: str,
        messages: List[Dict[str, str]],
        temperature: float,
        max_tokens: Optional[int],
        extra_body: Dict[str, object],
    ) -> Dict[str, object]:
        """The request body. RankZephyr and FIRST as rank_llm's OpenAI-compatible path sends them:
        ``max_tokens`` (FIRST: 1), greedy, thinking off through ``chat_template_kwargs``; FIRST also
        asks for the first token's top log-probabilities."""
        payload: Dict[str, object] = {"model": model, "messages": messages, "temperature": temperature}
        if self.first_token:
            payload["max_tokens"] = 1
            payload["logprobs"] = True
            payload["top_logprobs"] = 20
        elif max_tokens is not None:
            payload["max_tokens"] = max_tokens
        if self.name != "rankgpt":
            payload["chat_template_kwargs"] = {"enable_thinking": False}
        payload.update(extra_body)
        return payload


TEMPLATES: Dict[str, ListwiseTemplate] = {
    "rankgpt": ListwiseTemplate("rankgpt", "rankgpt-v1"),
    "rankzephyr": ListwiseTemplate("rankzephyr", "rankzephyr-v1"),
    "first": ListwiseTemplate("first", "first-v1", first_token=True),
}
