"""GPU encoding, prepared to run where a GPU is lent: clirkit's CUDA path (CUDA execution provider, I/O
binding, float16 weights where the model is a float one, length-sorted batches by a token budget sized
for the device) against a peer on the same texts and model, and the GPU vectors checked against
clirkit's CPU path (cosine per document, 0.999 required).

Peers: ``fastembed`` (fastembed-gpu: ``TextEmbedding(providers=["CUDAExecutionProvider"])`` over the
same model directory, loaded as ``benches/encoders/vs_fastembed.py`` loads it), or ``none``. Runs
alternate (clirkit, peer, peer, clirkit). With ``--device cpu`` everything runs on the CPU provider: the
script's CI-sized form (a few documents), which a test runs so the script is known to work where no GPU
is.

    python benches/gpu/encode.py --model ../shared/models/all-MiniLM-L6-v2-int8 --docs 5183 --fp16
    python benches/gpu/encode.py --model ../shared/models/multilingual-e5-small-int8 --docs 2000 --fp16
    python benches/gpu/encode.py --device cpu --docs 4 --peer none          # CI form, no GPU

Prints one line per run and a JSON summary (also written to ``--json``): documents per second per
runner, the ratio, and the minimum and median cosine of the GPU vectors to the CPU path's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "encoders"))

from clirkit.encoders import OnnxEncoder  # noqa: E402
from clirkit.encoders.quantization import write_float_model  # noqa: E402
from clirkit.encoders.session import is_dynamically_quantized  # noqa: E402


def read_texts(corpus: Path, docs: int) -> list[str]:
    texts = []
    with open(corpus, encoding="utf-8") as f:
        for line, _ in zip(f, range(docs)):
            rec = json.loads(line)
            texts.append(f"{rec.get('title', '')} {rec.get('text', '')}".strip())
    return texts


def fastembed_runner(model_dir: Path, scratch: Path, device: str, dim: int, prefix: str) -> Callable:
    from vs_fastembed import fastembed_encoder

    providers = ["CUDAExecutionProvider"] if device == "cuda" else ["CPUExecutionProvider"]
    model = fastembed_encoder(model_dir, scratch, 512, dim, providers=providers)
    return lambda texts: np.array(list(model.embed([prefix + t for t in texts])), dtype=np.float32)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    shared = Path(os.environ.get("CLIRKIT_SHARED", "../shared"))
    ap.add_argument("--model", type=Path, default=shared / "models" / "all-MiniLM-L6-v2-int8")
    ap.add_argument("--corpus", type=Path, default=shared / "data" / "beir-scifact" / "corpus.jsonl")
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument(
        "--fp16",
        action="store_true",
        help="float16 weights on CUDA (a dynamically int8-quantized model is dequantized first)",
    )
    ap.add_argument(
        "--batch-tokens", type=int, help="token budget per batch (default: clirkit's for the device)"
    )
    ap.add_argument("--peer", choices=("fastembed", "none"), default="fastembed")
    ap.add_argument("--check-docs", type=int, default=200, help="documents compared with the CPU path")
    ap.add_argument("--json", type=Path, help="also write the summary here")
    args = ap.parse_args()

    texts = read_texts(args.corpus, args.docs)
    if args.device == "cuda":
        import onnxruntime

        if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
            print("no CUDA execution provider here: no GPU figure (run with --device cpu for the CI form)")
            return 3
    gpu = OnnxEncoder(
        args.model, device=args.device, fp16=args.fp16 or None, batch_tokens=args.batch_tokens, batch_size=256
    )
    if args.device == "cuda" and gpu.session.get_providers()[0] != "CUDAExecutionProvider":
        print(f"the CUDA provider did not start (providers {gpu.session.get_providers()}): no GPU figure")
        return 4
    dequantized = gpu.fp16 and is_dynamically_quantized(args.model / "model.onnx")
    reference_scratch = tempfile.TemporaryDirectory(prefix="gpu-encode-reference-")
    reference_dir = (
        write_float_model(args.model, Path(reference_scratch.name) / "float") if dequantized else args.model
    )
    cpu = OnnxEncoder(reference_dir, device="cpu")
    runners: dict[str, Callable[[list[str]], np.ndarray]] = {"clirkit": gpu.encode_passages}
    with tempfile.TemporaryDirectory(prefix="gpu-encode-") as scratch:
        if args.peer == "fastembed":
            runners["fastembed"] = fastembed_runner(
                args.model, Path(scratch), args.device, gpu.dim, gpu.passage_prefix
            )
        order = ["clirkit", *runners.keys() - {"clirkit"}]
        order = order + order[::-1]
        wall = dict.fromkeys(runners, 0.0)
        vectors: dict[str, np.ndarray] = {}
        gpu.encode_passages(texts[:8])  # warm-up: kernels, allocator
        for name in order:
            start = time.perf_counter()
            vectors[name] = runners[name](texts)
            took = time.perf_counter() - start
            wall[name] += took
            print(f"  {name:10s} {took:7.2f}s  {len(texts) / took:8.1f} docs/s", flush=True)
    checked = texts[: args.check_docs]
    reference = cpu.encode_passages(checked)
    cosines = (vectors["clirkit"][: len(checked)] * reference).sum(axis=1)
    summary: dict[str, Any] = {
        "device": args.device,
        "model": str(args.model),
        "docs": len(texts),
        "fp16": gpu.fp16,
        "dequantized": bool(dequantized),
        "batch_tokens": gpu.batch_tokens,
        "docs_per_s": {name: 2 * len(texts) / seconds for name, seconds in wall.items()},
        "cosine_to_cpu": {"min": float(cosines.min()), "median": float(np.median(cosines))},
        "cosine_ok": bool(cosines.min() >= 0.999),
    }
    if is_dynamically_quantized(args.model / "model.onnx") and not dequantized:
        # The CPU path's prepared graph fuses attention, which int8 requantization turns into ~1e-3 of
        # cosine on its own: the shipped graph on CPU is the like-for-like reference for the int8 GPU run.
        shipped = OnnxEncoder(args.model, device="cpu", optimize_graph=False).encode_passages(checked)
        same_graph = (vectors["clirkit"][: len(checked)] * shipped).sum(axis=1)
        summary["cosine_to_cpu_shipped_graph"] = {
            "min": float(same_graph.min()),
            "median": float(np.median(same_graph)),
        }
    if "fastembed" in wall:
        summary["clirkit_vs_fastembed"] = wall["fastembed"] / wall["clirkit"]
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return 0 if summary["cosine_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
