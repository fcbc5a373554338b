"""The onnxruntime side of an encoder: the optional runtime imports, the device, the model graph as it
is run (rewritten for per-sequence quantization or float16 where asked), the session and its calls."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clirkit._native import InvalidInputError
from clirkit._threads import worker_count

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
    :mod:`clirkit.encoders.onnx_encoder`). ``graph_optimization``: ``all``, or ``basic`` for a rewritten
    quantized graph. ``fp16``: whether float16 weights are in use (turned off for a quantized model).
    """

    session: Any
    device: str
    workers: int
    graph_optimization: str
    one_text_per_call: bool
    fp16: bool
    input_names: list[str]
    output_name: str

    def run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        """The model's first output for ``feeds``."""
        if self.device != "cuda":
            return self.session.run([self.output_name], feeds)[0]
        # IO binding: inputs copied to the GPU once, the output allocated there and copied back once.
        binding = self.session.io_binding()
        for name, array in feeds.items():
            binding.bind_cpu_input(name, array)
        binding.bind_output(self.output_name, "cuda")
        self.session.run_with_iobinding(binding)
        return binding.copy_outputs_to_cpu()[0]


def open_session(
    ort: Any, model_path: Path, device: str, threads: int, batch_invariant: bool, fp16: bool
) -> OnnxSession:
    """A session for ``model_path`` on ``device`` (``cuda`` or ``cpu``) with ``threads`` workers (0: all
    cores)."""
    options = ort.SessionOptions()
    model, rewritten, one_text_per_call, fp16 = _model_bytes(model_path, device, batch_invariant, fp16)
    # onnxruntime's extended fusions change int8 rounding (up to 1e-2 cosine on degenerate
    # inputs), so a rewritten quantized graph gets the basic optimizations only: its vectors then
    # equal the original model's run one text at a time at that level.
    options.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        if rewritten
        else ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    )
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
    session = ort.InferenceSession(model, sess_options=options, providers=providers)
    return OnnxSession(
        session=session,
        device=device,
        workers=workers,
        graph_optimization="basic" if rewritten else "all",
        one_text_per_call=one_text_per_call,
        fp16=fp16,
        input_names=[i.name for i in session.get_inputs()],
        output_name=session.get_outputs()[0].name,
    )


def _model_bytes(
    path: Path, device: str, batch_invariant: bool, fp16: bool
) -> tuple[bytes, bool, bool, bool]:
    """model.onnx, rewritten for per-sequence int8 activation quantization when it is dynamically
    quantized and batched on CUDA (see :mod:`clirkit.encoders.quantization`) and with float16 weights when
    ``fp16`` is on; whether it was rewritten for quantization; whether it runs one text per call (a
    dynamically quantized model on CPU); and whether float16 stays on."""
    raw = path.read_bytes()
    # Operator types are plain strings in the protobuf: no need to parse a float model.
    dynamic = b"DynamicQuantizeLinear" in raw
    # On CPU such a model runs one text per call instead (see clirkit.encoders.onnx_encoder).
    one_text_per_call = batch_invariant and dynamic and device != "cuda"
    quantized = batch_invariant and dynamic and device == "cuda"
    if fp16 and dynamic:
        warnings.warn(
            "fp16 applies to float models; this model is dynamically int8-quantized, so its float "
            "parts stay float32",
            stacklevel=4,
        )
        fp16 = False
    if not (quantized or fp16):
        return raw, False, one_text_per_call, fp16
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
        from clirkit.encoders.quantization import per_sequence_quantization

        rewritten = per_sequence_quantization(model) is not None
    if fp16:
        from onnxruntime.transformers.float16 import convert_float_to_float16

        model = convert_float_to_float16(model, keep_io_types=True)
    return model.SerializeToString(), rewritten, one_text_per_call, fp16
