"""ONNX text encoders: onnxruntime + Hugging Face ``tokenizers``, no PyTorch, nothing downloaded.

A model is a directory holding ``model.onnx``, ``tokenizer.json`` and ``config.json``, or a Hugging Face
Hub model id resolved to one by :mod:`clirkit.sources.models` (sentence-transformers settings included). Encoding options
default from ``config.json`` and can be overridden by keyword arguments:

``pooling``
    ``"mean"`` (mean over the attention mask), ``"cls"`` (first token) or ``"last"`` (last non-padding
    token). Read from the ``pooling`` key: either one of those words or prose such as
    ``"mean over attention_mask, then L2 normalize"`` (the first of mean/cls/last it mentions wins).
    Default ``"mean"`` (sentence-transformers' default).
``normalize``
    L2-normalize embeddings. Read from a boolean ``normalize`` key, else from the ``pooling`` prose
    (``"normalize"`` mentioned), else ``True``.
``query_prefix`` / ``passage_prefix``
    Prepended to queries / passages (multilingual-e5: ``"query: "`` / ``"passage: "``). Default ``""``.
``max_length``
    Tokens per input including special tokens; at most ``max_position_embeddings``. Longer inputs are
    truncated and counted in :attr:`OnnxEncoder.truncated` (never an error); a long text is cut to a
    character bound before it is tokenized (:func:`clirkit.encoders.tokenization.encode_truncated`), so a
    50 MB document costs what its first tokens cost.
``input_values``
    Values for model inputs the tokenizer does not give (e.g. ``task_id``), for both roles
    (``{"task_id": 2}``) or per role (``{"query": {"task_id": 0}, "passage": {"task_id": 1}}``); added to
    or replacing ``config.json``'s ``input_values``; see :mod:`clirkit.encoders.session`.

``batch_invariant`` (default True)
    Dynamically quantized int8 models compute one activation scale over the whole padded batch, so a
    text's vector would depend on its batch-mates (cosine down to 0.97 with multilingual-e5-small-int8).
    On CPU such a model runs each text alone, unpadded, ``threads`` texts at a time: vectors are
    bit-identical to a one-text-at-a-time loop over the same graph, whatever the batching and thread
    count, and no compute is spent on padding. On CUDA, where batching is what makes a GPU fast, the graph is rewritten to
    quantize each sequence over its own tokens (:mod:`clirkit.encoders.quantization`, needs the ``onnx``
    package) and run with basic graph optimizations. Float models are batched as shipped.

With ``batch_invariant=False`` (fast mode) such a model on CPU trades exact attention for speed where it
can: it still runs each text alone, but its prepared graph is cut at its attention nodes and each attention
is computed in int8 by :func:`clirkit._native.quantized_attention` (:mod:`clirkit.encoders.split_attention`;
queries and keys rounded per token, values per channel, the softmax weights to sixteen bits), when the
graph's attention is fused and the CPU has AVX-512 VNNI and VBMI. Its vectors then differ from the
default's by the int8 rounding (multilingual-e5-small-int8 on SciFact: cosine min 0.996, median 0.9988,
against ~0.998 for any float change of its attention; nDCG@10 and R@100 unchanged beyond noise; measured
in ``benches/results/encoders.md``).

Otherwise (float models, ``batch_invariant=False`` where no int8 attention applies, CUDA) batches are
formed after sorting by token length, so that each is padded only to its own longest input (dynamic padding), by a token budget:
at most ``batch_tokens`` tokens once padded (default 512 on CPU, 16,384 on CUDA) and at most
``batch_size`` texts, so short texts go in wide batches and long ones in narrow ones.

On CPU the graph run is, by default, a prepared copy of ``model.onnx`` (:mod:`clirkit.encoders.graph_cache`:
attention blocks fused into onnxruntime's ``MultiHeadAttention`` and the exact Erf-GELU into ``Gelu``,
residual layer normalizations and unmasked attention computed by clirkit's faster copies of
onnxruntime's ``SkipLayerNormalization`` and ``MultiHeadAttention`` (:mod:`clirkit.encoders.custom_ops`),
cached per model content, runtime version and preparation version). Run one text at a time, it gives
the shipped graph's vectors at onnxruntime's default level, which a dynamically quantized model's requantization would otherwise move
by cosine ~0.998 for any other rounding: bit for bit for multilingual-e5-small-int8 (fastembed's
vectors with ``batch_size=1``) and the tests' graphs, within 1e-7 for all-MiniLM-L6-v2-int8.
``optimize_graph=False`` runs the shipped graph itself at onnxruntime's default level, what a plain
onnxruntime loop gives. On CPU, ``threads`` calls run concurrently with one onnxruntime thread each
(onnxruntime's intra-op thread pool spends much of its time synchronizing on matrices this small).
Results come back in input order. On CUDA the session uses IO binding and, with ``fp16=True``, a float16
copy of the model's float weights; a dynamically int8-quantized model is then dequantized first
(:func:`clirkit.encoders.quantization.float_weights`), since a GPU runs float16 faster than that int8 path.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Callable, TypeVar

import numpy as np

from clirkit._native import InvalidInputError, ParseError
from clirkit._types import PathLike
from clirkit.encoders.pooling import POOLINGS, is_sparse_config, pool, pooling_from_config
from clirkit.encoders.session import ModelInputs, import_runtime, open_session, pick_device
from clirkit.encoders.tokenization import (
    encode_truncated,
    load_tokenizers,
    map_batches,
    padded_batch,
    token_windows,
)
from clirkit.sources.models import local_model

MODEL_FILES = ("model.onnx", "tokenizer.json", "config.json")
#: Default token budgets of a batch (rows x padded width): small on CPU, where a batch's activations
#: spilling out of the core's cache cost more than wider matrix products gain (measured in
#: benches/results/encoders.md), large on a GPU, which needs wide batches to be busy.
CPU_BATCH_TOKENS = 512
GPU_BATCH_TOKENS = 16384
T = TypeVar("T")


class OnnxEncoder:
    """Encode texts into dense vectors with an ONNX transformer (see the module docstring for options).

    >>> enc = OnnxEncoder("models/multilingual-e5-small-int8")  # doctest: +SKIP
    >>> q = enc.encode_queries(["what is clir?"])                # float32, shape (1, 384)
    """

    def __init__(
        self,
        model_dir: PathLike,
        *,
        pooling: str | None = None,
        normalize: bool | None = None,
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
        max_length: int | None = None,
        batch_size: int = 32,
        device: str = "auto",
        fp16: bool | None = None,
        threads: int = 0,
        batch_invariant: bool = True,
        batch_tokens: int | None = None,
        optimize_graph: bool = True,
        input_values: Mapping[str, Any] | None = None,
    ) -> None:
        ort, tokenizers = import_runtime()
        self.model_dir = Path(local_model(model_dir))
        if not self.model_dir.is_dir():
            raise FileNotFoundError(f"model directory {self.model_dir} does not exist")
        missing = [name for name in MODEL_FILES if not (self.model_dir / name).is_file()]
        if missing:
            raise FileNotFoundError(
                f"model directory {self.model_dir} lacks {', '.join(missing)} "
                f"(an encoder needs {', '.join(MODEL_FILES)})"
            )
        config_path = self.model_dir / "config.json"
        try:
            self.config: dict[str, Any] = json.loads(config_path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ParseError(f"{config_path}: not valid JSON: {err}") from err

        self._configure_output(pooling, normalize)
        self.query_prefix = query_prefix if query_prefix is not None else self.config.get("query_prefix", "")
        self.passage_prefix = (
            passage_prefix if passage_prefix is not None else self.config.get("passage_prefix", "")
        )
        position_limit = int(self.config.get("max_position_embeddings", 512))
        if max_length and max_length > position_limit:
            warnings.warn(
                f"max_length {max_length} exceeds the model's {position_limit} positions "
                f"(config.json max_position_embeddings); using {position_limit}",
                stacklevel=2,
            )
        self.max_length = min(max_length or position_limit, position_limit)
        if self.max_length < 2:
            raise InvalidInputError(f"max_length must be at least 2, got {self.max_length}")
        if batch_size < 1:
            raise InvalidInputError(f"batch_size must be at least 1, got {batch_size}")
        if batch_tokens is not None and batch_tokens < 1:
            raise InvalidInputError(f"batch_tokens must be at least 1, got {batch_tokens}")
        self.batch_size = batch_size
        self.truncated = 0  # inputs cut at max_length so far

        self.tokenizer, self._splitter = load_tokenizers(
            tokenizers, self.model_dir / "tokenizer.json", self.max_length
        )
        self.pad_id = int(self.config.get("pad_token_id", 0))

        self.device = pick_device(ort, device)
        self.fp16 = bool(fp16) if fp16 is not None else False
        if self.fp16 and self.device != "cuda":
            warnings.warn("fp16 applies to the CUDA provider only; encoding in float32 on CPU", stacklevel=2)
            self.fp16 = False
        self.batch_invariant = batch_invariant
        self.batch_tokens = batch_tokens or (GPU_BATCH_TOKENS if self.device == "cuda" else CPU_BATCH_TOKENS)
        self.runtime = open_session(
            ort,
            self.model_dir / "model.onnx",
            self.device,
            threads,
            batch_invariant,
            self.fp16,
            optimize_graph,
            pooling=self.pooling,
            # Every input holds a token when the tokenizer adds special tokens to an empty text.
            nonempty=len(self.tokenizer.encode("").ids) > 0,
            split_output=self._split_output(),
        )
        # What the session settled on (fingerprint() digests these).
        self.session = self.runtime.session
        self.device = self.runtime.device
        self.workers = self.runtime.workers
        self.one_text_per_call = self.runtime.one_text_per_call
        self.graph_optimization = self.runtime.graph_optimization
        self.fp16 = self.runtime.fp16
        self.model_inputs = ModelInputs(
            self.session, self.config, self.model_dir / "model.onnx", input_values
        )
        self.input_values = self.model_inputs.values  # per role, config.json's with the argument's on top
        self._check_vocabulary()

    def _configure_output(self, pooling: str | None, normalize: bool | None) -> None:
        """Set :attr:`pooling` and :attr:`normalize` from the arguments, else from config.json."""
        if is_sparse_config(self.config):
            raise InvalidInputError(
                f"{self.model_dir}: config.json declares a learned-sparse (SPLADE) model, which gives term "
                "weights, not dense vectors: use clirkit.encoders.SparseEncoder"
            )
        cfg_pooling, cfg_normalize = pooling_from_config(self.config)
        self.pooling = pooling or cfg_pooling or "mean"
        if self.pooling not in POOLINGS:
            raise InvalidInputError(f"pooling must be one of {', '.join(POOLINGS)}, got {self.pooling!r}")
        self.normalize = bool(normalize if normalize is not None else (cfg_normalize is not False))

    def _split_output(self) -> str | None:
        """The output whose vocabulary projection the session may split off
        (:mod:`clirkit.encoders.vocab_projection`); a dense encoder's: none."""
        return None

    def _check_vocabulary(self) -> None:
        """A tokenizer that emits ids beyond the embedding table gives garbage or crashes mid-corpus:
        refuse it up front."""
        tokenizer_vocab = self.tokenizer.get_vocab_size(with_added_tokens=True)
        model_vocab = self.config.get("vocab_size")
        if model_vocab is not None:
            if tokenizer_vocab > int(model_vocab):
                raise InvalidInputError(
                    f"{self.model_dir}: tokenizer.json has {tokenizer_vocab} tokens but the model's "
                    f"embedding table (config.json vocab_size) has {model_vocab}: they do not belong together"
                )
            return
        # No vocab_size in config.json: probe the embedding table with the largest token id.
        probe = np.array([[tokenizer_vocab - 1]], dtype=np.int64)
        try:
            self.run_graph(probe, np.ones_like(probe))
        except Exception as err:  # onnxruntime raises its own error types for out-of-range gathers
            raise InvalidInputError(
                f"{self.model_dir}: the model rejects token id {tokenizer_vocab - 1} of tokenizer.json "
                f"({tokenizer_vocab} tokens): tokenizer and model do not belong together ({err})"
            ) from err

    # -- identity ------------------------------------------------------------------------------------
    def fingerprint(self) -> str:
        """A digest of the model files and every setting that changes the vectors (for resumable
        corpus encoding: a resumed run must use the same encoder)."""
        h = hashlib.sha256()
        # Every file beside the graph, not only MODEL_FILES: external-data weights can live in any
        # of them, and a change to the weights alone must not let a resumed run mix two models.
        for path in sorted(p for p in self.model_dir.iterdir() if p.is_file()):
            st = path.stat()
            h.update(f"{path.name}:{st.st_size}:{st.st_mtime_ns};".encode())
        h.update((self.model_dir / "config.json").read_bytes())
        h.update(json.dumps(self._vector_settings()).encode())
        return h.hexdigest()

    def _vector_settings(self) -> list[Any]:
        """The settings that change the vectors, for :meth:`fingerprint`."""
        return [
            self.pooling,
            self.normalize,
            self.query_prefix,
            self.passage_prefix,
            self.max_length,
            self.batch_invariant,
            self.one_text_per_call,
            self.graph_optimization,
            self.fp16,
            # only when the model has extra inputs, so other models' fingerprints stay as they were
            *([self.input_values] if any(self.input_values.values()) else []),
        ]

    @property
    def dim(self) -> int:
        """Embedding dimension."""
        shape = self.session.get_outputs()[0].shape
        if isinstance(shape[-1], int):
            return shape[-1]
        return int(self.encode([""]).shape[1])

    # -- encoding ------------------------------------------------------------------------------------
    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Encode queries (with the query prefix). Returns float32 ``(len(texts), dim)``."""
        return self.encode(texts, prefix=self.query_prefix, role="query")

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Encode documents or passages (with the passage prefix). Returns float32 ``(len(texts), dim)``."""
        return self.encode(texts, prefix=self.passage_prefix, role="passage")

    def encode(self, texts: Sequence[str], prefix: str = "", role: str | None = None) -> np.ndarray:
        """Encode ``prefix + text`` for each text, in input order, with the ``input_values`` of ``role``
        (``"query"`` or ``"passage"``, the default). Empty texts are encoded as the
        prefix alone (special tokens only without one); inputs over ``max_length`` tokens are truncated
        and counted in :attr:`truncated`."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of texts, not a single string")
        texts = [prefix + (t if t is not None else "") for t in texts]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        batches, vectors = self.encode_batches(texts, lambda ids, mask: self._embed(ids, mask, role))
        out = np.empty((len(texts), vectors[0].shape[1]), dtype=np.float32)
        for batch, rows in zip(batches, vectors):
            out[batch] = rows
        return out

    def encode_batches(
        self, texts: list[str], embed: Callable[[np.ndarray, np.ndarray], T]
    ) -> tuple[list[np.ndarray], list[T]]:
        """Tokenize ``texts`` (counting truncations), form batches and apply ``embed(input ids, attention
        mask)`` to each, concurrently where the session allows: (the text positions of each batch, what
        ``embed`` returned for it)."""
        encodings = encode_truncated(self.tokenizer, texts, self.max_length)
        self.truncated += sum(1 for e in encodings if e.overflowing)
        size = 1 if self.one_text_per_call else self.batch_size

        def embed_batch(batch: np.ndarray) -> T:
            return embed(*padded_batch(encodings, batch, self.pad_id))

        return map_batches(
            [len(e.ids) for e in encodings], size, self.workers, embed_batch, max_tokens=self.batch_tokens
        )

    def _embed(self, ids: np.ndarray, mask: np.ndarray, role: str | None = None) -> np.ndarray:
        return pool(
            self.run_graph(ids, mask, role).astype(np.float32, copy=False), mask, self.pooling, self.normalize
        )

    def run_graph(self, ids: np.ndarray, mask: np.ndarray, role: str | None = None) -> np.ndarray:
        """The graph's output for one padded batch (input ids, attention mask), its extra inputs fed
        for ``role``: what every encoder built on this one (sparse, multi-head, token) runs."""
        return self.runtime.run(self.model_inputs.feeds(ids, mask, role=role))

    def token_windows(self, text: str, size: int, stride: int) -> list[str]:
        """Split ``text`` into passages of at most ``size`` tokens starting every ``stride`` tokens
        (special tokens and prefixes not counted), cut at token boundaries in the original text. A text
        that fits in one window comes back whole (an empty text gives one empty passage)."""
        return token_windows(self._splitter, text, size, stride)
