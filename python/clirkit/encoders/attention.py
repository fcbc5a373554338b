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
Transpose(0,2,1,3)``, ``Transpose(0,2,1,3) → Reshape`` to the hidden size; and the pattern of
``torch.export``/dynamo exports of ``scaled_dot_product_attention`` (all-MiniLM-L6-v2-int8's graph): reshape
shapes built with ``Concat`` from the input's ``Shape`` (``(batch, tokens, -1, head size)``: the head count
is the projection's width, by onnx's shape inference, over the head size), queries and keys each
multiplied by ``scale ** 0.5``, the keys transposed by ``Reshape(-1, tokens, size) → Transpose(0,2,1) →
Reshape``, and the mask a ``Where(keep, 0, lowest float)`` whose ``keep`` is computed with ``Range``,
comparisons and ``GatherND``. The fused node's scale is the product of every constant factor on the
scores, queries and keys (float rounding apart, the same arithmetic). The structural match of a mask only
says what it is computed from; :func:`fuse_attention`'s ``padding_masks`` check (the graph cache evaluates
each mask on a padded probe batch) says whether it is a key padding mask, so a causal mask built from the
same operators is left alone. Anything else is left as it is (a mask operand with any other input, such as
a relative position bias, is not a padding mask). Once fused, operators that computed only for the unfused
attention (its shapes, its mask) are pruned. With
``masked=True`` the padding mask becomes the kernel's key padding mask (for padded batches); with
``masked=False`` it is dropped, which is right only when no input is padded (one text per call).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Callable

import numpy as np

MASK_INPUT = "attention_mask"
#: Operators a padding mask is computed with (from ``attention_mask``, shapes and constants). ``Shape``
#: reads no values: its input is not followed. Which of these masks really is a key padding mask (and
#: not, say, a causal mask built from the same ``Range`` and comparison operators) is settled by
#: evaluating it (``padding_masks`` of :func:`fuse_attention`).
MASK_OPS = frozenset(
    {"Cast", "Sub", "Mul", "Unsqueeze", "Reshape", "Expand", "Where", "Not", "Equal", "Less", "Greater"}
    | {"And", "Or", "GreaterOrEqual", "LessOrEqual", "Range", "Squeeze", "GatherND", "Max", "Min"}
    | {"Concat", "Slice", "Shape", "Constant"}
)


