"""Pooling inside the graph, for the GPU: the model's token states ``(batch, sequence, hidden)`` are pooled
into one row per sequence on the device, so one ``(batch, hidden)`` matrix crosses to the host instead
of every token's state, which for a small encoder takes as long as the forward pass itself.

Mean pooling weights the tokens by the attention mask exactly as :func:`clirkit.encoders.pooling.pool`
does; CLS pooling takes the first token. Normalization stays on the host (a small matrix). The pooled
output is added in float32 after any float16 conversion, so sums over long sequences are not taken in
float16.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: The poolings the graph can take over (``last`` needs each row's length: it stays on the host).
GRAPH_POOLINGS = ("mean", "cls")
POOLED_OUTPUT = "clirkit_pooled"


def pool_in_graph(model: Any, pooling: str, mask_input: str = "attention_mask") -> bool:
    """Append ``pooling`` of the graph's first output to ``model`` (an ``onnx.ModelProto``, edited in
    place) as a new first output :data:`POOLED_OUTPUT`. Returns whether it did: not for a pooling outside
    :data:`GRAPH_POOLINGS`, a graph without ``mask_input`` or a first output that is not 3-D float32."""
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    if pooling not in GRAPH_POOLINGS or mask_input not in {i.name for i in graph.input}:
        return False
    hidden = graph.output[0]
    tensor = hidden.type.tensor_type
    if tensor.elem_type != TensorProto.FLOAT or len(tensor.shape.dim) != 3:
        return False
    width = tensor.shape.dim[2]
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)

    def const(name: str, value: np.ndarray) -> str:
        graph.initializer.append(numpy_helper.from_array(value, name))
        return name

    if pooling == "cls":
        nodes = [
            helper.make_node(
                "Gather",
                [hidden.name, const("clirkit_pool_first", np.array(0, dtype=np.int64))],
                [POOLED_OUTPUT],
                axis=1,
            )
        ]
    else:

        def reduce_sum(source: str, target: str) -> Any:
            if opset >= 13:  # axes became an input in opset 13
                return helper.make_node("ReduceSum", [source, "clirkit_pool_axis1"], [target], keepdims=0)
            return helper.make_node("ReduceSum", [source], [target], axes=[1], keepdims=0)

        if opset >= 13:
            const("clirkit_pool_axis1", np.array([1], dtype=np.int64))
        nodes = [
            helper.make_node("Cast", [mask_input], ["clirkit_pool_mask"], to=TensorProto.FLOAT),
            helper.make_node(
                "Unsqueeze",
                ["clirkit_pool_mask", const("clirkit_pool_axis2", np.array([2], dtype=np.int64))],
                ["clirkit_pool_weights"],
            )
            if opset >= 13
            else helper.make_node("Unsqueeze", ["clirkit_pool_mask"], ["clirkit_pool_weights"], axes=[2]),
            helper.make_node("Mul", [hidden.name, "clirkit_pool_weights"], ["clirkit_pool_weighted"]),
            reduce_sum("clirkit_pool_weighted", "clirkit_pool_sum"),
            reduce_sum("clirkit_pool_weights", "clirkit_pool_count"),
            helper.make_node(
                "Max",
                ["clirkit_pool_count", const("clirkit_pool_floor", np.array(1e-9, dtype=np.float32))],
                ["clirkit_pool_divisor"],
            ),
            helper.make_node("Div", ["clirkit_pool_sum", "clirkit_pool_divisor"], [POOLED_OUTPUT]),
        ]
    graph.node.extend(nodes)
    pooled = helper.make_tensor_value_info(
        POOLED_OUTPUT, TensorProto.FLOAT, ["batch", width.dim_param or width.dim_value or "hidden"]
    )
    graph.output.insert(0, pooled)
    return True
