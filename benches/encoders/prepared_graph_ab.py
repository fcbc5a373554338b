"""One model's CPU graphs side by side in one process: CPU time per document, alternated runs over the
same texts, and where each graph spends its time (onnxruntime's profiler, share per operator type).

Every graph runs through the same :class:`clirkit.encoders.OnnxEncoder` (its tokenization, its batches:
one text per call for a dynamically quantized model, length-sorted token-budget batches otherwise, its
pooling) with one onnxruntime thread, so the graph is the only difference between runs. A graph is
``prepared`` (this checkout's prepared graph, as the encoder builds it), ``shipped`` (``model.onnx`` at
onnxruntime's default level) or the path of an ONNX file, such as the prepared graph an earlier checkout
cached (``~/.cache/clirkit/graphs/model.<variant>.<key>.onnx`` for a read-only model directory), run
as clirkit runs a prepared graph today (:func:`clirkit.encoders.graph_cache.open_prepared`; a graph from
before preparation version 5 then gets onnxruntime's own, slower ``SkipLayerNormalization``). Runs go A B B A (``--rounds`` times); vectors are compared with the
first graph's (cosine per text).

    python benches/encoders/prepared_graph_ab.py --shared /work/shared --model all-MiniLM-L6-v2-int8 \\
        --max-length 180 --docs 150 --graph before=<earlier prepared graph> --graph after=prepared --profile
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from clirkit.encoders import OnnxEncoder  # noqa: E402
from clirkit.encoders.graph_cache import open_prepared, prepared_graph  # noqa: E402
from vs_fastembed import load, load_texts  # noqa: E402


def session(encoder: OnnxEncoder, spec: str, profile_dir: str | None = None) -> Any:
    """A one-thread CPU session over the graph ``spec`` names (see the module docstring)."""
    if spec == "prepared" and profile_dir is None:
        return encoder.runtime.session
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    if profile_dir is not None:
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(profile_dir) / "profile")
    if spec == "shipped":
        return ort.InferenceSession(
            str(encoder.model_dir / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
    if spec == "prepared":
        path = prepared_graph(
            ort,
            encoder.model_dir / "model.onnx",
            masked=not encoder.one_text_per_call,
            nonempty=len(encoder.tokenizer.encode("").ids) > 0,
        )
    else:
        path = Path(spec)
    return open_prepared(ort, path, options)


def encode(encoder: OnnxEncoder, graph: Any, texts: list[str]) -> tuple[np.ndarray, float, float]:
    """(vectors, wall seconds, CPU seconds) of ``texts`` encoded with the session ``graph``."""
    encoder.runtime.session = graph
    wall, cpu = time.perf_counter(), time.process_time()
    vectors = encoder.encode_passages(texts)
    return vectors, time.perf_counter() - wall, time.process_time() - cpu


def profile(encoder: OnnxEncoder, spec: str, texts: list[str]) -> list[tuple[str, float, int]]:
    """(operator type, share of the kernel time, nodes run) for ``texts`` on ``spec``'s graph, largest
    share first."""
    with tempfile.TemporaryDirectory() as scratch:
        graph = session(encoder, spec, scratch)
        encode(encoder, graph, texts)
        events = json.loads(Path(graph.end_profiling()).read_text(encoding="utf-8"))
    times: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for event in events:
        if event.get("cat") == "Node" and event.get("name", "").endswith("_kernel_time"):
            op = event["args"].get("op_name", "?")
            times[op] += event["dur"]
            counts[op] += 1
    total = sum(times.values()) or 1.0
    return sorted(((op, t / total, counts[op]) for op, t in times.items()), key=lambda r: -r[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", default=os.environ.get("CLIRKIT_SHARED", "../shared"))
    ap.add_argument("--model", default="all-MiniLM-L6-v2-int8")
    ap.add_argument("--max-length", type=int, default=180)
    ap.add_argument("--docs", type=int, default=150, help="first N SciFact documents (title + text)")
    ap.add_argument("--graph", action="append", required=True, help="NAME=prepared|shipped|PATH, repeated")
    ap.add_argument("--rounds", type=int, default=1, help="A B B A rounds")
    ap.add_argument("--batch-size", type=int, default=32, help="texts per batch at most (the encoder's)")
    ap.add_argument("--profile", action="store_true", help="also print each graph's per-operator shares")
    ap.add_argument("--profile-docs", type=int, default=40)
    args = ap.parse_args()
    graphs = dict(spec.split("=", 1) for spec in args.graph)
    model_dir = Path(args.shared) / "models" / args.model
    encoder = OnnxEncoder(
        model_dir, device="cpu", threads=1, max_length=args.max_length, batch_size=args.batch_size
    )
    texts = load_texts(Path(args.shared), args.docs)
    tokens = sum(
        len(e.ids) for e in encoder.tokenizer.encode_batch([encoder.passage_prefix + t for t in texts])
    )
    print(
        f"{args.model}, max length {encoder.max_length}, {len(texts)} documents, {tokens} tokens before "
        f"truncation; one onnxruntime thread; load {load()}"
    )
    sessions = {name: session(encoder, spec) for name, spec in graphs.items()}
    names = list(sessions)
    order = (names + names[::-1]) * args.rounds
    cpu: dict[str, float] = defaultdict(float)
    vectors: dict[str, np.ndarray] = {}
    for name in names:  # a warm-up run of each, whose vectors are compared
        vectors[name] = encode(encoder, sessions[name], texts)[0]
    for name in order:
        _, wall, used = encode(encoder, sessions[name], texts)
        cpu[name] += used
        print(
            f"  {name:>12}: {wall:6.2f} s wall, {used:6.2f} s CPU, {1000 * used / len(texts):6.2f} ms CPU/doc"
        )
    runs = 2 * args.rounds
    first = names[0]
    for name in names:
        cosine = np.sum(vectors[name] * vectors[first], axis=1) / (
            np.linalg.norm(vectors[name], axis=1) * np.linalg.norm(vectors[first], axis=1)
        )
        difference = float(np.abs(vectors[name] - vectors[first]).max())
        print(
            f"{name:>12}: {1000 * cpu[name] / runs / len(texts):7.2f} ms CPU/doc, "
            f"{cpu[first] / cpu[name]:.3f}x less CPU than {first}; cosine to {first} min {cosine.min():.9f}, "
            f"largest difference {difference:.2e}"
        )
    print(f"load after: {load()}")
    if args.profile:
        for name, spec in graphs.items():
            print(f"profile of {name} ({args.profile_docs} documents): share of kernel time, nodes run")
            for op, share, count in profile(encoder, spec, texts[: args.profile_docs])[:14]:
                print(f"  {op:<28} {100 * share:5.1f} %  {count:6d}")


if __name__ == "__main__":
    main()