def fuse_attention(
    model: Any, masked: bool, padding_masks: Callable[[Any, list[str]], set[str]] | None = None
) -> int:
    """Rewrite ``model`` (an ``onnx.ModelProto``) in place, every matched attention block replaced by one
    ``MultiHeadAttention`` node; the number of blocks fused (0: the model is left unchanged).

    ``padding_masks(model, names)``, when given, says which of the additive mask operands ``names`` are
    key padding masks (0 where ``attention_mask`` is 1, very negative where it is 0, the same for every
    query and head); blocks whose mask is not are left as they are. Without it the structural match
    (the mask computed from ``attention_mask``, shapes and small constants alone) is trusted."""
    from onnx import helper, numpy_helper

    graph = model.graph
    producers, consumers, constants = graph_index(graph)
    graph_outputs = {o.name for o in graph.output}
    hidden_sizes: dict[str, int] = {}

    def const(name: str) -> np.ndarray | None:
        tensor = constants.get(name)
        return None if tensor is None else numpy_helper.to_array(tensor)

    def attribute(node: Any, name: str) -> Any:
        found = [helper.get_attribute_value(a) for a in node.attribute if a.name == name]
        return found[0] if found else None

    def producer(name: str, op: str) -> Any:
        node = producers.get(name)
        return node if node is not None and node.op_type == op else None

    def mask_only(name: str) -> bool:
        """Whether ``name`` is computed from ``attention_mask``, shapes and small constants alone."""
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
            if node is None or node.op_type not in MASK_OPS:
                return False
            if node.op_type != "Shape":
                pending.extend(node.input)
        return MASK_INPUT in seen

    def scalar(name: str) -> float | None:
        value = const(name)
        return float(value.reshape(-1)[0]) if value is not None and value.size == 1 else None

    def unscaled(name: str) -> tuple[str, float]:
        """(the tensor, its constant factor) behind ``Mul(tensor, c)``, ``Mul(c, tensor)`` or
        ``Div(tensor, c)``; (``name``, 1.0) otherwise."""
        node = producers.get(name)
        if node is None or node.op_type not in ("Mul", "Div"):
            return name, 1.0
        for tensor, factor in ((0, 1), (1, 0)) if node.op_type == "Mul" else ((0, 1),):
            value = scalar(node.input[factor])
            if value is not None and value != 0.0:
                return node.input[tensor], (1.0 / value if node.op_type == "Div" else value)
        return name, 1.0

    def shape_dims(name: str, rank: int) -> list[int | None] | None:
        """The target shape ``name`` of a ``Reshape``, ``rank`` entries, each an int where it is a
        constant: a constant tensor, or a ``Concat`` of one-entry pieces (a dynamo export builds the
        batch and sequence entries from ``Shape``)."""
        value = const(name)
        if value is not None:
            return [int(v) for v in value.reshape(-1)] if value.shape == (rank,) else None
        concat = producer(name, "Concat")
        if concat is None or len(concat.input) != rank:
            return None
        pieces = [const(piece) for piece in concat.input]
        if any(piece is not None and piece.size != 1 for piece in pieces):
            return None
        return [None if piece is None else int(piece.reshape(-1)[0]) for piece in pieces]

    def hidden_size(name: str) -> int | None:
        """The last dimension of ``name`` by onnx's shape inference (run once, when first needed)."""
        if not hidden_sizes:
            from onnx import shape_inference

            inferred = shape_inference.infer_shapes(model).graph.value_info
            for info in inferred:
                dims = info.type.tensor_type.shape.dim
                if dims and dims[-1].HasField("dim_value"):
                    hidden_sizes[info.name] = dims[-1].dim_value
            hidden_sizes.setdefault("", 0)
        return hidden_sizes.get(name)

    def split_heads(name: str, perm: list[int]) -> tuple[str, int] | None:
        """(the projection, heads) behind ``Transpose(perm)(Reshape(projection, [b, s, heads, size]))``,
        heads given or -1 with the size given."""
        transpose = producer(name, "Transpose")
        if transpose is None or attribute(transpose, "perm") != perm:
            return None
        reshape = producer(transpose.input[0], "Reshape")
        dims = None if reshape is None else shape_dims(reshape.input[1], 4)
        if dims is None:
            return None
        heads, size = dims[2], dims[3]
        if heads is not None and heads > 0:
            return reshape.input[0], heads
        if heads == -1 and size is not None and size > 0:
            hidden = hidden_size(reshape.input[0])
            if hidden and hidden % size == 0:
                return reshape.input[0], hidden // size
        return None

    def transposed_keys(name: str) -> tuple[str, int] | None:
        """(the key projection, heads) behind the keys transposed for ``q @ k^T``: ``Transpose(0,2,3,1)``
        of the split heads, or (``scaled_dot_product_attention`` exported by dynamo) the split heads
        ``Reshape``d to ``(-1, tokens, size)``, ``Transpose(0,2,1)`` and ``Reshape``d back."""
        classic = split_heads(name, [0, 2, 3, 1])
        if classic is not None:
            return classic
        outer = producer(name, "Reshape")
        swap = None if outer is None else producer(outer.input[0], "Transpose")
        if swap is None or attribute(swap, "perm") != [0, 2, 1]:
            return None
        inner = producer(swap.input[0], "Reshape")
        return None if inner is None else split_heads(inner.input[0], [0, 2, 1, 3])

    has_mask_input = MASK_INPUT in {i.name for i in graph.input}
    blocks: list[tuple[str, Any, Any]] = []  # (the mask, the merging Reshape replaced, the new node)
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
        scores_name, scale = unscaled(scores_name)
        scores = producer(scores_name, "MatMul")
        if scores is None:
            continue
        queries, query_scale = unscaled(scores.input[0])
        keys, key_scale = unscaled(scores.input[1])
        scale *= query_scale * key_scale
        query, key = split_heads(queries, [0, 2, 1, 3]), transposed_keys(keys)
        weighted = sole_consumer(consumers, softmax.output[0], "MatMul", graph_outputs)
        if query is None or key is None or weighted is None or weighted.input[0] != softmax.output[0]:
            continue
        value = split_heads(weighted.input[1], [0, 2, 1, 3])
        merge = sole_consumer(consumers, weighted.output[0], "Transpose", graph_outputs)
        if value is None or merge is None or attribute(merge, "perm") != [0, 2, 1, 3]:
            continue
        reshape = sole_consumer(consumers, merge.output[0], "Reshape", graph_outputs)
        if reshape is None:
            continue
        merged = shape_dims(reshape.input[1], 3)
        heads = query[1]
        if merged is None or scale == 0.0 or not key[1] == value[1] == heads:
            continue
        inputs = [query[0], key[0], value[0]]
        if masked:
            inputs += ["", padding_mask]
        node = helper.make_node(
            "MultiHeadAttention",
            inputs,
            [reshape.output[0]],
            name=f"clirkit_attention_{len(blocks)}",
            domain="com.microsoft",
            num_heads=heads,
            scale=scale,
        )
        blocks.append((mask_name, reshape, node))
    if padding_masks is not None and blocks:
        checked = padding_masks(model, sorted({mask for mask, _, _ in blocks}))
        blocks = [block for block in blocks if block[0] in checked]
    if not blocks:
        return 0

    removed = {id(reshape) for _, reshape, _ in blocks}
    nodes = [n for n in graph.node if id(n) not in removed]
    if masked:
        nodes.insert(0, helper.make_node("Cast", [MASK_INPUT], [padding_mask], to=6))  # int32
    nodes.extend(node for _, _, node in blocks)
    del graph.node[:]
    graph.node.extend(topological(used(nodes, graph_outputs), graph))
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return len(blocks)


