"""Batch-invariant dynamic int8 quantization for ONNX encoders.

onnxruntime's dynamically quantized models (``DynamicQuantizeLinear`` -> ``MatMulInteger``) pick ONE
activation scale and zero point for the whole input tensor. In a padded batch that tensor holds every
sequence of the batch and the padding positions, so a text's embedding depends on which other texts
share its batch (cosine to the one-at-a-time result as low as 0.97 with multilingual-e5-small-int8).

:func:`per_sequence_quantization` rewrites such a graph so that each sequence is quantized with the
scale and zero point computed over its own real tokens, which is exactly what running it alone does:
batched results then equal one-text-at-a-time results. The int8 matrix products stay int8:
``MatMulInteger`` runs without the activation zero point and the zero point's contribution,
``zero_point * column_sums(W - W_zero_point)``, is subtracted afterwards in int32 (exact).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np

from clirkit._native import InvalidInputError
from clirkit.encoders.attention import drop_unused_initializers, topological

QUANT_MAX = 255.0  # uint8 activations


def per_sequence_quantization(model: Any, mask_input: str = "attention_mask") -> Any | None:
    """Rewrite a dynamically quantized ``onnx.ModelProto`` in place for per-sequence activation
    quantization (see the module docstring). Returns the model, or ``None`` when it has no
    ``DynamicQuantizeLinear`` (nothing depends on the batch) or no ``mask_input``.

    Raises :class:`InvalidInputError` for a quantized pattern it does not recognize, rather than guess.
    """
    from onnx import helper, numpy_helper

    graph = model.graph
    if not any(n.op_type == "DynamicQuantizeLinear" for n in graph.node):
        return None
    if mask_input not in {i.name for i in graph.input}:
        return None
    initializers = {t.name: t for t in graph.initializer}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    def const(name: str, value: np.ndarray) -> str:
        graph.initializer.append(numpy_helper.from_array(value, name))
        return name

    zero = const("clirkit_pq_zero", np.array(0.0, dtype=np.float32))
    qmax = const("clirkit_pq_qmax", np.array(QUANT_MAX, dtype=np.float32))
    flat = const("clirkit_pq_flat", np.array([-1], dtype=np.int64))
    unsqueeze_axes = const("clirkit_pq_axis2", np.array([2], dtype=np.int64))
    # mask [B, S] -> bool [B, S, 1]: padding positions must not widen a sequence's range.
    prologue = [
        helper.make_node("Cast", [mask_input], ["clirkit_pq_mask_bool"], to=9),
        helper.make_node("Unsqueeze", ["clirkit_pq_mask_bool", unsqueeze_axes], ["clirkit_pq_mask3"]),
    ]

    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)

    def reduce(op: str, source: str, target: str, axes: list[int]) -> Any:
        if opset >= 18:  # axes became an input in opset 18
            name = const(f"clirkit_pq_axes{''.join(map(str, axes))}_{len(graph.initializer)}", np.array(axes))
            return helper.make_node(op, [source, name], [target], keepdims=1)
        return helper.make_node(op, [source], [target], axes=axes, keepdims=1)

    replaced: dict[int, list[Any]] = {}  # id(node) -> nodes replacing it
    after: dict[int, list[Any]] = {}  # id(node) -> nodes inserted right after it
    for index, node in enumerate(graph.node):
        if node.op_type != "DynamicQuantizeLinear":
            continue
        x = node.input[0]
        q_out, scale_out, zp_out = node.output
        p = f"clirkit_pq{index}"
        zp_float, zp_int = f"{p}_zp", f"{p}_zp_int32"
        replaced[id(node)] = [
            # Per-token extremes first, then mask the small [B, S, 1] tensors: no masked copy of x.
            reduce("ReduceMax", x, f"{p}_token_max", [2]),
            reduce("ReduceMin", x, f"{p}_token_min", [2]),
            helper.make_node("Where", ["clirkit_pq_mask3", f"{p}_token_max", zero], [f"{p}_masked_max"]),
            helper.make_node("Where", ["clirkit_pq_mask3", f"{p}_token_min", zero], [f"{p}_masked_min"]),
            reduce("ReduceMax", f"{p}_masked_max", f"{p}_max", [1, 2]),
            reduce("ReduceMin", f"{p}_masked_min", f"{p}_min", [1, 2]),
            # Zero is always representable (DynamicQuantizeLinear's rule).
            helper.make_node("Max", [f"{p}_max", zero], [f"{p}_rmax"]),
            helper.make_node("Min", [f"{p}_min", zero], [f"{p}_rmin"]),
            helper.make_node("Sub", [f"{p}_rmax", f"{p}_rmin"], [f"{p}_range"]),
            helper.make_node("Div", [f"{p}_range", qmax], [scale_out]),
            helper.make_node("Sub", [zero, f"{p}_rmin"], [f"{p}_neg_min"]),
            helper.make_node("Div", [f"{p}_neg_min", scale_out], [f"{p}_zp_raw"]),
            helper.make_node("Round", [f"{p}_zp_raw"], [f"{p}_zp_round"]),
            helper.make_node("Clip", [f"{p}_zp_round", zero, qmax], [zp_float]),
            # One QuantizeLinear per tensor, per-axis along the batch axis: one scale per sequence.
            helper.make_node("Reshape", [scale_out, flat], [f"{p}_scale_1d"]),
            helper.make_node("Reshape", [zp_float, flat], [f"{p}_zp_1d_float"]),
            helper.make_node("Cast", [f"{p}_zp_1d_float"], [f"{p}_zp_1d"], to=2),  # uint8
            helper.make_node("QuantizeLinear", [x, f"{p}_scale_1d", f"{p}_zp_1d"], [q_out], axis=0),
            helper.make_node("Cast", [zp_float], [zp_int], to=6),  # int32
        ]
        for user in consumers.get(zp_out, []):
            if user.op_type != "MatMulInteger" or list(user.input).index(zp_out) != 2:
                raise InvalidInputError(
                    f"unsupported use of a dynamic zero point by {user.op_type} '{user.name}'"
                )
            weight_name = user.input[1]
            weight_zp_name = user.input[3] if len(user.input) > 3 else ""
            if weight_name not in initializers or (weight_zp_name and weight_zp_name not in initializers):
                raise InvalidInputError(f"MatMulInteger '{user.name}': weights are not constant initializers")
            weight = numpy_helper.to_array(initializers[weight_name]).astype(np.int64)
            if weight_zp_name:
                weight = weight - numpy_helper.to_array(initializers[weight_zp_name]).astype(np.int64)
            column_sums = const(f"{p}_{user.output[0]}_colsum", weight.sum(axis=0).astype(np.int32))
            user.input[2] = ""
            # In int32, like MatMulInteger itself: subtracting in float would cancel catastrophically.
            exact = user.output[0]
            user.output[0] = f"{exact}_without_zp"
            after.setdefault(id(user), []).extend(
                [
                    helper.make_node("Mul", [zp_int, column_sums], [f"{exact}_zp_term"]),
                    helper.make_node("Sub", [f"{exact}_without_zp", f"{exact}_zp_term"], [exact]),
                ]
            )

    nodes = list(prologue)
    for node in graph.node:
        nodes.extend(replaced.get(id(node), [node]))
        nodes.extend(after.get(id(node), []))
    del graph.node[:]
    graph.node.extend(nodes)
    return model


def float_weights(model: Any) -> Any | None:
    """Rewrite a dynamically quantized ``onnx.ModelProto`` in place into a float one: each
    ``DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(scale)`` chain becomes one ``MatMul`` by the
    dequantized weights, ``(W - W_zero_point) * W_scale``. Returns the model, or ``None`` when it has no
    ``MatMulInteger``.

    This is for GPUs: there the dynamic int8 path runs its quantization on the CPU provider, while a float
    graph converts to float16 and runs on tensor cores. The vectors are those of the float model the int8
    one approximates, not bit for bit the int8 model's. Raises :class:`InvalidInputError` for a quantized
    pattern it does not recognize, rather than guess.
    """
    from onnx import helper, numpy_helper

    graph = model.graph
    if not any(n.op_type == "MatMulInteger" for n in graph.node):
        return None
    initializers = {t.name: t for t in graph.initializer}
    producers = {output: node for node in graph.node for output in node.output}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    def only_consumer(name: str, op_type: str, user: Any) -> Any:
        found = consumers.get(name, [])
        if len(found) != 1 or found[0].op_type != op_type:
            raise InvalidInputError(
                f"MatMulInteger '{user.name}': expected its output to feed one {op_type}, "
                f"found {[n.op_type for n in found]}"
            )
        return found[0]

    def constant(name: str) -> np.ndarray:
        if name not in initializers:
            raise InvalidInputError(f"quantized weight input {name!r} is not a constant initializer")
        return numpy_helper.to_array(initializers[name])

    def gather_axis(node: Any) -> dict[str, int]:
        return {a.name: a.i for a in node.attribute if a.name == "axis"}

    def float_activation(user: Any) -> tuple[str, str]:
        """The float tensor a MatMulInteger's quantized input stands for, and that input's scale: the
        input of its DynamicQuantizeLinear, or the output of the DequantizeLinear already reading it
        (an int8 embedding table's rows)."""
        quantized = user.input[0]
        quantize = producers.get(quantized)
        if quantize is not None and quantize.op_type == "DynamicQuantizeLinear":
            return quantize.input[0], quantize.output[1]
        for reader in consumers.get(quantized, []):
            if reader.op_type == "DequantizeLinear" and reader.input[0] == quantized:
                return reader.output[0], reader.input[1]
        raise InvalidInputError(f"MatMulInteger '{user.name}': its input is not dynamically quantized")

    dropped: set[int] = set()
    replacement: dict[int, Any] = {}
    for node in graph.node:
        if node.op_type != "MatMulInteger":
            continue
        activation, activation_scale = float_activation(node)
        cast = only_consumer(node.output[0], "Cast", node)
        rescale = only_consumer(cast.output[0], "Mul", node)
        scale_name = next(name for name in rescale.input if name != cast.output[0])
        scale_product = producers.get(scale_name)
        if (
            scale_product is None
            or scale_product.op_type != "Mul"
            or activation_scale not in scale_product.input
        ):
            raise InvalidInputError(
                f"MatMulInteger '{node.name}': its rescaling is not activation x weight scale"
            )
        weight_scale = next(n for n in scale_product.input if n != activation_scale)
        weight = constant(node.input[1]).astype(np.float32)
        if len(node.input) > 3 and node.input[3]:
            weight = weight - constant(node.input[3]).astype(np.float32)
        weight = weight * constant(weight_scale).astype(np.float32)
        name = f"{node.input[1]}_float"
        graph.initializer.append(numpy_helper.from_array(weight.astype(np.float32), name))
        replacement[id(node)] = helper.make_node(
            "MatMul", [activation, name], [rescale.output[0]], name=f"{rescale.output[0]}_float"
        )
        dropped.update((id(cast), id(rescale), id(scale_product)))
    for node in graph.node:
        # An int8 embedding table: Gather rows, then DequantizeLinear them. Its float16 conversion would
        # give DequantizeLinear a float16 scale, which opsets before 19 refuse: gather float rows instead.
        table = producers.get(node.input[0]) if node.op_type == "DequantizeLinear" else None
        if table is None or table.op_type != "Gather" or table.input[0] not in initializers:
            continue
        rows = constant(table.input[0]).astype(np.float32)
        if len(node.input) > 2 and node.input[2]:
            rows = rows - constant(node.input[2]).astype(np.float32)
        rows = rows * constant(node.input[1]).astype(np.float32)
        name = f"{table.input[0]}_float"
        graph.initializer.append(numpy_helper.from_array(rows, name))
        replacement[id(node)] = helper.make_node(
            "Gather",
            [name, table.input[1]],
            [node.output[0]],
            name=f"{node.output[0]}_float",
            **gather_axis(table),
        )
    kept = [replacement.get(id(n), n) for n in graph.node if id(n) not in dropped]
    # A quantizer whose outputs no node reads any more goes too.
    used = {name for node in kept for name in node.input}
    graph_outputs = {o.name for o in graph.output}
    kept = [
        n
        for n in kept
        if n.op_type not in ("DynamicQuantizeLinear", "Gather")
        or any(o in used or o in graph_outputs for o in n.output)
    ]
    del graph.node[:]
    # A float product reading a dequantized embedding must follow the DequantizeLinear that the int8
    # graph placed after it.
    graph.node.extend(topological(kept, graph))
    drop_unused_initializers(model)
    return model


def write_float_model(model_dir: Path, target: Path) -> Path:
    """Write into the new directory ``target`` the model of ``model_dir`` with its int8 weights dequantized
    (:func:`float_weights`), beside copies of its ``config.json`` and ``tokenizer.json``: the float model a
    GPU's float16 run holds, e.g. as the CPU reference for such a run. Returns ``target``."""
    import onnx

    target.mkdir()
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(model_dir / name, target / name)
    model = onnx.load(str(model_dir / "model.onnx"))
    float_weights(model)
    onnx.save(model, str(target / "model.onnx"), save_as_external_data=True, location="model.onnx.data")
    return target
