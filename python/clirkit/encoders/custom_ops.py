"""clirkit's onnxruntime custom operators (domain ``ai.clirkit``), computed by :mod:`clirkit._native`,
whose shared library onnxruntime loads them from (its ``RegisterCustomOps`` entry point), and what a
prepared CPU graph needs to give the shipped graph's vectors at onnxruntime's default level bit for bit.

A dynamically quantized encoder requantizes every layer's activations, so a change in the last bit of a
float anywhere moves its vectors by cosine ~0.998 at the worst document. Two kernels decide those bits
beyond what the prepared graph's rewrites keep exact:

- ``SkipLayerNormalization``: at its default level onnxruntime fuses each residual ``Add`` and
  ``LayerNormalization`` into it, and its CPU kernel steps one row and one value at a time through
  Welford's recurrence, waiting on a division at each value, several times slower than the two kernels it
  replaces. :func:`adopt_skip_layer_norm` hands such nodes to ``ai.clirkit.SkipLayerNormalization``, the
  same arithmetic on many rows at once (``clirkit_core::encode::layer_norm``).
- ``MultiHeadAttention``: without a padding mask onnxruntime's CPU kernel takes a flash-attention path,
  whose blocked softmax rounds otherwise than the unfused operators; sessions opened within
  :func:`unblocked_attention` take the other path, the arithmetic of the unfused operators (on e5-small's
  shapes about a tenth slower per call, a few per cent of a document; a padding mask, which also turns
  the flash path off, costs more). onnxruntime reads its switch from the environment, which is
  process-wide: a session another thread creates at that moment takes the same path.
"""

from __future__ import annotations

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


def adopt_skip_layer_norm(model: Any) -> int:
    """Moves ``model``'s (an ``onnx.ModelProto`` onnxruntime optimized) ``com.microsoft``
    ``SkipLayerNormalization`` nodes to the ``ai.clirkit`` operator of the same name, inputs, outputs and
    attributes; the number moved. A node that asks for the mean or inverse deviation outputs (which the
    clirkit operator does not compute) is left as it is."""
    from onnx import helper

    moved = 0
    for node in model.graph.node:
        if node.op_type != "SkipLayerNormalization" or node.domain != "com.microsoft":
            continue
        if any(name for name in node.output[1:3]):
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
