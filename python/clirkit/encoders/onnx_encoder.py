"""ONNX text encoders: onnxruntime + Hugging Face ``tokenizers``, no PyTorch, nothing downloaded.

A model is a directory holding ``model.onnx``, ``tokenizer.json`` and ``config.json``. Encoding options
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
    truncated and counted in :attr:`OnnxEncoder.truncated` (never an error).

``batch_invariant`` (default True)
    Dynamically quantized int8 models compute one activation scale over the whole padded batch, so a
    text's vector would depend on its batch-mates (cosine down to 0.97 with multilingual-e5-small-int8).
    On CPU such a model runs each text alone, unpadded, on the graph as shipped with all optimizations,
    ``threads`` texts at a time: vectors are bit-identical to a one-text-at-a-time loop, and no compute
    is spent on padding. On CUDA, where batching is what makes a GPU fast, the graph is rewritten to
    quantize each sequence over its own tokens (:mod:`clirkit.quantization`, needs the ``onnx``
    package) and run with basic graph optimizations. Float models are batched as shipped.

Otherwise (float models, ``batch_invariant=False``, CUDA) batches of ``batch_size`` are formed after
sorting by token length so that each is padded only to its own longest
input (dynamic padding). On CPU, ``threads`` calls run concurrently with one onnxruntime thread each
(onnxruntime's intra-op thread pool spends much of its time synchronizing on matrices this small).
Results come back in input order. On CUDA the session uses IO binding and, with ``fp16=True``, a float16
copy of the model's float weights.
"""

# ruff: noqa: TRY004  (malformed input data is a ValueError: the CLI reports those as input errors)
from __future__ import annotations

import hashlib
import json
import os
import re
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Union

import numpy as np

PathLike = Union[str, "os.PathLike[str]"]

MODEL_FILES = ("model.onnx", "tokenizer.json", "config.json")
POOLINGS = ("mean", "cls", "last")
DEVICES = ("auto", "cuda", "cpu")


def _import_runtime() -> tuple[Any, Any]:
    """onnxruntime and tokenizers are an optional extra: fail with the install hint, not a bare ImportError."""
    try:
        import onnxruntime
        import tokenizers
    except ImportError as err:
        raise ImportError(
            f"clirkit encoders need onnxruntime and tokenizers ({err.name} is missing): "
            "pip install 'clirkit[encoders]' (or 'clirkit[gpu]' for onnxruntime-gpu)"
        ) from err
    return onnxruntime, tokenizers


