"""The onnxruntime side of an encoder: the optional runtime imports, the device, the model graph as it
is run (rewritten for per-sequence quantization or float16 where asked), the session, its inputs and its
calls.

Models load by path, so ONNX files whose weights live in external-data files beside the graph (any model
over protobuf's 2 GB limit) load as they are. Inputs are cast to the types the graph declares (int32 ids,
float16 masks) and outputs come back as float32, so float16 and float32 exports are used alike.

Inputs other than the tokenizer's are fed from ``config.json``'s ``"input_values"`` object, input name to value
(a number or nested list), e.g. ``{"input_values": {"task_id": 2}}`` for a model with a task-adapter input,
or per role, ``{"input_values": {"query": {"task_id": 0}, "passage": {"task_id": 1}}}``; an encoder's
``input_values`` argument adds to or replaces them. A
value is cast to the input's declared type and broadcast to its shape: fixed dimensions as declared, a
symbolic first dimension to the batch and a symbolic second one to the sequence length. Without an entry,
``token_type_ids`` is fed the tokenizer's type ids (zeros for single texts) and ``position_ids`` the
positions ``0, 1, …`` of each sequence; any other input is an error naming it.
"""

from __future__ import annotations

import mmap
import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clirkit._native import InvalidInputError
from clirkit._threads import worker_count
from clirkit.encoders.graph_pooling import GRAPH_POOLINGS, pool_in_graph

DEVICES = ("auto", "cuda", "cpu")


def import_runtime() -> tuple[Any, Any]:
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


def pick_device(ort: Any, device: str) -> str:
    """``cuda`` or ``cpu`` for the requested ``device`` (``auto``: CUDA when onnxruntime has it)."""
    if device not in DEVICES:
        raise InvalidInputError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
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


@dataclass
class OnnxSession:
    """An inference session over ``model.onnx`` and how it is run.

    ``workers``: concurrent calls (one onnxruntime thread each on CPU; 1 on CUDA).
    ``one_text_per_call``: a dynamically quantized model on CPU runs each text alone (see
    :mod:`clirkit.encoders.onnx_encoder`). ``graph_optimization``: ``all`` (the shipped graph at
    onnxruntime's default level), ``basic`` for a rewritten quantized graph, ``prepared-vN`` for the
    prepared CPU graph of :mod:`clirkit.encoders.graph_cache` (``prepared-vN-int8-attention``: cut at its
    attention, computed in int8 by :func:`clirkit.encoders.split_attention.int8_attention_session`). ``fp16``: whether float16 weights are in use (turned off for a quantized model).
    """

    session: Any
    device: str
    workers: int
    graph_optimization: str
    one_text_per_call: bool
    fp16: bool
    input_names: list[str]
    output_name: str
    #: The vocabulary projection split off the graph (:mod:`clirkit.encoders.vocab_projection`), a
    #: :class:`clirkit._native.VocabProjection` whose input is the output :attr:`output_name`; None
    #: when the graph runs whole.
    projection: Any = None

    def run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        """The model's output named :attr:`output_name` for ``feeds``, as float32."""
        return self.run_outputs(feeds, [self.output_name])[0]

    def run_outputs(self, feeds: dict[str, np.ndarray], names: list[str]) -> list[np.ndarray]:
        """The model's outputs ``names`` for ``feeds`` from one forward pass, as float32."""
        if self.device != "cuda":
            outputs = self.session.run(names, feeds)
        else:
            # IO binding: inputs copied to the GPU once, the outputs allocated there and copied back once.
            binding = self.session.io_binding()
            for name, array in feeds.items():
                binding.bind_cpu_input(name, array)
            for name in names:
                binding.bind_output(name, "cuda")
            self.session.run_with_iobinding(binding)
            outputs = binding.copy_outputs_to_cpu()
        return [np.asarray(output).astype(np.float32, copy=False) for output in outputs]


#: numpy types of the ONNX tensor types an input may declare.
_INPUT_TYPES = {
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(bool)": np.bool_,
}


#: The roles a text is encoded in; ``input_values`` may give an input a value per role.
ROLES = ("query", "passage")


