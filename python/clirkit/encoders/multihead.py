"""One forward pass, several outputs: a model with several heads (BGE-M3: a dense CLS vector, sparse
token weights and ColBERT token vectors) encoded once for all of them.

The heads are declared in ``config.json``, output name and kind per family::

    "heads": {
        "dense": {"output": "dense_vecs", "pooling": "cls", "normalize": true},
        "sparse": {"output": "sparse_vecs", "type": "token_weights"},
        "multivector": {"output": "colbert_vecs"}
    }

(``pooling``/``normalize`` as for :class:`clirkit.encoders.OnnxEncoder`; the computations are
:mod:`clirkit.encoders.heads`'.) :class:`MultiHeadEncoder` tokenizes a text list once, batches it once
and fetches every requested output from each forward pass; :meth:`MultiHeadEncoder.view` gives, per family,
an encoder that the family's own file writer takes (:func:`~clirkit.encoders.encode_file`,
:func:`~clirkit.encoders.encode_sparse_file`, :func:`~clirkit.encoders.encode_tokens_file`).
:func:`encode_heads_file` runs those writers side by side over the same input; the views share each
chunk's forward pass (the first writer to ask for a chunk runs it, the others take its results), so the
corpus is encoded once, and each family's files, resume state and fingerprint are exactly those of a
separate encode with a one-head encoder. Files: ``PREFIX.dense.npy`` + ``PREFIX.dense.ids.txt``,
``PREFIX.sparse.vectors.jsonl``, ``PREFIX.multivector.{tokens.npy,offsets.npy,ids.txt}``.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np

from clirkit._native import InvalidInputError
from clirkit._types import PathLike
from clirkit.encoders.corpus import encode_file, encode_sparse_file
from clirkit.encoders.heads import token_state_heads_problem, token_vector_matrices, token_weight_vectors
from clirkit.encoders.onnx_encoder import OnnxEncoder
from clirkit.encoders.pooling import POOLINGS, pool
from clirkit.encoders.tokenization import encode_truncated, map_batches, padded_batch
from clirkit.encoders.tokens import TokenEncoder, encode_tokens_file

FAMILIES = ("dense", "sparse", "multivector")
#: Chunks of results kept for writers that have not taken them yet.
KEPT_CHUNKS = 4


def configured_heads(config: dict[str, Any], where: Path) -> dict[str, dict[str, Any]]:
    """``config.json``'s ``heads``, checked: family -> spec with its ``output``."""
    heads = config.get("heads")
    if not isinstance(heads, dict) or not heads:
        raise InvalidInputError(f"{where}: config.json declares no 'heads' object (family -> output)")
    for family, spec in heads.items():
        if family not in FAMILIES:
            raise InvalidInputError(
                f"{where}: config.json heads.{family}: families are {', '.join(FAMILIES)}"
            )
        if not isinstance(spec, dict) or not isinstance(spec.get("output"), str):
            raise InvalidInputError(f"{where}: config.json heads.{family} needs an 'output' name")
        if family == "sparse" and spec.get("type", "token_weights") != "token_weights":
            raise InvalidInputError(f"{where}: config.json heads.sparse.type must be 'token_weights'")
        if family == "dense" and spec.get("pooling", "cls") not in POOLINGS:
            raise InvalidInputError(
                f"{where}: config.json heads.dense.pooling must be one of {', '.join(POOLINGS)}"
            )
    return heads


