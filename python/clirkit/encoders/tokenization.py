"""Tokenization for the encoders: a truncating tokenizer for model inputs, an untruncated one for cutting
documents into token windows, and padded batches."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, TypeVar, Union

import numpy as np

from clirkit._native import InvalidInputError
from clirkit._progress import advance_current

T = TypeVar("T")

#: Characters allowed per token of ``max_length`` before a text is tokenized (see
#: :func:`encode_truncated`).
CHARS_PER_TOKEN_BOUND = 32

TextInput = Union[str, tuple[str, str]]


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


def bounded_text(text: str, max_length: int) -> str:
    """``text`` cut to ``max_length * CHARS_PER_TOKEN_BOUND`` characters, what the tokenizer is handed
    first by :func:`encode_truncated`."""
    return text[: max_length * CHARS_PER_TOKEN_BOUND]


def encode_truncated(tokenizer: Any, inputs: Sequence[TextInput], max_length: int) -> list[Any]:
    """``tokenizer.encode_batch(inputs)`` for a tokenizer truncating at ``max_length`` tokens, without
    tokenizing megabytes that truncation throws away: each text (the second of a pair) is first cut to
    :func:`bounded_text`, ``CHARS_PER_TOKEN_BOUND`` (32) characters per token.

    The cut never changes the encoding for real tokenizers. Vocabulary tokens span a few characters
    (WordPiece, BPE and Unigram pieces rarely exceed 20), so a cut text still overflows ``max_length``
    by far, and tokenization is local: pre-tokenizers split at whitespace and punctuation, and merges or
    Viterbi segmentation within a piece do not reach thousands of characters back. Where a text defeats
    this (long whitespace runs, one ``[UNK]`` for a long word, characters the normalizer drops), the
    kept tokens reach past half the cut or do not fill ``max_length``, and that text is tokenized whole.
    """
    bound = max_length * CHARS_PER_TOKEN_BOUND
    cut_inputs: list[TextInput] = [
        (item[0], bounded_text(item[1], max_length))
        if isinstance(item, tuple)
        else bounded_text(item, max_length)
        for item in inputs
    ]
    encodings = tokenizer.encode_batch(cut_inputs)
    for i, item in enumerate(inputs):
        text, sequence = (item[1], 1) if isinstance(item, tuple) else (item, 0)
        if len(text) <= bound:
            continue
        encoding = encodings[i]
        kept_end = max(
            (end for seq, (_, end) in zip(encoding.sequence_ids, encoding.offsets) if seq == sequence),
            default=0,
        )
        if not encoding.overflowing or kept_end > bound // 2:
            encodings[i] = tokenizer.encode(*item) if isinstance(item, tuple) else tokenizer.encode(item)
    return encodings


def map_batches(
    lengths: Sequence[int],
    size: int,
    workers: int,
    run: Callable[[np.ndarray], T],
    max_tokens: int | None = None,
) -> tuple[list[np.ndarray], list[T]]:
    """Form batches longest first (each then padded to its own longest input) and apply
    ``run(positions)`` to each, concurrently over ``workers`` threads: (the input positions of each
    batch, what ``run`` returned for it). See :func:`length_batches` for ``size`` and ``max_tokens``.
    Each finished batch advances the caller's current progress bar (:func:`clirkit._progress.counting`)."""
    batches = length_batches(lengths, size, max_tokens)
    results: list[T] = []
    if workers > 1 and len(batches) > 1:
        # onnxruntime releases the GIL while it runs; one session serves concurrent calls.
        with ThreadPoolExecutor(min(workers, len(batches))) as executor:
            for batch, result in zip(batches, executor.map(run, batches)):
                results.append(result)
                advance_current(len(batch))  # here, in the caller's thread and context
        return batches, results
    for batch in batches:
        results.append(run(batch))
        advance_current(len(batch))
    return batches, results


def length_batches(lengths: Sequence[int], size: int, max_tokens: int | None = None) -> list[np.ndarray]:
    """Positions of ``lengths`` in batches, longest first: at most ``size`` inputs each and, with
    ``max_tokens``, at most that many tokens once padded (rows × the batch's longest input; an input
    longer than the budget goes alone). Sorted lengths make the padding small, and the token budget
    makes batches of short texts wide and batches of long ones narrow, so every call does about the same
    work and a batch's memory is bounded whatever the lengths."""
    # Stable sort, longest first: the first batch is the biggest, so memory problems show at once.
    order = np.argsort(-np.asarray(lengths, dtype=np.int64), kind="stable")
    if max_tokens is None:
        return [order[start : start + size] for start in range(0, len(order), size)]
    batches = []
    start = 0
    while start < len(order):
        width = max(int(lengths[order[start]]), 1)
        rows = max(1, min(size, max_tokens // width))
        batches.append(order[start : start + rows])
        start += rows
    return batches


def padded_type_ids(encodings: Sequence[Any], batch: np.ndarray) -> np.ndarray:
    """The token type ids (segment ids of a pair) of the encodings at positions ``batch``, padded with 0
    to the length of the first, as :func:`padded_batch` pads ids."""
    width = len(encodings[batch[0]].ids)
    type_ids = np.zeros((len(batch), width), dtype=np.int64)
    for row, i in enumerate(batch):
        type_ids[row, : len(encodings[i].type_ids)] = encodings[i].type_ids
    return type_ids
