"""The prepared CPU graph run with attention computed by a kernel of clirkit's own.

:class:`AttentionSplitSession` cuts a prepared graph (:func:`clirkit.encoders.graph_cache.prepared_graph`)
at each of its ``MultiHeadAttention`` nodes (onnxruntime's or clirkit's): the nodes between two attention
nodes form a segment, an ONNX model of its own run by its own onnxruntime session, and each attention
node is computed by a Python callable ``attention(query, key, value, num_heads, scale)``. A call runs segment 0 from the
graph's inputs, then the first attention, the next segment, and so on; every value a later step reads (the
residual stream, graph inputs, shapes) is carried across and dropped after its last reader. The session
answers ``run``, ``get_inputs``, ``get_outputs`` and ``get_providers`` as an ``onnxruntime.InferenceSession``
does, so :class:`clirkit.encoders.session.OnnxSession` holds it in place of one.

Only attention that such a kernel computes exactly is cut out (:func:`split_refusal`): query, key and
value of one (batch, tokens, hidden) shape, no bias, mask, attention bias or key/value cache, not
unidirectional; a graph with any other ``MultiHeadAttention`` node is refused with the reason.

Fast mode (``batch_invariant=False``) of a dynamically quantized encoder on CPU runs through
:func:`int8_attention_session`: the kernel is :func:`clirkit._native.quantized_attention`, int8 attention
with AVX-512 VNNI, used where every attention node can be cut and the CPU has the kernel's instructions for
its head size.

Each initializer goes only into the segments that read it, and the data of those kept in the prepared
graph's external-data file stay there: a segment is loaded from bytes with that file's folder given to
onnxruntime (onnxruntime >= 1.21), which reads them from there as for the whole graph, so the segments
together hold the weights once (peak memory for multilingual-e5-small-int8 as for the whole graph's
session; a small inline constant read by several segments is copied into each). The split is built in
memory when the session opens, in 0.05-0.1 s for multilingual-e5-small-int8 (12 attention nodes; its
whole graph's session opens in 0.03-0.05 s), so no cache of segments is kept. The segments run at
onnxruntime's basic optimization level (the prepared graph is already optimized) and without its
per-session memory arena; the kernels and outputs are those of the whole graph (the tests check that the
split with onnxruntime's own kernel, :class:`OnnxAttention`, gives the whole graph's outputs bit for
bit). Cutting costs about 5% of the CPU time per document against the whole graph with equal
attention compute (30 SciFact documents, one thread), mostly in the segments' kernels, which onnxruntime's
profiles show slower than the same kernels in the whole graph (where values stay in one session's
planned buffers), not in the calls between them.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clirkit._native import InvalidInputError
from clirkit.encoders.custom_ops import DOMAIN, QKV, attention_refusal, register, unblocked_attention

#: ``attention(query, key, value, num_heads, scale)``: query, key and value (batch, tokens, hidden)
#: float32, the output (batch, tokens, hidden) float32: per head, softmax(q kᵀ · scale) v.
Attention = Callable[[np.ndarray, np.ndarray, np.ndarray, int, float], np.ndarray]


@dataclass(frozen=True)
class AttentionNode:
    """One attention node cut out of the graph: its operands, output and settings (``scale`` None:
    1/sqrt(head size), the query's width over ``num_heads``, as onnxruntime's default)."""

    query: str
    key: str
    value: str
    output: str
    num_heads: int
    scale: float | None
    where: str

    def run(self, attention: Attention, values: Mapping[str, np.ndarray]) -> np.ndarray:
        """``attention`` on this node's operands in ``values``, its result checked."""
        q, k, v = values[self.query], values[self.key], values[self.value]
        if q.ndim != 3 or q.shape != k.shape or q.shape != v.shape or q.shape[2] % self.num_heads:
            raise InvalidInputError(
                f"{self.where}: query, key and value must be one (batch, tokens, hidden) shape with hidden "
                f"divisible by {self.num_heads} heads, got {q.shape}, {k.shape}, {v.shape}"
            )
        scale = self.scale if self.scale is not None else 1 / math.sqrt(q.shape[2] // self.num_heads)
        out = attention(q, k, v, self.num_heads, scale)
        if not isinstance(out, np.ndarray) or out.shape != q.shape or out.dtype != q.dtype:
            got = f"{out.shape} {out.dtype}" if isinstance(out, np.ndarray) else type(out).__name__
            raise InvalidInputError(
                f"{self.where}: the attention kernel must return a {q.shape} {q.dtype} array, got {got}"
            )
        return out


@dataclass(frozen=True)
class GraphArg:
    """A graph input or output as ``onnxruntime.NodeArg`` describes it: name, type string
    (``tensor(float)``) and shape (ints for fixed dimensions, names for symbolic ones)."""

    name: str
    type: str
    shape: list[int | str | None]


@dataclass
class SplitPlan:
    """A graph cut at its attention nodes: ``segments[i]`` (node indices) runs before ``attention[i]``,
    the last segment after the last attention node; ``types`` declares every value crossing a cut."""

    segments: list[list[int]]
    attention: list[AttentionNode]
    types: dict[str, Any]


def split_refusal(model: Any) -> str | None:
    """Why ``model`` (an ``onnx.ModelProto``, its external data loaded or not) cannot be cut at its
    attention nodes by :class:`AttentionSplitSession`; None when it can."""
    plan = plan_split(model)
    return plan if isinstance(plan, str) else None


def plan_split(model: Any) -> SplitPlan | str:
    """The cut of ``model`` at its ``MultiHeadAttention`` nodes, or the reason it cannot be cut."""
    graph = model.graph
    nodes = list(graph.node)
    attention: list[AttentionNode] = []
    segments: list[list[int]] = [[]]
    for index, node in enumerate(nodes):
        where = _where(index, node)
        if any(a.type in (a.GRAPH, a.GRAPHS) for a in node.attribute):
            return f"{where} holds a subgraph"
        if not _is_attention(node):
            segments[-1].append(index)
            continue
        found = _attention_node(node, where)
        if isinstance(found, str):
            return found
        attention.append(found)
        segments.append([])
    if not attention:
        return "the graph has no MultiHeadAttention node"
    initializers = {t.name for t in graph.initializer}
    inputs = {i.name for i in graph.input}
    if inputs & initializers:
        return f"graph input {sorted(inputs & initializers)[0]!r} is also an initializer"
    outputs = [o.name for o in graph.output]
    if set(outputs) & initializers:
        return f"graph output {sorted(set(outputs) & initializers)[0]!r} is an initializer"
    available = set(inputs)
    for number, segment in enumerate(segments):
        for index in segment:
            node = nodes[index]
            missing = [x for x in node.input if x and x not in available and x not in initializers]
            if missing:
                return f"{_where(index, node)} reads {missing[0]!r} before any node writes it"
            available.update(x for x in node.output if x)
        if number < len(attention):
            call = attention[number]
            for name in (call.query, call.key, call.value):
                if name not in available:
                    return f"{call.where} reads {name!r}, {'a constant' if name in initializers else 'unwritten'}"
            available.add(call.output)
    missing_outputs = [name for name in outputs if name not in available]
    if missing_outputs:
        return f"no node writes graph output {missing_outputs[0]!r}"
    types = _crossing_types(model, segments, attention)
    if isinstance(types, str):
        return types
    for call in attention:
        refusal = _shape_refusal(call, types)
        if refusal is not None:
            return refusal
    return SplitPlan(segments, attention, types)


def _is_attention(node: Any) -> bool:
    """Whether ``node`` is a ``MultiHeadAttention``, onnxruntime's or clirkit's (a prepared graph's)."""
    return node.op_type == "MultiHeadAttention" and node.domain in ("com.microsoft", DOMAIN)


def _where(index: int, node: Any) -> str:
    """How errors name node ``index``: its position, type and name (else its first output)."""
    return f"node {index} ({node.op_type} {node.name or (node.output[0] if node.output else '')!r})"


def _attention_node(node: Any, where: str) -> AttentionNode | str:
    """``node`` (a ``MultiHeadAttention``) as an :class:`AttentionNode`, or why it cannot be cut out."""
    from onnx import helper

    refusal = attention_refusal(node, where)
    if refusal is not None:
        return refusal
    attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    heads, scale = attributes["num_heads"], float(attributes.get("scale", 0.0))
    query, key, value = node.input[:3]
    # onnxruntime reads a scale of 0 as the default, 1/sqrt(head size).
    return AttentionNode(query, key, value, node.output[0], heads, scale if scale != 0.0 else None, where)


def _crossing_types(
    model: Any, segments: list[list[int]], attention: list[AttentionNode]
) -> dict[str, Any] | str:
    """The declared type of every value crossing a cut (the graph's, onnxruntime's saved value infos,
    an attention output typed as its query, the rest by onnx's shape inference), or the reason one has
    none."""
    from onnx import helper, shape_inference

    graph = model.graph
    types = {
        v.name: v.type
        for v in [*graph.input, *graph.output, *graph.value_info]
        if v.type.HasField("tensor_type")
    }
    for call in attention:
        if call.output not in types and call.query in types:
            types[call.output] = types[call.query]
    crossing = {name for reads in _reads(model, segments, attention) for name in reads} | {
        o.name for o in graph.output
    }
    crossing -= {t.name for t in graph.initializer}
    if not crossing <= set(types):
        # onnx has no MultiHeadAttention: in a copy (initializers without their external data, which
        # inference does not read), each becomes Identity(query), of its output's type and shape.
        probe = type(model)()
        probe.CopyFrom(model)
        queries = {call.output: call.query for call in attention}
        nodes = [
            helper.make_node("Identity", [queries[node.output[0]]], [node.output[0]])
            if _is_attention(node)
            else node
            for node in probe.graph.node
        ]
        del probe.graph.node[:]
        probe.graph.node.extend(nodes)
        for v in shape_inference.infer_shapes(probe).graph.value_info:
            if v.type.HasField("tensor_type") and v.type.tensor_type.elem_type:
                types.setdefault(v.name, v.type)
    untyped = sorted(crossing - set(types))
    if untyped:
        return f"value {untyped[0]!r} crosses a cut and has no declared type"
    return {name: types[name] for name in crossing}


def _reads(model: Any, segments: list[list[int]], attention: list[AttentionNode]) -> list[set[str]]:
    """What each step reads from before it (steps: segment 0, attention 0, segment 1, ...): a segment
    the values it reads and does not write, an attention node its operands; initializers included."""
    nodes = model.graph.node
    steps: list[set[str]] = []
    for number, segment in enumerate(segments):
        written = {x for i in segment for x in nodes[i].output}
        steps.append({x for i in segment for x in nodes[i].input if x and x not in written})
        if number < len(attention):
            steps.append({attention[number].query, attention[number].key, attention[number].value})
    return steps


def _shape_refusal(call: AttentionNode, types: Mapping[str, Any]) -> str | None:
    """Why ``call``'s declared operand shapes rule the split out: not of rank 3, differing where both
    are known, or a width the heads do not divide; None when they do not (checked again at run time)."""
    fixed: list[set[int]] = [set(), set(), set()]  # the fixed sizes declared per dimension
    for name in (call.query, call.key, call.value):
        tensor = types[name].tensor_type
        if not tensor.HasField("shape"):
            continue
        dims = list(tensor.shape.dim)
        if len(dims) != 3:
            return f"{call.where}: {name!r} has {len(dims)} dimensions, not (batch, tokens, hidden)"
        for axis, dim in enumerate(dims):
            if dim.HasField("dim_value"):
                fixed[axis].add(int(dim.dim_value))
    for axis, sizes in enumerate(fixed):
        if len(sizes) > 1:
            return f"{call.where}: query, key and value differ in dimension {axis} ({sorted(sizes)})"
    if any(width % call.num_heads for width in fixed[2]):
        return f"{call.where}: width {min(fixed[2])} is not divisible by {call.num_heads} heads"
    return None


@dataclass
class _Segment:
    session: Any
    inputs: list[str]
    outputs: list[str]


class AttentionSplitSession:
    """The prepared graph at ``graph_path`` run with ``attention`` computing its attention nodes (see the
    module docstring); ``threads``: onnxruntime's intra-op threads per segment. Raises
    :class:`~clirkit.InvalidInputError` naming the graph and the reason when it cannot be split."""

    def __init__(self, ort: Any, graph_path: Path, attention: Attention, threads: int = 1) -> None:
        import onnx

        self.graph_path = Path(graph_path)
        self.attention = attention
        model = onnx.load(str(self.graph_path), load_external_data=False)
        plan = plan_split(model)
        if isinstance(plan, str):
            raise InvalidInputError(f"{self.graph_path}: attention cannot be split out: {plan}")
        self.plan = plan
        graph = model.graph
        self._inputs = [_graph_arg(v) for v in graph.input]
        self._outputs = [_graph_arg(v) for v in graph.output]
        self._output_names = {o.name for o in self._outputs}
        reads = _reads(model, plan.segments, plan.attention)
        last = {o.name: len(reads) for o in self._outputs}  # graph outputs outlive every step
        for step, names in enumerate(reads):
            for name in names:
                last[name] = max(last.get(name, step), step)
        # After each step, the values no later step reads (feeds too: they are the caller's arrays).
        self._drops: list[list[str]] = [[] for _ in reads]
        for name, step in last.items():
            if step < len(reads):
                self._drops[step].append(name)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        register(options)  # the prepared graph's layer normalizations are clirkit's operators
        # onnxruntime's arena is per session: values passing through 13 sessions' arenas stay out of
        # cache, while the C allocator hands a freed buffer to the next segment (ms per document).
        options.enable_cpu_mem_arena = False
        if any(t.data_location == t.EXTERNAL for t in graph.initializer):
            _check_external_data_support(ort)
            # A segment is loaded from bytes: its initializers' data stay in the prepared graph's
            # external-data file, which onnxruntime maps from the graph's directory.
            options.add_session_config_entry(
                "session.model_external_initializers_file_folder_path", str(self.graph_path.parent)
            )
        self._segments = [
            _segment(ort, options, model, segment, reads, 2 * number, plan.types)
            for number, segment in enumerate(plan.segments)
        ]

    def run(
        self,
        output_names: Iterable[str] | None,
        input_feed: Mapping[str, np.ndarray],
        run_options: Any = None,
    ) -> list[np.ndarray]:
        """The graph's outputs ``output_names`` (all when None) for ``input_feed``, as
        ``InferenceSession.run`` gives them."""
        names = list(output_names) if output_names else [o.name for o in self._outputs]
        unknown = [n for n in names if n not in self._output_names]
        if unknown:
            raise InvalidInputError(f"{self.graph_path}: no graph output {unknown[0]!r}")
        fed = {i.name for i in self._inputs}
        extra = [n for n in input_feed if n not in fed]
        if extra:
            raise InvalidInputError(f"{self.graph_path}: no graph input {extra[0]!r}")
        values = dict(input_feed)
        for number, segment in enumerate(self._segments):
            if segment.session is not None:
                missing = [n for n in segment.inputs if n not in values]
                if missing:
                    raise InvalidInputError(f"{self.graph_path}: input {missing[0]!r} was not fed")
                feeds = {n: values[n] for n in segment.inputs}
                values.update(zip(segment.outputs, segment.session.run(segment.outputs, feeds, run_options)))
            self._drop(values, 2 * number)
            if number < len(self.plan.attention):
                call = self.plan.attention[number]
                values[call.output] = call.run(self.attention, values)
                self._drop(values, 2 * number + 1)
        return [values[n] for n in names]

    def _drop(self, values: dict[str, np.ndarray], step: int) -> None:
        for name in self._drops[step]:
            values.pop(name, None)

    def get_inputs(self) -> list[GraphArg]:
        return list(self._inputs)

    def get_outputs(self) -> list[GraphArg]:
        return list(self._outputs)

    def get_providers(self) -> list[str]:
        return ["CPUExecutionProvider"]


def _segment(
    ort: Any,
    options: Any,
    model: Any,
    indices: list[int],
    reads: list[set[str]],
    step: int,
    types: Mapping[str, Any],
) -> _Segment:
    """The session of the nodes ``indices`` of ``model`` (step ``step`` of ``reads``): it takes the values
    it reads that are not initializers, holds the initializers it reads (their external data left in
    the graph's file), and gives the values it writes that a later step reads or the graph outputs."""
    from onnx import helper

    if not indices:
        return _Segment(None, [], [])
    graph = model.graph
    nodes = [graph.node[i] for i in indices]
    initializers = {t.name: t for t in graph.initializer}
    inputs = sorted(name for name in reads[step] if name not in initializers)
    written = {x for node in nodes for x in node.output if x}
    later = set().union(*reads[step + 1 :]) | {o.name for o in graph.output}
    outputs = sorted(written & later)
    segment = helper.make_model(
        helper.make_graph(
            nodes,
            f"{graph.name or 'graph'}-segment-{step // 2}",
            [helper.make_value_info(name, types[name]) for name in inputs],
            [helper.make_value_info(name, types[name]) for name in outputs],
            initializer=[initializers[name] for name in sorted(reads[step]) if name in initializers],
        ),
        opset_imports=list(model.opset_import),
        functions=list(model.functions),
        ir_version=model.ir_version,
    )
    session = ort.InferenceSession(
        segment.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"]
    )
    return _Segment(session, inputs, outputs)


def _check_external_data_support(ort: Any) -> None:
    """onnxruntime loads a model from bytes with its external data in a given folder from 1.21 on."""
    release = tuple(int(part) for part in ort.__version__.split(".")[:2] if part.isdigit())
    if release < (1, 21):
        raise ImportError(
            f"splitting a graph with external data needs onnxruntime >= 1.21, this is {ort.__version__}: "
            "pip install -U onnxruntime"
        )


def _graph_arg(value: Any) -> GraphArg:
    """A graph input or output's ``ValueInfoProto`` as a :class:`GraphArg`."""
    from onnx import TensorProto

    tensor = value.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim]
    return GraphArg(value.name, f"tensor({TensorProto.DataType.Name(tensor.elem_type).lower()})", dims)