def role_input_values(values: Any, where: str) -> dict[str, dict[str, Any]]:
    """``{role: {input name: value}}`` from an ``input_values`` object: ``{name: value}`` for both roles,
    ``{"query": {name: value}, "passage": {name: value}}`` per role (Jina v3's task ids), or both (a
    role's table wins for its role). ``where`` names the object in errors."""
    if not isinstance(values, Mapping):
        raise InvalidInputError(f"{where} must be an object of input names, got {values!r}")
    common = {k: v for k, v in values.items() if not (k in ROLES and isinstance(v, Mapping))}
    out = {role: dict(common) for role in ROLES}
    for role in ROLES:
        own = values.get(role)
        if isinstance(own, Mapping):
            out[role].update(own)
    for role, named in out.items():
        for name, value in named.items():
            try:
                array = np.asarray(value)
            except (TypeError, ValueError):
                array = None
            if array is None or not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
                raise InvalidInputError(
                    f"{where}: {role} input {name!r} must be a number or an array of numbers"
                )
    return out


class ModelInputs:
    """Builds a session's feeds from token ids, attention mask and type ids (see the module docstring for
    ``config.json``'s ``"input_values"`` and the defaults). ``input_values`` (the encoder's argument)
    adds to or replaces config.json's, role by role (:func:`role_input_values`); a text encoded with no
    role (a probe, a cross-encoder pair) gets the passage values."""

    def __init__(
        self,
        session: Any,
        config: Mapping[str, Any],
        model_path: Path,
        input_values: Mapping[str, Any] | None = None,
    ) -> None:
        configured = role_input_values(
            config.get("input_values", {}), f"{model_path}: config.json 'input_values'"
        )
        for role, named in role_input_values(input_values or {}, "input_values").items():
            configured[role].update(named)
        self._inputs: list[tuple[str, Any, list[Any], Any]] = []
        for node in session.get_inputs():
            dtype = _INPUT_TYPES.get(node.type)
            if dtype is None:
                raise InvalidInputError(f"{model_path}: input {node.name!r} has unsupported type {node.type}")
            shape = list(node.shape) if node.shape is not None else []
            given = [role for role in ROLES if node.name in configured[role]]
            if len(given) == len(ROLES):
                value = {role: np.asarray(configured[role][node.name]) for role in ROLES}
            elif node.name in ("input_ids", "attention_mask", "token_type_ids", "position_ids") and not given:
                value = None
            else:
                missing = f" for {', '.join(r for r in ROLES if r not in given)} texts" if given else ""
                raise InvalidInputError(
                    f"{model_path}: the model needs input {node.name!r}{missing}, which the tokenizer does "
                    f'not give: set it in config.json, e.g. "input_values": {{"{node.name}": 0}}, or per '
                    f'role, e.g. {{"query": {{"{node.name}": 0}}, "passage": {{"{node.name}": 1}}}}'
                )
            self._inputs.append((node.name, dtype, shape, value))
        self.values = {
            role: {name: value[role].tolist() for name, _, _, value in self._inputs if value is not None}
            for role in ROLES
        }

    def feeds(
        self, ids: np.ndarray, mask: np.ndarray, type_ids: np.ndarray | None = None, role: str | None = None
    ) -> dict[str, np.ndarray]:
        """The session's feeds for a padded batch of ``role`` texts (``type_ids`` default to zeros)."""
        feeds = {}
        for name, dtype, shape, value in self._inputs:
            if value is not None:
                array = np.broadcast_to(value[role or "passage"], _concrete_shape(shape, ids.shape))
            elif name == "input_ids":
                array = ids
            elif name == "attention_mask":
                array = mask
            elif name == "token_type_ids":
                array = type_ids if type_ids is not None else np.zeros_like(ids)
            else:
                array = np.broadcast_to(np.arange(ids.shape[1], dtype=np.int64), ids.shape)
            feeds[name] = np.ascontiguousarray(array, dtype=dtype)
        return feeds


def _concrete_shape(declared: list[Any], batch_shape: tuple[int, ...]) -> tuple[int, ...]:
    """``declared`` with symbolic dimensions replaced: the first by the batch size, the second by the
    sequence length."""
    return tuple(
        dim if isinstance(dim, int) else batch_shape[min(axis, len(batch_shape) - 1)]
        for axis, dim in enumerate(declared)
    )