def _pooling_from_config(config: dict[str, Any]) -> tuple[str | None, bool | None]:
    """(pooling, normalize) as stated in config.json, None where it says nothing."""
    raw = config.get("pooling")
    normalize = config.get("normalize")
    if normalize is not None and not isinstance(normalize, bool):
        raise ValueError(f"config.json: 'normalize' must be true or false, got {normalize!r}")
    if raw is None:
        return None, normalize
    if not isinstance(raw, str):
        raise ValueError(f"config.json: 'pooling' must be a string, got {raw!r}")
    text = raw.lower()
    found = [(m.start(), word) for word in POOLINGS for m in [re.search(rf"\b{word}\b", text)] if m]
    if not found:
        raise ValueError(f"config.json: 'pooling' {raw!r} names none of {', '.join(POOLINGS)}")
    pooling = min(found)[1]
    if normalize is None and "normaliz" in text:
        normalize = True
    return pooling, normalize


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
        threads: int | None = None,
        batch_invariant: bool = True,
    ) -> None:
        ort, tokenizers = _import_runtime()
        self.model_dir = Path(model_dir)
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
            raise ValueError(f"{config_path}: not valid JSON: {err}") from err

        cfg_pooling, cfg_normalize = _pooling_from_config(self.config)
        self.pooling = pooling or cfg_pooling or "mean"
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {self.pooling!r}")
        self.normalize = bool(normalize if normalize is not None else (cfg_normalize is not False))
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
            raise ValueError(f"max_length must be at least 2, got {self.max_length}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.batch_size = batch_size
        self.truncated = 0  # inputs cut at max_length so far

        self.tokenizer = tokenizers.Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(self.max_length)
        self.pad_id = int(self.config.get("pad_token_id", 0))
        # The passage splitter must see every token of a long document: a copy without truncation.
        self._splitter = tokenizers.Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        self._splitter.no_padding()
        self._splitter.no_truncation()

        self.device = self._pick_device(ort, device)
        self.fp16 = bool(fp16) if fp16 is not None else False
        if self.fp16 and self.device != "cuda":
            warnings.warn("fp16 applies to the CUDA provider only; encoding in float32 on CPU", stacklevel=2)
            self.fp16 = False
        self.batch_invariant = batch_invariant
        self.session = self._open_session(ort, threads)
        self.input_names = [i.name for i in self.session.get_inputs()]
        unknown = set(self.input_names) - {"input_ids", "attention_mask", "token_type_ids"}
        if unknown:
            raise ValueError(f"{self.model_dir / 'model.onnx'}: unsupported model inputs {sorted(unknown)}")
        self.output_name = self.session.get_outputs()[0].name
        self._check_vocabulary()

    # -- setup ---------------------------------------------------------------------------------------
    @staticmethod
    def _pick_device(ort: Any, device: str) -> str:
        if device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
        has_cuda = "CUDAExecutionProvider" in ort.get_available_providers()
        if device == "cuda" and not has_cuda:
            warnings.warn(
                "device 'cuda' requested but onnxruntime has no CUDA provider "
                "(install onnxruntime-gpu: pip install 'clirkit[gpu]'); encoding on CPU",
                stacklevel=3,
            )
            return "cpu"
        if device == "auto":
            return "cuda" if has_cuda else "cpu"
        return device

    def _open_session(self, ort: Any, threads: int | None) -> Any:
        options = ort.SessionOptions()
        model, rewritten = self._model_bytes()
        # onnxruntime's extended fusions change int8 rounding (up to 1e-2 cosine on degenerate
        # inputs), so a rewritten quantized graph gets the basic optimizations only: its vectors then
        # equal the original model's run one text at a time at that level.
        options.graph_optimization_level = (
            ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
            if rewritten
            else ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        )
        self.graph_optimization = "basic" if rewritten else "all"
        cores = threads if threads and threads > 0 else (os.cpu_count() or 1)
        if self.device == "cuda":
            # One stream of batches; CPU threads only serve nodes the CUDA provider lacks.
            self.workers = 1
            options.intra_op_num_threads = cores
        else:
            # Parallelism across inputs, one thread each: no intra-op synchronization per operator.
            self.workers = cores
            options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        providers = ["CPUExecutionProvider"]
        if self.device == "cuda":
            providers.insert(0, "CUDAExecutionProvider")
        return ort.InferenceSession(model, sess_options=options, providers=providers)

    def _model_bytes(self) -> tuple[bytes, bool]:
        """model.onnx, rewritten for per-sequence int8 activation quantization when it is dynamically
        quantized and batched on CUDA (see :mod:`clirkit.quantization`) and with float16 weights when
        fp16 is on; and whether it was rewritten for quantization. Also decides
        :attr:`one_text_per_call` (a dynamically quantized model on CPU)."""
        path = self.model_dir / "model.onnx"
        raw = path.read_bytes()
        # Operator types are plain strings in the protobuf: no need to parse a float model.
        dynamic = b"DynamicQuantizeLinear" in raw
        # On CPU such a model runs one text per call instead (see the module docstring).
        self.one_text_per_call = self.batch_invariant and dynamic and self.device != "cuda"
        quantized = self.batch_invariant and dynamic and self.device == "cuda"
        if self.fp16 and b"DynamicQuantizeLinear" in raw:
            warnings.warn(
                "fp16 applies to float models; this model is dynamically int8-quantized, so its float "
                "parts stay float32",
                stacklevel=4,
            )
            self.fp16 = False
        if not (quantized or self.fp16):
            return raw, False
        try:
            import onnx
        except ImportError as err:
            raise ImportError(
                "clirkit encoders need the onnx package to prepare the model graph: "
                "pip install 'clirkit[encoders]' (or pass batch_invariant=False)"
            ) from err
        model = onnx.load_from_string(raw)
        rewritten = False
        if quantized:
            from clirkit.quantization import per_sequence_quantization

            rewritten = per_sequence_quantization(model) is not None
        if self.fp16:
            from onnxruntime.transformers.float16 import convert_float_to_float16

            model = convert_float_to_float16(model, keep_io_types=True)
        return model.SerializeToString(), rewritten

    def _check_vocabulary(self) -> None:
        """A tokenizer that emits ids beyond the embedding table gives garbage or crashes mid-corpus:
        refuse it up front."""
        tokenizer_vocab = self.tokenizer.get_vocab_size(with_added_tokens=True)
        model_vocab = self.config.get("vocab_size")
        if model_vocab is not None:
            if tokenizer_vocab > int(model_vocab):
                raise ValueError(
                    f"{self.model_dir}: tokenizer.json has {tokenizer_vocab} tokens but the model's "
                    f"embedding table (config.json vocab_size) has {model_vocab}: they do not belong together"
                )
            return
        # No vocab_size in config.json: probe the embedding table with the largest token id.
        probe = np.array([[tokenizer_vocab - 1]], dtype=np.int64)
        try:
            self._run(probe, np.ones_like(probe))
        except Exception as err:  # onnxruntime raises its own error types for out-of-range gathers
            raise ValueError(
                f"{self.model_dir}: the model rejects token id {tokenizer_vocab - 1} of tokenizer.json "
                f"({tokenizer_vocab} tokens): tokenizer and model do not belong together ({err})"
            ) from err

    # -- identity ------------------------------------------------------------------------------------
    def fingerprint(self) -> str:
        """A digest of the model files and every setting that changes the vectors (for resumable
        corpus encoding: a resumed run must use the same encoder)."""
        h = hashlib.sha256()
        for name in MODEL_FILES:
            st = (self.model_dir / name).stat()
            h.update(f"{name}:{st.st_size}:{st.st_mtime_ns};".encode())
        h.update((self.model_dir / "config.json").read_bytes())
        settings = [
            self.pooling,
            self.normalize,
            self.query_prefix,
            self.passage_prefix,
            self.max_length,
            self.batch_invariant,
            self.one_text_per_call,
            self.graph_optimization,
            self.fp16,
        ]
        h.update(json.dumps(settings).encode())
        return h.hexdigest()

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
        return self.encode(texts, prefix=self.query_prefix)

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Encode documents or passages (with the passage prefix). Returns float32 ``(len(texts), dim)``."""
        return self.encode(texts, prefix=self.passage_prefix)

    def encode(self, texts: Sequence[str], prefix: str = "") -> np.ndarray:
        """Encode ``prefix + text`` for each text, in input order. Empty texts are encoded as the
        prefix alone (special tokens only without one); inputs over ``max_length`` tokens are truncated
        and counted in :attr:`truncated`."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of texts, not a single string")
        texts = [prefix + (t if t is not None else "") for t in texts]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(texts)
        self.truncated += sum(1 for e in encodings if e.overflowing)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        # Stable sort, longest first: the first batch is the biggest, so memory problems show at once.
        order = np.argsort(-lengths, kind="stable")
        size = 1 if self.one_text_per_call else self.batch_size
        batches = [order[start : start + size] for start in range(0, len(order), size)]

        def embed(batch: np.ndarray) -> np.ndarray:
            width = int(lengths[batch[0]])
            ids = np.full((len(batch), width), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                e = encodings[i]
                ids[row, : len(e.ids)] = e.ids
                mask[row, : len(e.ids)] = 1
            return self._embed(ids, mask)

        if self.workers > 1 and len(batches) > 1:
            # onnxruntime releases the GIL while it runs; one session serves concurrent calls.
            with ThreadPoolExecutor(min(self.workers, len(batches))) as pool:
                vectors = list(pool.map(embed, batches))
        else:
            vectors = [embed(batch) for batch in batches]
        out = np.empty((len(texts), vectors[0].shape[1]), dtype=np.float32)
        for batch, rows in zip(batches, vectors):
            out[batch] = rows
        return out

    def _embed(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        hidden = self._run(ids, mask).astype(np.float32, copy=False)
        if hidden.ndim == 2:  # the graph pools itself
            pooled = hidden
        elif self.pooling == "cls":
            pooled = hidden[:, 0]
        elif self.pooling == "last":
            pooled = hidden[np.arange(len(hidden)), mask.sum(axis=1) - 1]
        else:
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        if self.normalize:
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            pooled = pooled / np.maximum(norms, 1e-12)
        return np.ascontiguousarray(pooled, dtype=np.float32)

    def _feeds(self, ids: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
        available = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        return {name: available[name] for name in self.input_names}

    def _run(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        feeds = self._feeds(ids, mask)
        if self.device != "cuda":
            return self.session.run([self.output_name], feeds)[0]
        # IO binding: inputs copied to the GPU once, the output allocated there and copied back once.
        binding = self.session.io_binding()
        for name, array in feeds.items():
            binding.bind_cpu_input(name, array)
        binding.bind_output(self.output_name, "cuda")
        self.session.run_with_iobinding(binding)
        return binding.copy_outputs_to_cpu()[0]

    def token_windows(self, text: str, size: int, stride: int) -> list[str]:
        """Split ``text`` into passages of at most ``size`` tokens starting every ``stride`` tokens
        (special tokens and prefixes not counted), cut at token boundaries in the original text. A text
        that fits in one window comes back whole (an empty text gives one empty passage)."""
        if size < 1 or stride < 1:
            raise ValueError(f"passage windows need size >= 1 and stride >= 1, got {size}:{stride}")
        offsets = self._splitter.encode(text, add_special_tokens=False).offsets
        if len(offsets) <= size:
            return [text]
        passages = []
        for start in range(0, len(offsets), stride):
            end = min(start + size, len(offsets))
            passages.append(text[offsets[start][0] : offsets[end - 1][1]])
            if end == len(offsets):
                break
        return passages
