"""Learned-sparse (SPLADE-family) encoding: texts in, term -> weight maps out.

This docstring describes SPLADE's head, the default; config.json's ``sparse_head`` chooses BGE-M3's
per-token weights or MILCO's output vocabulary instead (:mod:`clirkit.encoders.sparse_heads`).

A SPLADE model is a BERT-style masked language model exported to ONNX whose output is the MLM logits,
``(batch, sequence, vocabulary)``; its config.json says so (see
:func:`clirkit.encoders.pooling.is_sparse_config`). A text's weight for vocabulary entry ``i`` is the
max over its non-padding tokens of ``log(1 + relu(logit_i))``, and its terms are the tokenizer's
vocabulary strings (entry ``i`` is token ``i``). ``log(1 + relu(x))`` never decreases, so it is applied
once to the max rather than to every token's logits: the same values, one vocabulary-sized pass per text
instead of one per token. Terms of weight 0 are left out.

Weights are float32 values, given as the shortest decimal that reads back as the same float32 (so a
vector written as JSON and read again is the vector computed). Batches are padded to their longest text;
padding never reaches a weight (the max runs over each text's own tokens), and batched vectors equal
one-text-at-a-time vectors.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clirkit._native import InvalidInputError, ParseError
from clirkit._types import PathLike
from clirkit.encoders.onnx_encoder import OnnxEncoder
from clirkit.encoders.pooling import is_sparse_config
from clirkit.encoders.sparse_heads import LOGITS_OUTPUT, SparseHead
from clirkit.sources.models import local_model

SparseVector = dict[str, float]


def is_sparse_model(model_dir: PathLike) -> bool:
    """Whether the model directory's config.json declares a learned-sparse model (False without one);
    reads no model, so callers can pick the encoder class cheaply."""
    config_path = Path(local_model(model_dir)) / "config.json"
    if not config_path.is_file():
        return False
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ParseError(f"{config_path}: not valid JSON: {err}") from err
    return isinstance(config, dict) and is_sparse_config(config)


class SparseEncoder(OnnxEncoder):
    """Encode texts into SPLADE term weights with an ONNX masked language model.

    ``top_terms``: keep only the ``N`` largest weights of each vector (ties go to the lower vocabulary
    id); default all. ``batch_size`` defaults to 8: a batch's logits hold ``batch × tokens × vocabulary``
    floats (256 MB for 8 texts of 256 tokens over BERT's 30,522 entries). Prefixes, ``max_length``,
    ``device`` and ``threads`` are as for :class:`OnnxEncoder`. ``split_projection`` (default True): on
    CPU, run the prepared graph up to the MLM head's vocabulary projection and compute each text's
    maximum logits from the token states (:mod:`clirkit.encoders.vocab_projection`; the same weights
    to float rounding, 3.3x less CPU time for splade-tiny-en); False runs the whole graph. :meth:`encode`, :meth:`encode_queries`
    and :meth:`encode_passages` return one ``{term: weight}`` dict per text, terms in vocabulary order.

    >>> enc = SparseEncoder("models/splade-tiny-en", max_length=64)  # doctest: +SKIP
    >>> enc.encode_queries(["what is clir?"])[0]["cl"]                # a float weight
    """

    def __init__(
        self,
        model_dir: PathLike,
        *,
        top_terms: int | None = None,
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
        max_length: int | None = None,
        batch_size: int = 8,
        device: str = "auto",
        threads: int = 0,
        input_values: Any = None,
        split_projection: bool = True,
    ) -> None:
        if top_terms is not None and top_terms < 1:
            raise InvalidInputError(f"top_terms must be at least 1, got {top_terms}")
        self.top_terms = top_terms
        self.split_projection = split_projection
        super().__init__(
            model_dir,
            query_prefix=query_prefix,
            passage_prefix=passage_prefix,
            max_length=max_length,
            batch_size=batch_size,
            device=device,
            threads=threads,
            input_values=input_values,
        )
        self.head = SparseHead.from_config(
            self.config, self.model_dir, self.tokenizer, self.session, self.runtime.projection
        )
        self.vocabulary = self.head.vocabulary
        self.runtime.output_name = self.head.output

    def _split_output(self) -> str | None:
        # SPLADE's MLM logits: split off their vocabulary projection (clirkit.encoders.vocab_projection).
        if not self.split_projection or self.config.get("sparse_head", "mlm") != "mlm":
            return None
        return str(self.config.get("output", LOGITS_OUTPUT))

    def _configure_output(self, pooling: str | None, normalize: bool | None) -> None:
        # Max over tokens, no normalization: what makes the vector SPLADE's.
        self.pooling = "max"
        self.normalize = False

    def _vector_settings(self) -> list[Any]:
        return [*super()._vector_settings(), "splade", self.top_terms, self.head.kind]

    @property
    def dim(self) -> int:
        """The vocabulary size: the number of possible terms."""
        return len(self.vocabulary)

    def encode(  # type: ignore[override]
        self, texts: Sequence[str], prefix: str = "", role: str | None = None
    ) -> list[SparseVector]:
        """Encode ``prefix + text`` for each text, in input order: one ``{term: weight}`` dict each (an
        empty text gives the special tokens' vector). Inputs over ``max_length`` tokens are truncated and
        counted in :attr:`truncated`."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of texts, not a single string")
        texts = [prefix + (t if t is not None else "") for t in texts]
        if not texts:
            return []
        batches, results = self.encode_batches(texts, lambda ids, mask: self._term_weights(ids, mask, role))
        out: list[SparseVector] = [{} for _ in texts]
        for batch, vectors in zip(batches, results):
            for position, vector in zip(batch, vectors):
                out[position] = vector
        return out

    def encode_queries(self, texts: Sequence[str]) -> list[SparseVector]:  # type: ignore[override]
        """Encode queries (with the query prefix)."""
        return self.encode(texts, prefix=self.query_prefix, role="query")

    def encode_passages(self, texts: Sequence[str]) -> list[SparseVector]:  # type: ignore[override]
        """Encode documents or passages (with the passage prefix)."""
        return self.encode(texts, prefix=self.passage_prefix, role="passage")

    def _term_weights(self, ids: np.ndarray, mask: np.ndarray, role: str | None = None) -> list[SparseVector]:
        """The vectors of one padded batch."""
        return [
            self._vector(terms, weights)
            for terms, weights in self.head.vectors(self.run_graph(ids, mask, role), ids, mask)
        ]

    def _vector(self, terms: np.ndarray, weights: np.ndarray) -> SparseVector:
        """``{term: weight}`` from vocabulary ids (increasing) and their weights, ``top_terms`` kept."""
        if self.top_terms is not None and len(terms) > self.top_terms:
            strongest = np.sort(np.lexsort((terms, -weights))[: self.top_terms])
            terms, weights = terms[strongest], weights[strongest]
        # The shortest decimal of each float32, read as a Python float: it prints (and so is written)
        # in that form and reads back as the same float32.
        decimals = weights.astype(np.float32).astype(str)
        return {self.vocabulary[t]: float(d) for t, d in zip(terms.tolist(), decimals)}
