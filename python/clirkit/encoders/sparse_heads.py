"""The heads that turn a sparse model's output into term weights, chosen by config.json's ``sparse_head``:

``"mlm"`` (the default; SPLADE)
    The output is MLM logits ``(batch, sequence, vocabulary)`` over the input tokenizer's vocabulary; a
    term's weight is the max over the text's tokens of ``log(1 + relu(logit))``.
``"token_weights"`` (BGE-M3's sparse head)
    One weight per input token, ``relu(linear(hidden))``: the graph's output is ``(batch, sequence)`` or
    ``(batch, sequence, 1)`` weights, or ``(batch, sequence, hidden)`` states with the linear layer in an
    ``.npz`` file beside the model named by ``sparse_linear`` (arrays ``weight`` of ``hidden`` values and
    ``bias``). A term is an input token; its weight is the max over its occurrences. The tokenizer's special
    tokens (BGE-M3 leaves out CLS, EOS, PAD and UNK) never become terms.
``"output_vocabulary"`` (MILCO)
    The graph's output is logits over a vocabulary of its own, ``(batch, sequence, terms)`` or already
    pooled ``(batch, terms)``, listed one term per line in the file named by ``output_vocabulary`` (line
    ``i`` is entry ``i``); weights as for ``"mlm"``. Entries named in ``special_terms`` (default: those
    written like ``[CLS]`` or ``<s>``) never become terms.

The output is the one named by ``output`` (default ``logits`` for ``"mlm"``, else the graph's first).
For ``"mlm"`` on CPU the encoder's prepared graph ends before the vocabulary projection that gives the
logits, and :class:`clirkit._native.VocabProjection` computes each text's maximum logits from the token
states without materializing every token's (:mod:`clirkit.encoders.vocab_projection`): the same weights
to float rounding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

from clirkit._native import InvalidInputError

HEADS = ("mlm", "token_weights", "output_vocabulary")
#: The model output holding the MLM logits, unless config.json names another under ``output``.
LOGITS_OUTPUT = "logits"
#: Output-vocabulary entries taken for special tokens when ``special_terms`` is not given.
SPECIAL_TERM = re.compile(r"^(\[[A-Za-z_]+\]|<[A-Za-z_/|]+>)$")

#: A text's vector before it is written: vocabulary ids in increasing order and their float32 weights.
IdWeights = tuple[np.ndarray, np.ndarray]


@dataclass
class SparseHead:
    """How one model's output becomes term weights (see the module docstring)."""

    kind: str
    output: str
    vocabulary: list[str]
    excluded: np.ndarray  # vocabulary ids that never become terms
    linear: Optional[tuple[np.ndarray, np.ndarray]] = None
    #: The MLM logits' vocabulary projection, split off the graph (its output then the token states).
    projection: Any = None

    @classmethod
    def from_config(
        cls, config: dict[str, Any], model_dir: Path, tokenizer: Any, session: Any, projection: Any = None
    ) -> SparseHead:
        """The head config.json declares for ``session``'s outputs; ``projection``: the vocabulary
        projection split off an ``"mlm"`` graph (whose output is then the projection's input)."""
        model = model_dir / "model.onnx"
        kind = config.get("sparse_head", "mlm")
        if kind not in HEADS:
            raise InvalidInputError(
                f"{model_dir / 'config.json'}: sparse_head {kind!r} is not one of {', '.join(HEADS)}"
            )
        outputs = {o.name: o.shape for o in session.get_outputs()}
        output = config.get("output", LOGITS_OUTPUT if kind == "mlm" else next(iter(outputs)))
        if projection is not None and kind == "mlm":
            vocabulary = [
                tokenizer.id_to_token(i) for i in range(tokenizer.get_vocab_size(with_added_tokens=True))
            ]
            if projection.shape[0] != len(vocabulary):
                raise InvalidInputError(
                    f"{model}: output {output!r} has {projection.shape[0]} entries, not MLM logits over "
                    f"tokenizer.json's {len(vocabulary)}"
                )
            return cls(
                kind, next(iter(outputs)), vocabulary, np.zeros(0, dtype=np.int64), projection=projection
            )
        if output not in outputs:
            described = ", ".join(f"{name} {shape}" for name, shape in outputs.items())
            what = (
                "MLM logits (batch, sequence, vocabulary)" if kind == "mlm" else f"the {kind} head's output"
            )
            raise InvalidInputError(
                f"{model}: the model must output {what} named {output!r}, but its outputs are: {described}"
            )
        input_vocabulary = [
            tokenizer.id_to_token(i) for i in range(tokenizer.get_vocab_size(with_added_tokens=True))
        ]
        linear = None
        if kind == "output_vocabulary":
            vocabulary = _read_vocabulary(model_dir, config.get("output_vocabulary"))
            special = config.get("special_terms")
            if special is None:
                excluded = [i for i, term in enumerate(vocabulary) if SPECIAL_TERM.match(term)]
            else:
                positions = {term: i for i, term in enumerate(vocabulary)}
                excluded = [positions[t] for t in special if t in positions]
        else:
            vocabulary = input_vocabulary
            excluded = []
            if kind == "token_weights":
                excluded = [i for i, token in tokenizer.get_added_tokens_decoder().items() if token.special]
                if config.get("sparse_linear") is not None:
                    linear = _read_linear(model_dir, config["sparse_linear"])
        head = cls(kind, output, vocabulary, np.asarray(sorted(excluded), dtype=np.int64), linear)
        head.check_shape(model, outputs[output])
        return head

    def check_shape(self, model: Path, shape: Any) -> None:
        """Refuse an output whose declared shape cannot be this head's."""
        if shape is None:
            return
        last = shape[-1] if shape else None
        if self.kind == "token_weights":
            width = 1 if self.linear is None else len(self.linear[0])
            ok = len(shape) == 2 or (len(shape) == 3 and (not isinstance(last, int) or last == width))
            wanted = f"(batch, sequence) or (batch, sequence, {width})"
        else:
            ok = len(shape) in ((3,) if self.kind == "mlm" else (2, 3)) and (
                not isinstance(last, int) or last == len(self.vocabulary)
            )
            wanted = f"(batch, [sequence,] {len(self.vocabulary)})"
        if self.kind == "mlm":
            wanted = f"MLM logits (batch, sequence, {len(self.vocabulary)}) over tokenizer.json's vocabulary"
        if not ok:
            raise InvalidInputError(f"{model}: output {self.output!r} has shape {shape}, not {wanted}")

    def vectors(self, output: np.ndarray, ids: np.ndarray, mask: np.ndarray) -> list[IdWeights]:
        """Each text's (ids, weights) of one padded batch: ``output`` the graph's, ``ids`` and ``mask``
        its inputs (right-padded)."""
        lengths = mask.sum(axis=1)
        if self.kind == "token_weights":
            weights = self._token_weights(output)
            return [self._per_token(ids[n, :length], weights[n, :length]) for n, length in enumerate(lengths)]
        if self.projection is not None:
            # Token states, (batch x sequence, hidden) or (batch, sequence, hidden): each text's
            # maximum logits, (batch, vocabulary), its padding left out.
            states = np.ascontiguousarray(output, dtype=np.float32).reshape(ids.shape[0], ids.shape[1], -1)
            # Only positive maxima make weights: max(0, maximum), the rest never computed in float32.
            lengths = np.ascontiguousarray(lengths, dtype=np.int64)
            output = self.projection.max_logits(states, lengths, positive=True)
        elif output.ndim not in ((3,) if self.kind == "mlm" else (2, 3)) or output.shape[-1] != len(
            self.vocabulary
        ):
            raise InvalidInputError(
                f"output {self.output!r} has shape {output.shape}, not logits over the {len(self.vocabulary)} terms"
            )
        out = []
        for row, length in zip(output, lengths):
            pooled = row if row.ndim == 1 else row[:length].max(axis=0)
            weights = np.log1p(np.maximum(pooled, 0).astype(np.float32))
            weights[self.excluded] = 0
            terms = np.flatnonzero(weights > 0)
            out.append((terms, weights[terms]))
        return out

    def _token_weights(self, output: np.ndarray) -> np.ndarray:
        if self.linear is not None:
            weight, bias = self.linear
            output = np.maximum(output @ weight + bias, 0)
        if output.ndim == 3 and output.shape[2] == 1:
            output = output[:, :, 0]
        if output.ndim != 2:
            raise InvalidInputError(
                f"output {self.output!r} has shape {output.shape}, not one weight per token"
            )
        return output.astype(np.float32, copy=False)

    def _per_token(self, ids: np.ndarray, weights: np.ndarray) -> IdWeights:
        keep = (weights > 0) & ~np.isin(ids, self.excluded)
        terms, where = np.unique(ids[keep], return_inverse=True)
        best = np.zeros(len(terms), dtype=np.float32)
        np.maximum.at(best, where, weights[keep])
        return terms, best


