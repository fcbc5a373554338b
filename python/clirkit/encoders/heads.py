"""What each kind of model head makes of one padded batch of a graph's output: a dense vector per text,
a sparse ``{term: weight}`` per text from per-token weights, or a matrix of token vectors per text.

One home for the head computations, used by the one-pass multi-output encoder
(:mod:`clirkit.encoders.multihead`) and meant for any single-output encoder of the same head type:

``dense``
    :func:`clirkit.encoders.pooling.pool` (``mean``/``cls``/``last``, optional L2 norm).
``token_weights`` (sparse)
    BGE-M3's sparse head: the graph gives one weight per input token (``(batch, tokens)`` or
    ``(batch, tokens, 1)``, ``relu(linear(hidden))``); a text's weight for a vocabulary entry is the
    max over the text's tokens with that id, ``relu`` applied (a no-op on a graph that already did);
    special tokens (``[CLS]``, ``</s>``, padding, unknown, ...: the tokenizer's special added tokens)
    are left out, as the reference implementation leaves them out; terms are the tokenizer's strings
    for the ids; weights of 0 are dropped.
``token_vectors`` (multi-vector)
    every non-padding token's vector, L2-normalized, as :class:`clirkit.encoders.tokens.TokenEncoder`
    stores them without a ColBERT configuration.

A model that declares no heads gives the dense and the multi-vector family from its per-token states
(:func:`token_state_heads_problem` says when it cannot).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clirkit._native import InvalidInputError
from clirkit.encoders.pooling import is_sparse_config


def float32_terms(weights: np.ndarray, ids: np.ndarray, vocabulary: Sequence[str]) -> dict[str, float]:
    """``{vocabulary[id]: weight}`` with each float32 weight as the shortest decimal that reads back as
    the same float32 (so a vector written as JSON and read again is the vector computed)."""
    decimals = np.asarray(weights, dtype=np.float32).astype(str)
    return {vocabulary[i]: float(d) for i, d in zip(np.asarray(ids).tolist(), decimals)}


def token_weight_vectors(
    output: np.ndarray,
    ids: np.ndarray,
    mask: np.ndarray,
    vocabulary: Sequence[str],
    special_ids: set[int],
) -> list[dict[str, float]]:
    """The sparse vectors of one padded batch from a token-weight head's ``output`` (see the module
    docstring)."""
    weights = output.reshape(output.shape[0], output.shape[1], -1)
    if weights.shape[2] != 1 or weights.shape[:2] != ids.shape:
        raise InvalidInputError(
            f"a token-weight head gives one weight per token, (batch, tokens) or (batch, tokens, 1); "
            f"got shape {output.shape} for a batch of shape {ids.shape}"
        )
    vectors = []
    for row_ids, row_weights, length in zip(ids, weights[:, :, 0], mask.sum(axis=1)):
        token_ids = row_ids[:length]
        token_weights = np.maximum(row_weights[:length].astype(np.float32), 0)
        keep = np.array([t not in special_ids for t in token_ids.tolist()], dtype=bool)
        token_ids, token_weights = token_ids[keep], token_weights[keep]
        terms, inverse = np.unique(token_ids, return_inverse=True)
        best = np.zeros(len(terms), dtype=np.float32)
        np.maximum.at(best, inverse, token_weights)
        nonzero = best > 0
        vectors.append(float32_terms(best[nonzero], terms[nonzero], vocabulary))
    return vectors


def token_vector_matrices(output: np.ndarray, mask: np.ndarray) -> list[np.ndarray]:
    """One ``(tokens, dim)`` L2-normalized float32 matrix per text of one padded batch: the rows of its
    non-padding tokens."""
    if output.ndim != 3:
        raise InvalidInputError(
            f"a multi-vector head gives per-token outputs (batch, tokens, dim); got shape {output.shape}"
        )
    matrices = []
    for row, length in zip(output, mask.sum(axis=1)):
        tokens = row[:length].astype(np.float32)
        norms = np.linalg.norm(tokens, axis=1, keepdims=True)
        matrices.append(np.ascontiguousarray(tokens / np.maximum(norms, 1e-12), dtype=np.float32))
    return matrices


def token_state_heads_problem(model_dir: Path, config: dict[str, Any]) -> str | None:
    """Why the per-token output of the model in ``model_dir`` cannot serve both the dense and the
    multi-vector family (None when it can; see :class:`MultiHeadEncoder`'s ``token_states``)."""
    if "heads" in config:
        return "config.json declares heads"
    if is_sparse_config(config):
        return "config.json declares a learned-sparse model"
    if config.get("colbert"):
        return "config.json's 'colbert' settings change the multi-vector inputs"
    if (model_dir / "projection.npy").is_file():
        return "projection.npy projects the multi-vector tokens"
    return None
