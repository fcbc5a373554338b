"""Token budgets for the texts put into prompts: passages and queries cut by
:func:`clirkit.encoders.truncation.truncate_text`, with the model's tokenizer (``tokenizer.json``)
when one is given, or its script-aware estimate otherwise (so CJK and Thai text is cut as Latin
text is, unlike a count of whitespace-separated words)."""

from __future__ import annotations

import hashlib
import os
from typing import Optional, Tuple

from clirkit._native import InvalidInputError
from clirkit.rerank.templates import Truncate

__all__ = ["prompt_truncation"]


def prompt_truncation(
    passage_tokens: Optional[int], query_tokens: Optional[int], tokenizer_path: Optional[str] = None
) -> Tuple[Optional[Truncate], str]:
    """``(truncate, identity)``: ``truncate(text, is_query)`` cutting passages to ``passage_tokens``
    and queries to ``query_tokens`` (None: left whole), and the text to append to a backend's cache
    identity (the budgets and a digest of the tokenizer file). ``(None, "")`` with neither budget."""
    for name, value in (("passage_tokens", passage_tokens), ("query_tokens", query_tokens)):
        if value is not None and value < 1:
            raise InvalidInputError(f"{name} must be at least 1")
    if passage_tokens is None and query_tokens is None:
        if tokenizer_path is not None:
            raise InvalidInputError("a tokenizer is used only with a passage or query token budget")
        return None, ""
    try:
        from clirkit.encoders.truncation import truncate_text
    except ImportError as err:
        raise InvalidInputError(f"token budgets need clirkit.encoders.truncation: {err}") from err
    tokenizer = None
    tokenizer_digest = "script-aware"
    if tokenizer_path is not None:
        if not os.path.isfile(tokenizer_path):
            raise InvalidInputError(f"tokenizer file '{tokenizer_path}' does not exist")
        try:
            from tokenizers import Tokenizer
        except ImportError as err:
            raise InvalidInputError(f"--tokenizer needs the tokenizers package: {err}") from err
        with open(tokenizer_path, "rb") as f:
            tokenizer_digest = hashlib.sha256(f.read()).hexdigest()[:16]
        tokenizer = Tokenizer.from_file(tokenizer_path)
        tokenizer.no_truncation()  # count every token of a text, whatever the file's own settings

    def truncate(text: str, is_query: bool) -> str:
        budget = query_tokens if is_query else passage_tokens
        return text if budget is None else truncate_text(text, budget, tokenizer=tokenizer)

    return truncate, f":tokens=p{passage_tokens},q{query_tokens},{tokenizer_digest}"