def _read_vocabulary(model_dir: Path, name: Any) -> list[str]:
    if not isinstance(name, str):
        raise InvalidInputError(
            f"{model_dir / 'config.json'}: the output_vocabulary head needs 'output_vocabulary': a file of terms"
        )
    path = model_dir / name
    try:
        terms = path.read_text(encoding="utf-8").split("\n")
    except OSError as err:
        raise InvalidInputError(f"{path}: cannot read the output vocabulary: {err}") from None
    if terms and terms[-1] == "":
        terms.pop()
    seen: dict[str, int] = {}
    for line, term in enumerate(terms, 1):
        if not term or term in seen:
            problem = "is empty" if not term else f"repeats line {seen[term]}"
            raise InvalidInputError(f"{path}:{line}: term {problem}")
        seen[term] = line
    return terms


def _read_linear(model_dir: Path, name: Any) -> tuple[np.ndarray, np.ndarray]:
    path = model_dir / str(name)
    try:
        with np.load(path) as arrays:
            weight = np.asarray(arrays["weight"], dtype=np.float32).reshape(-1)
            bias = np.asarray(arrays["bias"], dtype=np.float32).reshape(-1)
    except (OSError, KeyError, ValueError) as err:
        raise InvalidInputError(f"{path}: not an .npz with arrays 'weight' and 'bias': {err}") from None
    if len(bias) != 1:
        raise InvalidInputError(f"{path}: 'bias' must hold one value, not {len(bias)}")
    return weight[:, None], bias
