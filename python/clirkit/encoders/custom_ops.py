"""clirkit's onnxruntime custom operators (domain ``ai.clirkit``), computed by :mod:`clirkit._native`,
whose shared library onnxruntime loads them from (its ``RegisterCustomOps`` entry point), and what a
prepared CPU graph needs to give the shipped graph's vectors at onnxruntime's default level bit for bit.

A dynamically quantized encoder requantizes every layer's activations, so a change in the last bit of a
float anywhere moves its vectors by cosine ~0.998 at the worst document. Two kernels decide those bits
beyond what the prepared graph's rewrites keep exact:

- ``SkipLayerNormalization``: at its default level onnxruntime fuses each residual ``Add`` and
  ``LayerNormalization`` into it, and its CPU kernel steps one row and one value at a time through
  Welford's recurrence, waiting on a division at each value, several times slower than the two kernels it
  replaces. :func:`adopt_operators` hands such nodes to ``ai.clirkit.SkipLayerNormalization``, the
  same arithmetic on many rows at once (``clirkit_core::encode::layer_norm``).
- ``MultiHeadAttention``: without a padding mask onnxruntime's CPU kernel takes a flash-attention path,
  whose blocked softmax rounds otherwise than the unfused operators. :func:`adopt_operators` hands
  unmasked attention nodes to ``ai.clirkit.MultiHeadAttention``, the arithmetic of the unfused operators
  (MLAS's products, exponential and sums in its order, as on an AVX-512 CPU) without writing every
  head's scores to memory (``clirkit_core::encode::float_attention``). Masked nodes stay onnxruntime's;
  sessions opened within :func:`unblocked_attention` keep any onnxruntime attention kernel off the flash
  path (a padding mask turns it off anyway). onnxruntime reads its switch from the environment, which is
  process-wide: a session another thread creates at that moment takes the same path.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

DOMAIN = "ai.clirkit"
#: onnxruntime's switch for the flash path of its CPU ``MultiHeadAttention`` (read when a session
#: creates its kernels).
FLASH_SWITCH = "ORT_DISABLE_FLASH_ATTENTION"
_environment = threading.Lock()


def library_path() -> str:
    """The shared library onnxruntime loads clirkit's operators from: :mod:`clirkit._native` itself."""
    from clirkit import _native

    return str(_native.__file__)


def register(options: Any) -> None:
    """Makes the ``ai.clirkit`` operators available to sessions created with ``options`` (an
    ``onnxruntime.SessionOptions``)."""
    options.register_custom_ops_library(library_path())


def _skip_layer_norm_fits(node: Any) -> bool:
    # clirkit's operator does not compute the mean and inverse deviation outputs.
    return not any(name for name in node.output[1:3])


#: ``MultiHeadAttention``'s inputs and outputs in order (onnxruntime's contrib operator).
_ATTENTION_INPUTS = (
    "query",
    "key",
    "value",
    "bias",
    "key_padding_mask",
    "attention_bias",
    "past_key",
    "past_value",
    "past_sequence_length",
    "cache_indirection",
)
QKV = _ATTENTION_INPUTS[:3]
_ATTENTION_OUTPUTS = ("output", "present_key", "present_value", "qk")
#: Attributes plain self-attention may carry (``mask_filter_value`` only matters with a mask).
_ATTENTION_ATTRIBUTES = {"num_heads", "scale", "unidirectional", "mask_filter_value"}


def attention_refusal(node: Any, where: str) -> str | None:
    """Why ``node`` (a ``MultiHeadAttention``, named ``where`` in the reason) is not plain bidirectional
    self-attention of query, key and value alone (no bias, mask, past state, extra outputs or unknown
    attribute; positive ``num_heads``, finite ``scale``); None when it is."""
    from onnx import helper

    names, outputs = _ATTENTION_INPUTS, _ATTENTION_OUTPUTS
    extra = [names[i] if i < len(names) else f"input {i}" for i, x in enumerate(node.input) if x and i >= 3]
    if extra:
        return f"{where} takes {', '.join(extra)}"
    if len(node.input) < 3 or not all(node.input[:3]):
        return f"{where} lacks {', '.join(names[i] for i in range(3) if i >= len(node.input) or not node.input[i])}"
    given = [
        outputs[i] if i < len(outputs) else f"output {i}" for i, x in enumerate(node.output) if x and i >= 1
    ]
    if given:
        return f"{where} gives {', '.join(given)}"
    if not node.output or not node.output[0]:
        return f"{where} has no output"
    attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    unknown = sorted(set(attributes) - _ATTENTION_ATTRIBUTES)
    if unknown:
        return f"{where} has attribute {unknown[0]!r}, which clirkit does not know"
    if attributes.get("unidirectional", 0) != 0:
        return f"{where} is unidirectional (causal)"
    heads = attributes.get("num_heads")
    if not isinstance(heads, int) or heads < 1:
        return f"{where} has no positive num_heads"
    scale = float(attributes.get("scale", 0.0))
    if not math.isfinite(scale):
        return f"{where} has scale {scale}"
    return None


def _attention_fits(node: Any) -> bool:
    # clirkit's operator reads the scale from the node (onnxruntime's optimizer writes
    # ``unidirectional=0`` out when it saves a graph, which the refusal accepts).
    return attention_refusal(node, node.name) is None and any(a.name == "scale" for a in node.attribute)


#: The ``com.microsoft`` operators clirkit computes with onnxruntime's arithmetic, and whether a node's
#: use of one is within what clirkit's computes.
_ADOPTABLE = {"SkipLayerNormalization": _skip_layer_norm_fits, "MultiHeadAttention": _attention_fits}


def adopt_operators(model: Any) -> int:
    """Moves ``model``'s (an ``onnx.ModelProto`` onnxruntime optimized) ``com.microsoft``
    ``SkipLayerNormalization`` and ``MultiHeadAttention`` nodes to the ``ai.clirkit`` operators of the
    same names, inputs, outputs and attributes; the number moved. A node clirkit's operator does not
    cover (a layer normalization asked for its mean or inverse deviation; attention with a mask, bias,
    past state or another attribute) is left as it is."""
    from onnx import helper

    moved = 0
    for node in model.graph.node:
        fits = _ADOPTABLE.get(node.op_type)
        if node.domain != "com.microsoft" or fits is None or not fits(node):
            continue
        node.domain = DOMAIN
        moved += 1
    if moved and not any(o.domain == DOMAIN for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(DOMAIN, 1))
    return moved


@contextmanager
def unblocked_attention() -> Iterator[None]:
    """Within it, onnxruntime sessions created get ``MultiHeadAttention`` kernels that do not take the
    flash path (onnxruntime reads the switch from the environment when it creates a kernel); the
    environment is restored on leaving."""
    with _environment:
        before = os.environ.get(FLASH_SWITCH)
        os.environ[FLASH_SWITCH] = "1"
        try:
            yield
        finally:
            if before is None:
                del os.environ[FLASH_SWITCH]
            else:
                os.environ[FLASH_SWITCH] = before
