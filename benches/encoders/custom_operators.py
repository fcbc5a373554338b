"""clirkit's onnxruntime operators against onnxruntime's own kernels, side by side in one process, one
onnxruntime thread, single-node sessions on float32 operands of e5-small's shapes for a SciFact document
(``--tokens`` x 384 by default):

- ``layer-norm``: a residual layer normalization, three ways: onnxruntime's ``Add`` +
  ``LayerNormalization`` (what clirkit's prepared graph ran before preparation version 5), its
  ``com.microsoft.SkipLayerNormalization`` (what it runs at its default level, and fastembed with it) and
  clirkit's ``ai.clirkit.SkipLayerNormalization`` (the same bits as the second).
- ``attention``: multi-head self-attention (12 heads of 32 by default), three ways: onnxruntime's
  ``com.microsoft.MultiHeadAttention`` on its flash path (what it takes without a mask), off it (the
  unfused operators' arithmetic, what its default level computes for the shipped graph) and clirkit's
  ``ai.clirkit.MultiHeadAttention`` (the same bits as the second).

Each round times ``--calls`` calls of each session, the order reversed every other round, CPU time per
call. The outputs of clirkit's operator are checked bit for bit against the onnxruntime kernel it copies.

    python benches/encoders/custom_operators.py layer-norm --rounds 6
    python benches/encoders/custom_operators.py attention --rounds 6
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import onnxruntime as ort
from clirkit.encoders.custom_ops import DOMAIN, register, unblocked_attention
from onnx import TensorProto, helper


def layer_norm_nodes(kind: str) -> list:
    """A layer normalization of ``input + skip``: ``add``, ``onnxruntime`` or ``clirkit``."""
    if kind == "add":
        return [
            helper.make_node("Add", ["input", "skip"], ["sum"]),
            helper.make_node(
                "LayerNormalization", ["sum", "gamma", "beta"], ["output"], axis=-1, epsilon=1e-12
            ),
        ]
    domain = DOMAIN if kind == "clirkit" else "com.microsoft"
    inputs = ["input", "skip", "gamma", "beta"]
    return [helper.make_node("SkipLayerNormalization", inputs, ["output"], domain=domain, epsilon=1e-12)]


def attention_nodes(kind: str, heads: int, head_size: int) -> list:
    """Self-attention of ``input`` (as query, key and value): ``flash``, ``onnxruntime`` (off the flash
    path, by how the session is made) or ``clirkit``."""
    domain = DOMAIN if kind == "clirkit" else "com.microsoft"
    return [
        helper.make_node(
            "MultiHeadAttention",
            ["input", "skip", "input"],
            ["output"],
            domain=domain,
            num_heads=heads,
            scale=head_size**-0.5,
        )
    ]


def session(nodes: list, hidden: int, off_flash: bool) -> ort.InferenceSession:
    rng = np.random.default_rng(0)
    weights = [
        helper.make_tensor(name, TensorProto.FLOAT, [hidden], rng.standard_normal(hidden).astype(np.float32))
        for name in ("gamma", "beta")
        if any(name in node.input for node in nodes)
    ]
    shape = [1, "tokens", hidden]
    model = helper.make_model(
        helper.make_graph(
            nodes,
            "operator",
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("input", "skip")],
            [helper.make_tensor_value_info("output", TensorProto.FLOAT, shape)],
            initializer=weights,
        ),
        opset_imports=[
            helper.make_opsetid("", 17),
            helper.make_opsetid("com.microsoft", 1),
            helper.make_opsetid(DOMAIN, 1),
        ],
    )
    model.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    # Left as built: the optimizer would fuse ``Add`` + ``LayerNormalization``.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    register(options)
    if off_flash:
        with unblocked_attention():
            return ort.InferenceSession(
                model.SerializeToString(), options, providers=["CPUExecutionProvider"]
            )
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("operator", choices=("layer-norm", "attention"))
    for flag, default in (("tokens", 369), ("hidden", 384), ("heads", 12), ("calls", 200), ("rounds", 6)):
        ap.add_argument(f"--{flag}", type=int, default=default)
    args = ap.parse_args()
    if args.operator == "layer-norm":
        kinds, name = ("add", "onnxruntime", "clirkit"), "SkipLayerNormalization"
    else:
        kinds, name = ("flash", "onnxruntime", "clirkit"), "MultiHeadAttention"

    def nodes(kind: str) -> list:
        if args.operator == "layer-norm":
            return layer_norm_nodes(kind)
        return attention_nodes(kind, args.heads, args.hidden // args.heads)

    off_flash = args.operator == "attention"
    sessions = {
        kind: session(nodes(kind), args.hidden, off_flash and kind == "onnxruntime") for kind in kinds
    }
    rng = np.random.default_rng(1)
    feeds = {
        n: rng.standard_normal((1, args.tokens, args.hidden)).astype(np.float32) for n in ("input", "skip")
    }
    theirs, ours = (sessions[k].run(None, feeds)[0] for k in ("onnxruntime", "clirkit"))
    print(
        f"{args.tokens} x {args.hidden}, one thread; {name} outputs of clirkit and onnxruntime bit for bit "
        f"equal: {np.array_equal(theirs, ours)}"
    )
    times: dict[str, list[float]] = {k: [] for k in sessions}
    for round_ in range(args.rounds):
        for kind in list(sessions) if round_ % 2 == 0 else list(sessions)[::-1]:
            start = time.process_time()
            for _ in range(args.calls):
                sessions[kind].run(None, feeds)
            times[kind].append((time.process_time() - start) / args.calls * 1e6)
    for kind, values in times.items():
        print(
            f"  {kind:12s} us CPU per call: {' '.join(f'{v:.0f}' for v in values)}  (median {np.median(values):.0f})"
        )


if __name__ == "__main__":
    main()