class MultiHeadEncoder(OnnxEncoder):
    """The heads ``outputs`` (default: every family ``config.json`` declares) of one model from one
    forward pass per batch. Other options as for :class:`OnnxEncoder`.

    ``token_states``: for a model that declares no heads, its per-token output (the graph's first) gives
    two families from one pass: ``dense`` (pooled and normalized as :class:`OnnxEncoder` pools it) and
    ``multivector`` (every token's state, L2-normalized, as :class:`~clirkit.encoders.tokens.TokenEncoder`
    stores it). Refused for a sparse model, a ``"colbert"`` configuration or a ``projection.npy``, whose
    multi-vector encoding is not the token states."""

    def __init__(
        self,
        model_dir: PathLike,
        *,
        outputs: Sequence[str] | None = None,
        token_states: bool = False,
        **options: Any,
    ) -> None:
        super().__init__(model_dir, **options)
        if token_states:
            problem = token_state_heads_problem(self.model_dir, self.config)
            if problem is not None:
                raise InvalidInputError(
                    f"{self.model_dir}: token_states needs a plain per-token model, but {problem}"
                )
            state = self.runtime.output_name
            declared = {
                "dense": {"output": state, "pooling": self.pooling, "normalize": self.normalize},
                "multivector": {"output": state},
            }
        else:
            declared = configured_heads(self.config, self.model_dir / "config.json")
        wanted = list(outputs) if outputs else list(declared)
        missing = [family for family in wanted if family not in declared]
        if missing or not wanted:
            raise InvalidInputError(
                f"{self.model_dir}: config.json declares heads for {', '.join(declared)}; asked for "
                f"{', '.join(wanted) or 'none'}"
            )
        names = {o.name for o in self.session.get_outputs()}
        for family in wanted:
            if declared[family]["output"] not in names:
                raise InvalidInputError(
                    f"{self.model_dir / 'model.onnx'}: heads.{family} names output "
                    f"{declared[family]['output']!r}; the graph's outputs are {', '.join(sorted(names))}"
                )
        self.heads = {family: declared[family] for family in wanted}
        self.output_names = sorted({spec["output"] for spec in self.heads.values()})
        self.vocabulary = [
            self.tokenizer.id_to_token(i)
            for i in range(self.tokenizer.get_vocab_size(with_added_tokens=True))
        ]
        self.special_ids = {
            i for i, token in self.tokenizer.get_added_tokens_decoder().items() if token.special
        }
        self.forward_passes = 0  # model calls so far (one per batch, whatever the number of heads)
        self._lock = threading.Lock()
        self._chunks: OrderedDict[str, tuple[dict[str, list[Any]], int]] = OrderedDict()

    def _configure_output(self, pooling: str | None, normalize: bool | None) -> None:
        if "heads" not in self.config:  # the token states' dense family pools as OnnxEncoder does
            super()._configure_output(pooling, normalize)
            return
        dense = (self.config.get("heads") or {}).get("dense") or {}
        self.pooling = pooling or dense.get("pooling", "cls")
        self.normalize = bool(normalize if normalize is not None else dense.get("normalize", True))

    def _vector_settings(self) -> list[Any]:
        heads = self.config.get("heads", "token states")  # the same for any choice of outputs
        return [*super()._vector_settings(), "heads", json.dumps(heads, sort_keys=True)]

    def encode_heads(
        self, texts: Sequence[str], prefix: str = "", role: str | None = None
    ) -> dict[str, list[Any]]:
        """``prefix + text`` for each text through one forward pass per batch: family -> one result per
        text in input order (dense: a float32 vector; sparse: ``{term: weight}``; multivector: a
        ``(tokens, dim)`` matrix), with the ``input_values`` of ``role``."""
        return self._heads_of(list(texts), prefix, role)[0]

    def _heads_of(self, texts: list[str], prefix: str, role: str | None) -> tuple[dict[str, list[Any]], int]:
        full = [prefix + (t if t is not None else "") for t in texts]
        results: dict[str, list[Any]] = {family: [None] * len(full) for family in self.heads}
        if not full:
            return results, 0
        encodings = encode_truncated(self.tokenizer, full, self.max_length)
        truncated = sum(1 for e in encodings if e.overflowing)
        size = 1 if self.one_text_per_call else self.batch_size

        def forward(batch: np.ndarray) -> dict[str, list[Any]]:
            ids, mask = padded_batch(encodings, batch, self.pad_id)
            outputs = dict(
                zip(
                    self.output_names,
                    self.runtime.run_outputs(
                        self.model_inputs.feeds(ids, mask, role=role), self.output_names
                    ),
                )
            )
            made: dict[str, list[Any]] = {}
            for family, spec in self.heads.items():
                output = outputs[spec["output"]]
                if family == "dense":
                    made[family] = list(pool(output, mask, self.pooling, self.normalize))
                elif family == "sparse":
                    made[family] = token_weight_vectors(output, ids, mask, self.vocabulary, self.special_ids)
                else:
                    made[family] = token_vector_matrices(output, mask)
            return made

        batches, made = map_batches(
            [len(e.ids) for e in encodings], size, self.workers, forward, max_tokens=self.batch_tokens
        )
        self.forward_passes += len(batches)
        for batch, per_family in zip(batches, made):
            for family, values in per_family.items():
                for position, value in zip(batch.tolist(), values):
                    results[family][position] = value
        return results, truncated

    def shared_chunk(
        self, texts: Sequence[str], prefix: str, family: str, role: str | None = None
    ) -> tuple[list[Any], int]:
        """One family's results for ``texts``, from the forward pass another family's writer already ran
        for the same texts when there was one (kept for :data:`KEPT_CHUNKS` chunks), else from a new
        one; and the number of truncated inputs among them."""
        key = hashlib.sha256(json.dumps([prefix, role, list(texts)]).encode()).hexdigest()
        with self._lock:
            if key not in self._chunks:
                self._chunks[key] = self._heads_of(list(texts), prefix, role)
                while len(self._chunks) > KEPT_CHUNKS:
                    self._chunks.popitem(last=False)
            results, truncated = self._chunks[key]
        return results[family], truncated

    def view(self, family: str) -> Any:
        """An encoder giving only ``family``'s results, for that family's file writer."""
        if family not in self.heads:
            raise InvalidInputError(
                f"{self.model_dir}: this encoder computes {', '.join(self.heads)}, not {family}"
            )
        if family == "multivector":
            return HeadTokenEncoder(self)
        return HeadView(self, family)


