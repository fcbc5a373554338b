"""Pooling of a transformer's token states into one vector per text, and how ``config.json`` states it
(or that the model is a learned-sparse one, pooled by :mod:`clirkit.encoders.sparse`)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from clirkit._native import InvalidInputError

POOLINGS = ("mean", "cls", "last")


def is_sparse_config(config: dict[str, Any]) -> bool:
    """Whether config.json declares a learned-sparse (SPLADE-family) model: a ``model_type`` naming
    SPLADE, ``"sparse": true``, a ``sparse_head`` (:mod:`clirkit.encoders.sparse_heads`), or SPLADE's
    ``"activation": "log1p_relu"``."""
    model_type = config.get("model_type")
    return (
        config.get("sparse") is True
        or "sparse_head" in config
        or (isinstance(model_type, str) and "splade" in model_type.lower())
        or config.get("activation") == "log1p_relu"
    )


def pooling_from_config(config: dict[str, Any]) -> tuple[str | None, bool | None]:
    """(pooling, normalize) as stated in config.json, None where it says nothing."""
    raw = config.get("pooling")
    normalize = config.get("normalize")
    if normalize is not None and not isinstance(normalize, bool):
        raise InvalidInputError(f"config.json: 'normalize' must be true or false, got {normalize!r}")
    if raw is None:
        return None, normalize
    if not isinstance(raw, str):
        raise InvalidInputError(f"config.json: 'pooling' must be a string, got {raw!r}")
    text = raw.lower()
    found = [(m.start(), word) for word in POOLINGS for m in [re.search(rf"\b{word}\b", text)] if m]
    if not found:
        raise InvalidInputError(f"config.json: 'pooling' {raw!r} names none of {', '.join(POOLINGS)}")
    pooling = min(found)[1]
    if normalize is None and "normaliz" in text:
        normalize = True
    return pooling, normalize


def pool(hidden: np.ndarray, mask: np.ndarray, pooling: str, normalize: bool) -> np.ndarray:
    """One float32 row per sequence from the model output ``hidden`` (already pooled when 2-D) and the
    attention ``mask``, L2-normalized when ``normalize``."""
    if hidden.ndim == 2:  # the graph pools itself
        pooled = hidden
    elif pooling == "cls":
        pooled = hidden[:, 0]
    elif pooling == "last":
        pooled = hidden[np.arange(len(hidden)), mask.sum(axis=1) - 1]
    else:
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    if normalize:
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        pooled = pooled / np.maximum(norms, 1e-12)
    return np.ascontiguousarray(pooled, dtype=np.float32)