class OnnxAttention:
    """Attention by onnxruntime's own ``MultiHeadAttention`` kernel, one single-node session per (heads,
    scale): the whole graph's computation, as a reference for other kernels and for measuring what the
    split itself costs. Safe to call from several threads."""

    def __init__(self, ort: Any, threads: int = 1) -> None:
        self._ort = ort
        self._threads = threads
        self._sessions: dict[tuple[int, float], Any] = {}
        self._lock = threading.Lock()

    def __call__(
        self, query: np.ndarray, key: np.ndarray, value: np.ndarray, num_heads: int, scale: float
    ) -> np.ndarray:
        session = self._sessions.get((num_heads, scale))
        if session is None:
            session = self._open(num_heads, scale)
        out: np.ndarray = session.run(None, {"query": query, "key": key, "value": value})[0]
        return out

    def _open(self, num_heads: int, scale: float) -> Any:
        from onnx import TensorProto, helper

        with self._lock:
            session = self._sessions.get((num_heads, scale))
            if session is not None:
                return session
            shape = ["batch", "tokens", "hidden"]
            graph = helper.make_graph(
                [
                    helper.make_node(
                        "MultiHeadAttention",
                        list(QKV),
                        ["output"],
                        domain="com.microsoft",
                        num_heads=num_heads,
                        scale=scale,
                    )
                ],
                "attention",
                [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name in QKV],
                [helper.make_tensor_value_info("output", TensorProto.FLOAT, shape)],
            )
            model = helper.make_model(
                graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
            )
            model.ir_version = 8
            options = self._ort.SessionOptions()
            options.intra_op_num_threads = self._threads
            options.inter_op_num_threads = 1
            options.enable_cpu_mem_arena = False  # as the segments' (AttentionSplitSession)
            with unblocked_attention():  # as a prepared graph's (graph_cache.open_prepared)
                session = self._ort.InferenceSession(
                    model.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"]
                )
            self._sessions[(num_heads, scale)] = session
            return session


def int8_attention_session(ort: Any, graph_path: Path) -> AttentionSplitSession | None:
    """The prepared graph at ``graph_path`` with its attention computed in int8 by
    :func:`clirkit._native.quantized_attention`, or None when the graph cannot be cut
    (:func:`split_refusal`) or this CPU lacks the kernel's instructions for its head size (the portable
    kernel gives the same vectors far slower than onnxruntime's float attention)."""
    from clirkit._native import attention_kernel, quantized_attention

    if attention_kernel(16) == "portable":  # no AVX-512 VNNI for any head size: no segments to build
        return None
    try:
        session = AttentionSplitSession(ort, graph_path, quantized_attention)
    except InvalidInputError:  # the graph cannot be cut (refused before any segment is built)
        return None
    for call in session.plan.attention:
        dims = session.plan.types[call.query].tensor_type.shape.dim
        hidden = dims[-1].dim_value if dims else 0
        if not hidden or hidden % call.num_heads or attention_kernel(hidden // call.num_heads) == "portable":
            return None
    return session