class HeadView:
    """One family of a :class:`MultiHeadEncoder`, with the encoder interface the dense and sparse file
    writers use."""

    def __init__(self, source: MultiHeadEncoder, family: str) -> None:
        self.source = source
        self.family = family
        self.model_dir = source.model_dir
        self.max_length = source.max_length
        self.device = source.device
        self.truncated = 0

    @property
    def dim(self) -> int:
        if self.family == "sparse":
            return len(self.source.vocabulary)
        return int(self.encode([""])[0].shape[0])

    def fingerprint(self) -> str:
        spec = json.dumps(self.source.heads[self.family], sort_keys=True)
        return hashlib.sha256(f"{self.source.fingerprint()};{self.family};{spec}".encode()).hexdigest()

    def token_windows(self, text: str, size: int, stride: int) -> list[str]:
        return self.source.token_windows(text, size, stride)

    def encode(self, texts: Sequence[str], prefix: str = "", role: str | None = None) -> Any:
        values, truncated = self.source.shared_chunk(texts, prefix, self.family, role)
        self.truncated += truncated
        if self.family == "dense":
            return np.array(values, dtype=np.float32).reshape(len(values), -1)
        return values

    def encode_queries(self, texts: Sequence[str]) -> Any:
        return self.encode(texts, self.source.query_prefix, "query")

    def encode_passages(self, texts: Sequence[str]) -> Any:
        return self.encode(texts, self.source.passage_prefix, "passage")


class HeadTokenEncoder(TokenEncoder):
    """The multi-vector family of a :class:`MultiHeadEncoder`, for
    :func:`clirkit.encoders.encode_tokens_file`: every non-padding token's vector, L2-normalized."""

    def __init__(self, source: MultiHeadEncoder) -> None:  # no ColBERT configuration, no projection
        self.encoder = source
        self.view_of = HeadView(source, "multivector")
        self.colbert = False
        self.projection = None
        self.truncated = 0

    @property
    def dim(self) -> int:
        return int(self.view_of.encode([""])[0].shape[1])

    def fingerprint(self) -> str:
        return self.view_of.fingerprint()

    def encode_queries(self, texts: Sequence[str]) -> list[np.ndarray]:
        return self._taken(self.view_of.encode_queries(texts))

    def encode_passages(self, texts: Sequence[str]) -> list[np.ndarray]:
        return self._taken(self.view_of.encode_passages(texts))

    def _taken(self, matrices: list[np.ndarray]) -> list[np.ndarray]:
        self.truncated = self.view_of.truncated
        return matrices


def encode_heads_file(
    encoder: MultiHeadEncoder, input_path: PathLike, output_prefix: PathLike, **options: Any
) -> dict[str, Any]:
    """Encode ``input_path`` once into every family of ``encoder`` (see the module docstring for the
    files), each through its own resumable writer; ``options`` as those writers take them (``kind``,
    ``fields``, ``passages``, ``chunk_size``, ``restart``, ``quiet``...; ``dtype`` applies to the
    dense and multi-vector files). Returns family -> the writer's result."""
    writers: dict[str, Callable[..., Any]] = {
        "dense": encode_file,
        "sparse": encode_sparse_file,
        "multivector": encode_tokens_file,
    }
    # The writers must cut the input into the same chunks for their views to share each forward pass.
    options.setdefault("chunk_size", 1000)
    sparse_options = {k: v for k, v in options.items() if k != "dtype"}
    with ThreadPoolExecutor(len(encoder.heads)) as pool_:
        futures: dict[str, Future[Any]] = {
            family: pool_.submit(
                writers[family],
                encoder.view(family),
                input_path,
                f"{output_prefix}.{family}",
                **(sparse_options if family == "sparse" else options),
            )
            for family in encoder.heads
        }
        return {family: future.result() for family, future in futures.items()}