def open_session(
    ort: Any,
    model_path: Path,
    device: str,
    threads: int,
    batch_invariant: bool,
    fp16: bool,
    optimize_graph: bool = True,
    pooling: str | None = None,
    nonempty: bool = False,
    split_output: str | None = None,
) -> OnnxSession:
    """A session for ``model_path`` on ``device`` (``cuda`` or ``cpu``) with ``threads`` workers (0: all
    cores). On CPU with ``optimize_graph`` the graph run is the prepared one of
    :mod:`clirkit.encoders.graph_cache` (attention fused, cached); otherwise the shipped graph at
    onnxruntime's default level, bit for bit what a plain onnxruntime loop gives. On CUDA a dense
    encoder's ``pooling`` is done in the graph where :mod:`clirkit.encoders.graph_pooling` can. With
    ``split_output`` (the prepared CPU graph only), that output's vocabulary projection is split off where
    :mod:`clirkit.encoders.vocab_projection` finds one: :attr:`OnnxSession.projection`."""
    options = ort.SessionOptions()
    if not model_path.is_file():
        raise FileNotFoundError(f"model file {model_path} does not exist")
    model, rewritten, one_text_per_call, fp16 = _prepared_model(
        model_path, device, batch_invariant, fp16, pooling
    )
    # Fast mode of a dynamically quantized model on CPU: one text per call with attention in int8
    # (clirkit.encoders.split_attention), where the prepared graph can be cut and the CPU has the kernel.
    int8_attention = (
        not batch_invariant
        and optimize_graph
        and device != "cuda"
        and isinstance(model, Path)
        and is_dynamically_quantized(model_path)
    )
    # onnxruntime's extended fusions change int8 rounding (up to 1e-2 cosine on degenerate
    # inputs), so a rewritten quantized graph gets the basic optimizations only: its vectors then
    # equal the original model's run one text at a time at that level.
    options.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        if rewritten
        else ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    )
    graph_optimization = "basic" if rewritten else "all"
    disabled: list[str] = []
    projection = None
    split = None
    prepared = False
    if optimize_graph and device != "cuda" and isinstance(model, Path):
        from clirkit.encoders.graph_cache import (
            DISABLED_OPTIMIZERS,
            PREPARATION_VERSION,
            prepared_graph,
            projection_file,
        )
        from clirkit.encoders.split_attention import int8_attention_session

        shipped = model
        try:
            if int8_attention:
                unpadded = prepared_graph(
                    ort, model, masked=False, nonempty=nonempty, split_output=split_output
                )
                split = int8_attention_session(ort, unpadded) if unpadded != shipped else None
                if split is not None:
                    model, one_text_per_call = unpadded, True
            if split is None:
                model = prepared_graph(
                    ort, model, masked=not one_text_per_call, nonempty=nonempty, split_output=split_output
                )
        except ImportError:  # no onnx package: onnxruntime's own optimizations only
            pass
        disabled = list(DISABLED_OPTIMIZERS)
        prepared = model != shipped
        graph_optimization = f"prepared-v{PREPARATION_VERSION}"
        if prepared and projection_file(model).is_file():
            projection = _load_projection(projection_file(model))
            graph_optimization += "-split"
        if split is not None:
            graph_optimization += "-int8-attention"
    cores = worker_count(threads)
    if device == "cuda":
        # One stream of batches; CPU threads only serve nodes the CUDA provider lacks.
        workers = 1
        options.intra_op_num_threads = cores
    else:
        # Parallelism across inputs, one thread each: no intra-op synchronization per operator.
        workers = cores
        options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    providers = ["CPUExecutionProvider"]
    if device == "cuda":
        providers.insert(0, "CUDAExecutionProvider")
    if split is not None:
        session = split
    elif prepared:
        from clirkit.encoders.graph_cache import open_prepared

        session = open_prepared(ort, model, options, providers)
    elif isinstance(model, Path):
        try:
            session = ort.InferenceSession(
                str(model), sess_options=options, providers=providers, disabled_optimizers=disabled
            )
        except Exception:  # onnxruntime raises its own error types for graphs it cannot load
            # onnxruntime needs small tensors that feed shapes inline in the graph; an export that put
            # every tensor in external data loads once re-saved with small tensors inline.
            if not _has_external_tensors(model):
                raise
            model = _resaved(_import_onnx().load(str(model)))
    if not isinstance(model, Path):
        with model:  # a prepared graph saved with its external data; the session holds its own copy
            session = ort.InferenceSession(
                str(Path(model.name) / "model.onnx"), sess_options=options, providers=providers
            )
    if device == "cuda" and "CUDAExecutionProvider" not in session.get_providers():
        # onnxruntime falls back to the CPU when the CUDA provider's libraries fail to load.
        warnings.warn(
            "device 'cuda' requested but onnxruntime could not start its CUDA provider (CUDA or cuDNN "
            "libraries not found; onnxruntime's log says which): encoding on CPU",
            stacklevel=3,
        )
        device = "cpu"
    return OnnxSession(
        session=session,
        device=device,
        workers=workers,
        graph_optimization=graph_optimization,
        one_text_per_call=one_text_per_call,
        fp16=fp16,
        input_names=[i.name for i in session.get_inputs()],
        output_name=session.get_outputs()[0].name,
        projection=projection,
    )


