"""Token-aware truncation of text for prompts and model inputs, in any script."""

from __future__ import annotations

import re
from typing import Any

from clirkit._native import InvalidInputError

# Scripts written without spaces between words, where each character counts as a token: CJK ideographs
# (with extensions and compatibility forms), kana, hangul, Thai, Lao, Khmer and Myanmar.
_UNSPACED = (
    "\u0e00-\u0e7f\u0e80-\u0eff\u1000-\u109f\u1780-\u17ff\u1100-\u11ff\u3040-\u30ff\u31f0-\u31ff"
    "\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
)
_UNITS = re.compile(f"[{_UNSPACED}]|[^\\s{_UNSPACED}]+")


def truncate_text(text: str, max_tokens: int, tokenizer: Any = None) -> str:
    """``text`` cut to at most ``max_tokens`` tokens, at a token boundary (whole text when it fits).

    With ``tokenizer`` (a Hugging Face ``tokenizers.Tokenizer``, e.g. from ``tokenizer.json``), tokens
    are the tokenizer's, special tokens not counted, and the text is cut where the first dropped token
    starts (shortened further in the rare case that the cut text tokenizes to more tokens).

    Without one, a script-aware budget: every character of a script written without spaces (CJK
    ideographs, kana, hangul, Thai, Lao, Khmer, Myanmar) counts as one token, and every other run of
    non-space characters (a word in Latin, Cyrillic, Arabic, Devanagari…) as one token. Real tokenizers
    give about one token per such character and one or more per word, so the cut text is at most about
    ``max_tokens`` model tokens for CJK and Thai alike. Trailing whitespace is dropped from a cut text.
    """
    if max_tokens < 0:
        raise InvalidInputError(f"max_tokens must be at least 0, got {max_tokens}")
    if tokenizer is None:
        return _truncate_by_script(text, max_tokens)
    budget = max_tokens
    while True:
        offsets = _token_offsets(tokenizer, text, budget)
        if len(offsets) <= max_tokens:
            return text
        text = text[: offsets[budget][0]].rstrip() if budget > 0 else ""
        # Re-tokenizing a cut word can give more pieces than it had inside the whole text.
        budget -= 1


def _token_offsets(tokenizer: Any, text: str, budget: int) -> list[tuple[int, int]]:
    """Offsets of ``text``'s tokens, at least the first ``budget + 1`` of them when there are that many.
    A tokenizer.json may carry its own truncation: when it keeps more than ``budget`` tokens its output
    serves, otherwise an untruncated copy counts (copying a large vocabulary takes a while). Padding a
    tokenizer.json asks for is not counted: only tokens of the text (attention mask 1) are."""
    truncation = tokenizer.truncation
    if truncation is None or truncation["max_length"] > budget:
        encoding = tokenizer.encode(text, add_special_tokens=False)
    else:
        untruncated = type(tokenizer).from_str(tokenizer.to_str())
        untruncated.no_truncation()
        encoding = untruncated.encode(text, add_special_tokens=False)
    return [offset for offset, real in zip(encoding.offsets, encoding.attention_mask) if real]


def _truncate_by_script(text: str, max_tokens: int) -> str:
    for count, unit in enumerate(_UNITS.finditer(text)):
        if count == max_tokens:
            return text[: unit.start()].rstrip()
    return text
