"""Fused attention for CPU encoding: a transformer graph's attention blocks, as exported op by op, replaced
by onnxruntime's ``com.microsoft.MultiHeadAttention``.

BERT-style exports spell every layer's attention out as a dozen operators: the query, key and value
projections reshaped to ``(batch, heads, tokens, head size)`` and transposed, ``MatMul`` of queries and
keys, a scale, the additive padding mask, ``Softmax``, ``MatMul`` with the values, a transpose and a
reshape back. onnxruntime runs each as its own kernel over ``heads × tokens × tokens`` floats; its
``MultiHeadAttention`` kernel does the same arithmetic in one pass (on one thread, about a third less CPU
per layer at 357 tokens, see ``benches/results/encoders.md``). onnxruntime's own graph optimizer does not make
this fusion: it lives in the separate ``onnxruntime.transformers`` optimizer (which needs PyTorch-style
export metadata and does not match quantized graphs), so clirkit rewrites the graph itself.

:func:`fuse_attention` matches the classic pattern (the one ``torch.onnx`` exports of BERT, XLM-R and
their quantized copies have): ``Reshape(q) → Transpose(0,2,1,3)`` and ``Reshape(k) →
Transpose(0,2,3,1)``, ``MatMul``, ``Mul`` or ``Div`` by a constant, ``Add`` of a mask computed from
``attention_mask`` alone, ``Softmax`` over the last axis, ``MatMul`` with ``Reshape(v) →
Transpose(0,2,1,3)``, ``Transpose(0,2,1,3) → Reshape`` to the hidden size. Anything else is left as it is
(a mask operand with any other input, such as a relative position bias, is not a padding mask). With
``masked=True`` the padding mask becomes the kernel's key padding mask (for padded batches); with
``masked=False`` it is dropped, which is right only when no input is padded (one text per call).
"""

from __future__ import annotations

from typing import Any

import numpy as np

MASK_INPUT = "attention_mask"
#: Operators a padding mask is computed with (from ``attention_mask`` and constants).
MASK_OPS = frozenset(
    {"Cast", "Sub", "Mul", "Unsqueeze", "Reshape", "Expand", "Where", "Not", "Equal", "Less", "Greater"}
)


def fuse_attention(model: Any, masked: bool) -> int:
    """Rewrite ``model`` (an ``onnx.ModelProto``) in place, every matched attention block replaced by one
    ``MultiHeadAttention`` node; the number of blocks fused (0: the model is left unchanged)."""
    from onnx import helper, numpy_helper

    graph = model.graph
    producers = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    constants = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            constants[node.output[0]] = node.attribute[0].t

    def const(name: str) -> np.ndarray | None:
        tensor = constants.get(name)
        return None if tensor is None else numpy_helper.to_array(tensor)

    def attribute(node: Any, name: str) -> Any:
        found = [helper.get_attribute_value(a) for a in node.attribute if a.name == name]
        return found[0] if found else None

    def producer(name: str, op: str) -> Any:
        node = producers.get(name)
        return node if node is not None and node.op_type == op else None

    def only_consumer(name: str, op: str) -> Any:
        users = consumers.get(name, [])
        if len(users) != 1 or users[0].op_type != op or name in graph_outputs:
            return None
        return users[0]

    def mask_only(name: str) -> bool:
        """Whether ``name`` is computed from ``attention_mask`` and small constants alone."""
        seen: set[str] = set()
        pending = [name]
        while pending:
            current = pending.pop()
            if current in seen or current == "":
                continue
            seen.add(current)
            if current == MASK_INPUT:
                continue
            if current in constants:
                if int(np.prod(constants[current].dims)) > 16:
                    return False
                continue
            node = producers.get(current)
            if node is None or node.op_type not in MASK_OPS | {"Constant"}:
                return False
            pending.extend(node.input)
        return MASK_INPUT in seen

    def split_heads(name: str, perm: list[int]) -> tuple[str, int] | None:
        """(the projection, heads) behind ``Transpose(perm)(Reshape(projection, [0, 0, heads, size]))``."""
        transpose = producer(name, "Transpose")
        if transpose is None or attribute(transpose, "perm") != perm:
            return None
        reshape = producer(transpose.input[0], "Reshape")
        shape = None if reshape is None else const(reshape.input[1])
        if shape is None or shape.shape != (4,) or shape[2] <= 0:
            return None
        return reshape.input[0], int(shape[2])

    graph_outputs = {o.name for o in graph.output}
    has_mask_input = MASK_INPUT in {i.name for i in graph.input}
    fused: list[tuple[list[Any], Any]] = []  # (nodes replaced, the node replacing them)
    padding_mask = "clirkit_key_padding_mask"
    for softmax in graph.node:
        if softmax.op_type != "Softmax" or attribute(softmax, "axis") not in (-1, 3):
            continue
        add = producer(softmax.input[0], "Add")
        if add is None or not has_mask_input:
            continue
        scores_name, mask_name = add.input
        if not mask_only(mask_name):
            scores_name, mask_name = mask_name, scores_name
            if not mask_only(mask_name):
                continue
        scaling = producers.get(scores_name)
        if scaling is None or scaling.op_type not in ("Mul", "Div"):
            continue
        factor = const(scaling.input[1])
        if factor is None or factor.size != 1 or float(factor.reshape(-1)[0]) == 0.0:
            continue
        scale = float(factor.reshape(-1)[0])
        scale = 1.0 / scale if scaling.op_type == "Div" else scale
        scores = producer(scaling.input[0], "MatMul")
        if scores is None or only_consumer(scores.output[0], scaling.op_type) is None:
            continue
        query = split_heads(scores.input[0], [0, 2, 1, 3])
        key = split_heads(scores.input[1], [0, 2, 3, 1])
        weighted = only_consumer(softmax.output[0], "MatMul")
        if query is None or key is None or weighted is None or weighted.input[0] != softmax.output[0]:
            continue
        value = split_heads(weighted.input[1], [0, 2, 1, 3])
        merge = only_consumer(weighted.output[0], "Transpose")
        if value is None or merge is None or attribute(merge, "perm") != [0, 2, 1, 3]:
            continue
        reshape = only_consumer(merge.output[0], "Reshape")
        merged_shape = None if reshape is None else const(reshape.input[1])
        heads = query[1]
        if merged_shape is None or merged_shape.shape != (3,) or not key[1] == value[1] == heads:
            continue
        if any(len(consumers.get(n.output[0], [])) != 1 for n in (add, scaling, softmax)):
            continue
        inputs = [query[0], key[0], value[0]]
        if masked:
            inputs += ["", padding_mask]
        node = helper.make_node(
            "MultiHeadAttention",
            inputs,
            [reshape.output[0]],
            name=f"clirkit_attention_{len(fused)}",
            domain="com.microsoft",
            num_heads=heads,
            scale=scale,
        )
        replaced = [add, scaling, scores, softmax, weighted, merge, reshape]
        for side in (scores.input[0], scores.input[1], weighted.input[1]):
            transpose = producers[side]
            replaced.append(transpose)
            if len(consumers.get(transpose.input[0], [])) == 1:
                replaced.append(producers[transpose.input[0]])
        fused.append((replaced, node))
    if not fused:
        return 0

    removed = {id(n) for replaced, _ in fused for n in replaced}
    nodes = [n for n in graph.node if id(n) not in removed]
    if masked:
        nodes.insert(0, helper.make_node("Cast", [MASK_INPUT], [padding_mask], to=6))  # int32
    nodes.extend(node for _, node in fused)
    del graph.node[:]
    graph.node.extend(topological(nodes, graph))
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return len(fused)