def _load_projection(path: Path) -> Any:
    """The :class:`clirkit._native.VocabProjection` saved at ``path`` by the graph cache."""
    from clirkit._native import VocabProjection

    with np.load(path) as arrays:
        return VocabProjection(arrays["weight"], arrays["bias"])


def _prepared_model(
    path: Path, device: str, batch_invariant: bool, fp16: bool, pooling: str | None
) -> tuple[Path | tempfile.TemporaryDirectory[str], bool, bool, bool]:
    """The model to run: ``path`` itself, or a temporary directory holding model.onnx rewritten for
    per-sequence int8 activation quantization when it is dynamically quantized and batched on CUDA (see
    :mod:`clirkit.encoders.quantization`), or dequantized to float weights when ``fp16`` is asked for such
    a model on CUDA, with float16 weights when ``fp16`` is on and pooling in the graph on CUDA; whether it was
    rewritten for quantization; whether it runs one text per call (a dynamically quantized model on CPU);
    and whether float16 stays on."""
    dynamic = is_dynamically_quantized(path)
    # On CPU such a model runs one text per call instead (see clirkit.encoders.onnx_encoder).
    one_text_per_call = batch_invariant and dynamic and device != "cuda"
    # float16 on a dynamically quantized model: its weights are dequantized, so nothing is quantized
    # per batch any more (GPUs run the float16 graph on tensor cores; their int8 path is slower).
    dequantize = fp16 and dynamic and device == "cuda"
    quantized = batch_invariant and dynamic and device == "cuda" and not dequantize
    graph_pooling = device == "cuda" and pooling in GRAPH_POOLINGS
    if not (quantized or fp16 or graph_pooling):
        return path, False, one_text_per_call, fp16
    onnx = _import_onnx()
    model = onnx.load(str(path))  # external data, if any, is read from beside the graph
    rewritten = False
    if dequantize:
        from clirkit.encoders.quantization import float_weights

        float_weights(model)
    if quantized:
        from clirkit.encoders.quantization import per_sequence_quantization

        rewritten = per_sequence_quantization(model) is not None
    if fp16:
        from onnxruntime.transformers.float16 import convert_float_to_float16

        model = convert_float_to_float16(model, keep_io_types=True)
    if graph_pooling:
        pool_in_graph(model, pooling)
    return _resaved(model), rewritten, one_text_per_call, fp16


def _import_onnx() -> Any:
    try:
        import onnx
    except ImportError as err:
        raise ImportError(
            "clirkit encoders need the onnx package to prepare the model graph: "
            "pip install 'clirkit[encoders]' (or pass batch_invariant=False)"
        ) from err
    return onnx


def _resaved(model: Any) -> tempfile.TemporaryDirectory[str]:
    """A temporary directory holding ``model`` as model.onnx, its large tensors in external data (a
    prepared model may exceed protobuf's 2 GB) and its small ones inline."""
    scratch = tempfile.TemporaryDirectory(prefix="clirkit-model-")
    _import_onnx().save_model(
        model,
        str(Path(scratch.name) / "model.onnx"),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="model.onnx.data",
    )
    return scratch


def _has_external_tensors(path: Path) -> bool:
    """Whether the graph at ``path`` keeps tensors in external-data files."""
    try:
        import onnx
    except ImportError:
        return False
    graph = onnx.load(str(path), load_external_data=False).graph
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in graph.initializer)


def is_dynamically_quantized(path: Path) -> bool:
    """Whether the graph holds DynamicQuantizeLinear nodes: operator types are plain strings in the
    protobuf, so the file is scanned, not parsed (mapped: it can be large)."""
    with path.open("rb") as f:
        if path.stat().st_size == 0:
            return False
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return mapped.find(b"DynamicQuantizeLinear") >= 0
