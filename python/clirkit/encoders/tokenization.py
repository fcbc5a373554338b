"""Tokenization for the encoders: a truncating tokenizer for model inputs, an untruncated one for cutting
documents into token windows, and padded batches."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clirkit._native import InvalidInputError


def load_tokenizers(tokenizers: Any, path: Path, max_length: int) -> tuple[Any, Any]:
    """``tokenizer.json`` twice: truncating at ``max_length`` (model inputs) and untruncated (the
    passage splitter must see every token of a long document); neither pads."""
    tokenizer = tokenizers.Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length)
    splitter = tokenizers.Tokenizer.from_file(str(path))
    splitter.no_padding()
    splitter.no_truncation()
    return tokenizer, splitter


def padded_batch(encodings: Sequence[Any], batch: np.ndarray, pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """(input ids, attention mask) of the encodings at positions ``batch``, padded with ``pad_id`` to the
    length of the first (the longest: batches are formed longest first)."""
    width = len(encodings[batch[0]].ids)
    ids = np.full((len(batch), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(batch), width), dtype=np.int64)
    for row, i in enumerate(batch):
        e = encodings[i]
        ids[row, : len(e.ids)] = e.ids
        mask[row, : len(e.ids)] = 1
    return ids, mask


def token_windows(splitter: Any, text: str, size: int, stride: int) -> list[str]:
    """Split ``text`` into passages of at most ``size`` tokens starting every ``stride`` tokens
    (special tokens not counted), cut at token boundaries in the original text. A text that fits in one
    window comes back whole (an empty text gives one empty passage)."""
    if size < 1 or stride < 1:
        raise InvalidInputError(f"passage windows need size >= 1 and stride >= 1, got {size}:{stride}")
    offsets = splitter.encode(text, add_special_tokens=False).offsets
    if len(offsets) <= size:
        return [text]
    passages = []
    for start in range(0, len(offsets), stride):
        end = min(start + size, len(offsets))
        passages.append(text[offsets[start][0] : offsets[end - 1][1]])
        if end == len(offsets):
            break
    return passages
