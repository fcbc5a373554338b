"""Cross-encoder scoring: an ONNX sequence-classification model reads a (query, passage) pair and gives
one relevance score.

A model is a directory holding ``model.onnx`` and ``tokenizer.json``, and optionally ``config.json``.
Each pair is encoded with the tokenizer's pair template (``[CLS] query [SEP] passage [SEP]`` for BERT,
its type ids fed as ``token_type_ids``) and truncated to ``max_length`` tokens longest-first, as Hugging
Face's ``truncation=True`` does for cross-encoders: tokens come off the longer side, which for a query
and a passage is the passage, so the query stays whole.

The model's first output is the logits, ``(batch, 1)`` or ``(batch, 2)``. The score is the single logit,
or the positive class's logit for a two-class head: the class that ``config.json``'s ``id2label`` (or
``label2id``) names ``positive``, ``relevant``, ``yes``, ``true``, ``entailment`` or ``LABEL_1``, else
the last class. Other inputs the graph needs are fed as for the encoders (see
:mod:`clirkit.encoders.session`). A dynamically quantized model on CPU scores each pair alone, so that a
pair's score never depends on its batch-mates (see :mod:`clirkit.encoders.onnx_encoder`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clirkit._native import InvalidInputError, ParseError
from clirkit._types import PathLike
from clirkit.encoders.session import ModelInputs, import_runtime, open_session, pick_device
from clirkit.encoders.tokenization import encode_truncated, map_batches, padded_batch, padded_type_ids
from clirkit.sources.models import local_model

#: Label names read as the relevant class of a two-class head (compared in lower case).
POSITIVE_LABELS = ("positive", "relevant", "yes", "true", "entailment", "label_1")


class CrossEncoder:
    """Score (query, passage) pairs with an ONNX cross-encoder (see the module docstring).

    ``max_length``: tokens per pair including special tokens. ``batch_size``: pairs per model call.
    ``threads``: concurrent calls on CPU (0: all cores). ``provider``: ``"auto"``, ``"cuda"`` or
    ``"cpu"``.

    >>> ce = CrossEncoder("models/my-reranker")          # doctest: +SKIP
    >>> ce.score("what is clir?", ["passage one", "passage two"])  # float32, shape (2,)
    """

    def __init__(
        self,
        model_dir: PathLike,
        max_length: int = 512,
        batch_size: int = 32,
        threads: int = 0,
        provider: str = "auto",
    ) -> None:
        ort, tokenizers = import_runtime()
        self.model_dir = Path(local_model(model_dir))
        for name in ("model.onnx", "tokenizer.json"):
            if not (self.model_dir / name).is_file():
                raise InvalidInputError(
                    f"cross-encoder directory {self.model_dir} lacks {name} "
                    "(a cross-encoder needs model.onnx and tokenizer.json, and optionally config.json)"
                )
        self.config = _read_config(self.model_dir / "config.json")
        if max_length < 3:
            raise InvalidInputError(f"max_length must be at least 3, got {max_length}")
        if batch_size < 1:
            raise InvalidInputError(f"batch_size must be at least 1, got {batch_size}")
        self.max_length = max_length
        self.batch_size = batch_size
        self.tokenizer = tokenizers.Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length, strategy="longest_first")
        self.pad_id = int(self.config.get("pad_token_id", 0))
        self.device = pick_device(ort, provider)
        self.runtime = open_session(
            ort, self.model_dir / "model.onnx", self.device, threads, batch_invariant=True, fp16=False
        )
        self.model_inputs = ModelInputs(self.runtime.session, self.config, self.model_dir / "model.onnx")
        shape = self.runtime.session.get_outputs()[0].shape
        if shape is not None and (len(shape) != 2 or (isinstance(shape[1], int) and shape[1] not in (1, 2))):
            raise InvalidInputError(self._shape_error(shape))
        self.positive_index = _positive_index(self.config)

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """One float32 score per passage for ``query``, in passage order."""
        if isinstance(passages, str):
            raise TypeError("score() takes a sequence of passages, not a single string")
        return self.score_pairs([(query, passage) for passage in passages])

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """One float32 score per (query, passage) pair, in input order; batched by ``batch_size``."""
        inputs = [(str(query), str(passage)) for query, passage in pairs]
        if not inputs:
            return np.zeros(0, dtype=np.float32)
        encodings = encode_truncated(self.tokenizer, inputs, self.max_length)
        size = 1 if self.runtime.one_text_per_call else self.batch_size

        def score_batch(batch: np.ndarray) -> np.ndarray:
            ids, mask = padded_batch(encodings, batch, self.pad_id)
            logits = self.runtime.run(self.model_inputs.feeds(ids, mask, padded_type_ids(encodings, batch)))
            return self._scores(logits, len(batch))

        batches, results = map_batches(
            [len(e.ids) for e in encodings], size, self.runtime.workers, score_batch
        )
        out = np.empty(len(inputs), dtype=np.float32)
        for batch, scores in zip(batches, results):
            out[batch] = scores
        return out

    def _scores(self, logits: np.ndarray, rows: int) -> np.ndarray:
        if logits.ndim != 2 or logits.shape[0] != rows or logits.shape[1] not in (1, 2):
            raise InvalidInputError(self._shape_error(list(logits.shape)))
        column = 0 if logits.shape[1] == 1 else self.positive_index
        return logits[:, column]

    def _shape_error(self, shape: Any) -> str:
        return (
            f"{self.model_dir / 'model.onnx'}: output {self.runtime.output_name!r} has shape {shape}; a "
            "cross-encoder gives logits of shape (batch, 1) or (batch, 2)"
        )


def _read_config(path: Path) -> dict[str, Any]:
    """config.json as a dict, empty when absent."""
    if not path.is_file():
        return {}
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ParseError(f"{path}: not valid JSON: {err}") from err
    if not isinstance(config, dict):
        raise ParseError(f"{path}: expected a JSON object")
    return config


def _positive_index(config: dict[str, Any]) -> int:
    """The relevant class's index in a two-class head (see the module docstring)."""
    labels = {str(label).lower(): int(index) for index, label in config.get("id2label", {}).items()}
    labels.update({str(label).lower(): int(index) for label, index in config.get("label2id", {}).items()})
    for name in POSITIVE_LABELS:
        if name in labels and labels[name] in (0, 1):
            return labels[name]
    return 1