def fuse_erf_gelu(model: Any) -> int:
    """Rewrite ``model`` in place, every exact GELU spelled ``x * 0.5 * (1 + Erf(x / sqrt(2)))`` (the
    factors in any order, ``/ sqrt(2)`` or ``* (1 / sqrt(2))``) replaced by one ``com.microsoft.Gelu``
    node; the number replaced. onnxruntime's own fusion misses the order a dynamo export writes
    (``Mul(0.5, 1 + erf)`` first, then ``Mul(x, ...)``), so five passes over ``tokens x intermediate``
    floats become one (the graph cache keeps the bias ``Add`` before it apart: onnxruntime's ``BiasGelu``
    kernel is slower than the two). Same function, float rounding apart (the kernel multiplies by
    ``1 / sqrt(2)``)."""
    from onnx import helper, numpy_helper

    graph = model.graph
    producers, consumers, constants = graph_index(graph)

    def near(name: str, value: float) -> bool:
        tensor = constants.get(name)
        array = None if tensor is None else numpy_helper.to_array(tensor)
        return array is not None and array.size == 1 and abs(float(array.reshape(-1)[0]) - value) < 1e-6

    def other(node: Any, name: str) -> str | None:
        """``node``'s input beside ``name`` (a two-input node), None when ``name`` is not one of them."""
        if len(node.input) != 2 or name not in node.input:
            return None
        return node.input[1] if node.input[0] == name else node.input[0]

    replaced: dict[int, Any] = {}
    for erf in graph.node:
        scaled = producers.get(erf.input[0]) if erf.op_type == "Erf" else None
        if scaled is None or len(scaled.input) != 2:
            continue
        if scaled.op_type == "Div" and near(scaled.input[1], np.sqrt(2.0)):
            x = scaled.input[0]
        elif scaled.op_type == "Mul" and near(scaled.input[1], np.sqrt(0.5)):
            x = scaled.input[0]
        elif scaled.op_type == "Mul" and near(scaled.input[0], np.sqrt(0.5)):
            x = scaled.input[1]
        else:
            continue
        add = sole_consumer(consumers, erf.output[0], "Add")
        if add is None or not near(str(other(add, erf.output[0])), 1.0):
            continue
        first = sole_consumer(consumers, add.output[0], "Mul")
        second = None if first is None else sole_consumer(consumers, first.output[0], "Mul")
        if first is None or second is None:
            continue
        factor, last = other(first, add.output[0]), other(second, first.output[0])
        if not ((near(str(factor), 0.5) and last == x) or (factor == x and near(str(last), 0.5))):
            continue
        replaced[id(second)] = helper.make_node(
            "Gelu", [x], [second.output[0]], name=f"clirkit_gelu_{len(replaced)}", domain="com.microsoft"
        )
    if not replaced:
        return 0
    nodes = [replaced.get(id(node), node) for node in graph.node]
    del graph.node[:]
    graph.node.extend(used(nodes, {o.name for o in graph.output}))
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return len(replaced)


def graph_index(graph: Any) -> tuple[dict[str, Any], dict[str, list[Any]], dict[str, Any]]:
    """(the node producing each value, the nodes reading each value, the constant tensors by name:
    initializers and ``Constant`` nodes' values) of an ``onnx.GraphProto``."""
    producers = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    constants = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            constants[node.output[0]] = node.attribute[0].t
    return producers, consumers, constants


def sole_consumer(
    consumers: dict[str, list[Any]], name: str, op: str, graph_outputs: Collection[str] = ()
) -> Any:
    """The one node reading ``name`` when it is an ``op`` and ``name`` is not among ``graph_outputs``;
    None otherwise."""
    users = consumers.get(name, [])
    if len(users) != 1 or users[0].op_type != op or name in graph_outputs:
        return None
    return users[0]


def used(nodes: list[Any], outputs: set[str]) -> list[Any]:
    """``nodes`` without those whose results nothing reads (the unfused attention, once its merging
    ``Reshape`` is replaced, and whatever computed only for it), in their order."""
    kept = list(nodes)
    while True:
        read = outputs | {name for node in kept for name in node.input}
        alive = [node for node in kept if any(name in read for name in node.output)]
        if len(alive) == len(kept):
            return kept
        kept = alive


def drop_unused_initializers(model: Any) -> int:
    """Drops the initializers no node reads any more (a fused or split-off operator's constants), which
    onnxruntime would drop itself when it loads the graph, with a warning for each; one also listed as a graph input
    (its default value) is kept, and a graph with subgraphs, which may read outer initializers by name, is
    left as it is. The number dropped."""
    graph = model.graph
    if any(a.type in (a.GRAPH, a.GRAPHS) for node in graph.node for a in node.attribute):
        return 0
    read = {x for node in graph.node for x in node.input} | {v.name for v in [*graph.input, *graph.output]}
    kept = [t for t in graph.initializer if t.name in read]
    dropped = len(graph.initializer) - len(kept)
    if dropped:
        del graph.initializer[:]
        graph.initializer.extend(kept)
    return dropped


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
    producers, _, constants = graph_index(graph)
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
