"""SPLADE's MLM head split at its vocabulary projection: the graph run up to the head's transform (one
``hidden``-wide state per token), the projection onto the vocabulary done by
:class:`clirkit._native.VocabProjection`, which keeps only each text's maximum per entry.

A SPLADE model's last node maps each token's transformed state (``hidden`` floats) to the vocabulary:
``Gemm(states, W, bias)`` with ``W`` of ``(vocab, hidden)`` (``transB=1``) or ``(hidden, vocab)``, or
``MatMul`` then ``Add`` of a bias, possibly followed by ``Reshape`` / ``Identity`` nodes to the
``(batch, sequence, vocab)`` output. For a small encoder this projection is most of the arithmetic, and
its ``tokens x vocab`` logits (30 MB for 256 tokens over BERT's 30,522 entries) are written, copied out of
onnxruntime and read once more, only to keep one maximum per entry. :func:`split_projection` finds that
node, takes its weights and bias, and makes the graph output the states it projects instead
(:data:`STATES_OUTPUT`); a graph whose output is not reached that way is left whole (the encoder then
computes the full logits, as before).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clirkit.encoders.attention import drop_unused_initializers, used

#: The output of a split graph: the states the vocabulary projection takes, ``(tokens, hidden)`` or
#: ``(batch, sequence, hidden)``.
STATES_OUTPUT = "clirkit_projection_states"
#: Nodes between the projection and the graph's output that only change the shape.
_SHAPE_ONLY = ("Reshape", "Identity", "Flatten", "Squeeze", "Unsqueeze")


def split_projection(model: Any, output: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Cut ``model`` (an ``onnx.ModelProto``, changed in place) before the vocabulary projection that
    produces ``output``: the graph's only output becomes :data:`STATES_OUTPUT`, the projection's input.
    Returns the projection's weights, float32 ``(vocab, hidden)``, and bias, float32 ``(vocab,)``; None,
    with the model unchanged, when ``output`` is not a projection of that form."""
    from onnx import helper, numpy_helper

    graph = model.graph
    if output not in {o.name for o in graph.output}:
        return None
    producers = {name: node for node in graph.node for name in node.output}
    initializers = {i.name: i for i in graph.initializer}
    removed = []
    node = producers.get(output)
    while node is not None and node.op_type in _SHAPE_ONLY:
        removed.append(node)
        node = producers.get(node.input[0])
    if node is None:
        return None
    found = _projection(node, producers, initializers, numpy_helper)
    if found is None:
        return None
    states, weight, bias, nodes = found
    removed.extend(nodes)
    if weight.ndim != 2 or bias.shape != (weight.shape[0],):
        return None
    if states in {i.name for i in graph.input}:
        return None  # a graph that is the projection alone has nothing left to run
    removed_names = {id(n) for n in removed}
    kept = [n for n in graph.node if id(n) not in removed_names]
    # Nothing kept may read what a removed node gives (the logits are the graph's output only).
    removed_outputs = {name for n in removed for name in n.output}
    if any(name in removed_outputs for n in kept for name in n.input):
        return None
    for n in kept:
        n.output[:] = [STATES_OUTPUT if name == states else name for name in n.output]
        n.input[:] = [STATES_OUTPUT if name == states else name for name in n.input]
    del graph.node[:]
    graph.node.extend(used(kept, {STATES_OUTPUT}))  # what fed only the removed nodes goes too
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info(STATES_OUTPUT, 1, None))
    drop_unused_initializers(model)
    del graph.value_info[:]  # shapes recomputed by the runtime
    return np.ascontiguousarray(weight, dtype=np.float32), np.ascontiguousarray(bias, dtype=np.float32)


def _projection(
    node: Any, producers: dict[str, Any], initializers: dict[str, Any], numpy_helper: Any
) -> tuple[str, np.ndarray, np.ndarray, list[Any]] | None:
    """(states input, weights (vocab, hidden), bias, nodes to remove) when ``node`` ends a projection
    with constant weights and bias."""

    def constant(name: str) -> np.ndarray | None:
        tensor = initializers.get(name)
        return None if tensor is None else numpy_helper.to_array(tensor).astype(np.float32)

    attributes = {a.name: a for a in node.attribute}
    if node.op_type == "Gemm" and len(node.input) == 3:
        alpha = attributes["alpha"].f if "alpha" in attributes else 1.0
        beta = attributes["beta"].f if "beta" in attributes else 1.0
        trans_a = attributes["transA"].i if "transA" in attributes else 0
        trans_b = attributes["transB"].i if "transB" in attributes else 0
        weight, bias = constant(node.input[1]), constant(node.input[2])
        if weight is None or bias is None or alpha != 1.0 or beta != 1.0 or trans_a:
            return None
        return node.input[0], weight if trans_b else weight.T, bias.reshape(-1), [node]
    if node.op_type == "Add" and len(node.input) == 2:
        first, second = node.input
        for product_name, bias_name in ((first, second), (second, first)):
            product = producers.get(product_name)
            bias = constant(bias_name)
            if product is None or bias is None or product.op_type != "MatMul":
                continue
            weight = constant(product.input[1])
            if weight is None or weight.ndim != 2:
                return None
            return product.input[0], weight.T, bias.reshape(-1), [node, product]
    return None