def drop_softmax_nan_guards(model: Any) -> int:
    """Remove every ``Where(IsNaN(p), 0, p)`` that follows a ``Softmax`` in ``model`` (in place), its users
    reading ``p`` itself; the number removed.

    ``torch.export``/dynamo exports of ``scaled_dot_product_attention`` guard the attention weights so
    that a query whose every key is masked (a softmax over ``-inf`` only, which is NaN) attends to
    nothing. A padding mask masks a whole sequence only when the sequence holds no token, so for inputs
    that always hold one (every tokenizer that adds special tokens, as the encoders check) the guard
    never changes a value: without it the outputs are the same bit for bit, and two passes over
    ``heads x tokens x tokens`` floats per layer are saved (about a tenth of all-MiniLM-L6-v2's CPU time at
    180 tokens)."""
    from onnx import numpy_helper

    graph = model.graph
    producers = {out: node for node in graph.node for out in node.output}
    constants = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            constants[node.output[0]] = node.attribute[0].t
    graph_outputs = {o.name for o in graph.output}
    renamed: dict[str, str] = {}
    removed: set[int] = set()
    for where in graph.node:
        if where.op_type != "Where" or len(where.input) != 3 or where.output[0] in graph_outputs:
            continue
        condition, fill, weights = where.input
        isnan = producers.get(condition)
        softmax = producers.get(weights)
        if isnan is None or isnan.op_type != "IsNaN" or isnan.input[0] != weights:
            continue
        if softmax is None or softmax.op_type != "Softmax" or fill not in constants:
            continue
        if np.any(numpy_helper.to_array(constants[fill]) != 0):
            continue
        if sum(condition in n.input for n in graph.node) != 1:  # the IsNaN serves this guard alone
            continue
        renamed[where.output[0]] = weights
        removed.update((id(where), id(isnan)))
    if not renamed:
        return 0
    nodes = [n for n in graph.node if id(n) not in removed]
    for node in nodes:
        for i, name in enumerate(node.input):
            if name in renamed:
                node.input[i] = renamed[name]
    del graph.node[:]
    graph.node.extend(nodes)
    return len(renamed)


def topological(nodes: list[Any], graph: Any) -> list[Any]:
    """``nodes`` ordered so that every node comes after the producers of its inputs (ONNX requires it;
    the fused nodes were appended at the end)."""
    available = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
    ordered: list[Any] = []
    pending = nodes
    while pending:
        waiting = []
        for node in pending:
            if all(name in available for name in node.input):
                ordered.append(node)
                available.update(node.output)
            else:
                waiting.append(node)
        if len(waiting) == len(pending):
            raise ValueError("the rewritten graph has a node whose inputs nothing produces")
        pending = waiting
    return ordered
