"""A transformer layer's residual layer normalization, three ways, side by side in one process: onnxruntime's
``Add`` + ``LayerNormalization`` (what clirkit's prepared graph ran before preparation version 5), its
``com.microsoft.SkipLayerNormalization`` (what it runs at its default level, and fastembed with it) and
clirkit's ``ai.clirkit.SkipLayerNormalization`` (the same bits as the second, rows stepped together).

One single-node session each, one onnxruntime thread, ``--tokens x --hidden`` float32 operands (e5-small's
shape for a SciFact document by default); each round times ``--calls`` calls of each session, the order
reversed every other round, CPU time per call. The outputs of the two ``SkipLayerNormalization`` kernels
are checked equal bit for bit.

    python benches/encoders/skip_layer_norm.py --rounds 6
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import onnxruntime as ort
from clirkit.encoders.custom_ops import DOMAIN, register
from onnx import TensorProto, helper


def graph(kind: str, hidden: int) -> bytes:
    """A one-layer-normalization graph of ``kind``: ``add``, ``onnxruntime`` or ``clirkit``."""
    rng = np.random.default_rng(0)
    weights = [
        helper.make_tensor(name, TensorProto.FLOAT, [hidden], rng.standard_normal(hidden).astype(np.float32))
        for name in ("gamma", "beta")
    ]
    if kind == "add":
        nodes = [
            helper.make_node("Add", ["input", "skip"], ["sum"]),
            helper.make_node(
                "LayerNormalization", ["sum", "gamma", "beta"], ["output"], axis=-1, epsilon=1e-12
            ),
        ]
    else:
        domain = DOMAIN if kind == "clirkit" else "com.microsoft"
        nodes = [
            helper.make_node(
                "SkipLayerNormalization",
                ["input", "skip", "gamma", "beta"],
                ["output"],
                domain=domain,
                epsilon=1e-12,
            )
        ]
    shape = [1, "tokens", hidden]
    model = helper.make_model(
        helper.make_graph(
            nodes,
            kind,
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
    return model.SerializeToString()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=369)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    sessions = {}
    for kind in ("add", "onnxruntime", "clirkit"):
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        # Left as built: the optimizer would fuse the first into the second.
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        register(options)
        sessions[kind] = ort.InferenceSession(
            graph(kind, args.hidden), options, providers=["CPUExecutionProvider"]
        )
    rng = np.random.default_rng(1)
    feeds = {
        n: rng.standard_normal((1, args.tokens, args.hidden)).astype(np.float32) for n in ("input", "skip")
    }
    theirs, ours = (sessions[k].run(None, feeds)[0] for k in ("onnxruntime", "clirkit"))
    print(
        f"{args.tokens} x {args.hidden}, one thread; SkipLayerNormalization outputs bit for bit equal: "
        f"{np.array_equal(theirs, ours)}"
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
