"""CPU encoding throughput: clirkit against fastembed (dense) and a plain onnxruntime SPLADE loop, side by
side in one process, runs alternated, the same ONNX file, texts and thread budget.

fastembed 0.9 loads the very model directory clirkit uses, through ``TextEmbedding.add_custom_model`` and
``specific_model_path``, once ``tokenizer_config.json`` (max length, pad token) and
``special_tokens_map.json`` are beside it: the model directory is copied to a temporary directory (the
shared one is read-only) and those two files are written there. fastembed runs as its users run it:
``TextEmbedding(threads=N)`` (onnxruntime's intra-op pool of N threads, graph optimizations at the
default level), ``embed(texts)`` with its default batches of 256 (``--fastembed-batch``), each padded to its longest text;
multilingual-e5's ``"passage: "`` prefix is prepended by hand (fastembed's custom models have no
prefixes). clirkit runs its defaults (``OnnxEncoder(threads=N)``: for a dynamically quantized model one
text per call, N concurrent, on the prepared graph) and its fast mode (``batch_invariant=False``:
for such a model on a CPU with AVX-512 VNNI, one text per call with attention in int8; otherwise
length-sorted batches by a token budget). Runs alternate F C X X C F, so load drift on a shared
machine hits all alike; each run's wall and CPU time, the load average and the ratios are printed.

Vectors: cosine of each document's clirkit vector to fastembed's (and fast mode's to the default's), and, on the first
``--reference-docs`` documents, to fastembed with ``batch_size=1`` (no padding, no batch-mates: what
fastembed's own vectors are when the batch composition is taken out).

Work: the int8 multiply-accumulates per token are counted from the graph (every ``MatMulInteger``'s
weight matrix, ``K x N``), times 2 for operations, times the real (unpadded) tokens; attention's float
operations are ``4 x tokens^2 x hidden`` per layer. The peak quoted beside is AVX-512 VNNI's: 2
``VPDPBUSD`` per cycle per core (64 int8 multiply-accumulates each) at the clock ``/proc/cpuinfo`` reports;
on a CPU with AMX (``amx_int8`` among its flags; onnxruntime's MLAS then computes its int8 products on the
tiles) it is AMX's: one ``TDPBUSD`` (16 x 16 x 64 multiply-accumulates) every 16 cycles per core.
A graph whose products are float (all-MiniLM-L6-v2-int8 stores int8 weights that are cast to float and
folded at load) is counted in float operations (weights and attention) against AVX-512's FMA peak (2 FMA
per cycle per core, 16 float multiply-adds each).

Run with the benches' own venv (fastembed is not a clirkit dependency) and clirkit on ``PYTHONPATH``:

    PYTHONPATH=python /work/venv-bench-encoding/bin/python benches/encoders/vs_fastembed.py \\
        --model multilingual-e5-small-int8 --docs 2000 --threads 2

``--model splade-tiny-en`` compares clirkit's ``SparseEncoder`` with the plain SPLADE loop of
``benches/encoders/encode_throughput.py`` instead (fastembed has no loader for this model), A B B A.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the plain loops of encode_throughput.py

from clirkit.encoders import OnnxEncoder, is_sparse_model  # noqa: E402
from encode_throughput import interleaved  # noqa: E402
from encode_throughput import sparse_main as encode_throughput_sparse  # noqa: E402

VNNI_INT8_OPS_PER_CYCLE = 2 * 64 * 2  # two VPDPBUSD zmm per cycle, 64 multiply-accumulates each
AMX_INT8_OPS_PER_CYCLE = 16 * 16 * 64 // 16 * 2  # one TDPBUSD tile product every 16 cycles
FP32_FLOPS_PER_CYCLE = 2 * 16 * 2  # two FMA zmm per cycle, 16 multiply-adds each


def load_texts(shared: Path, docs: int) -> list[str]:
    texts = []
    with open(shared / "data" / "beir-scifact" / "corpus.jsonl", encoding="utf-8") as f:
        for line, _ in zip(f, range(docs)):
            rec = json.loads(line)
            texts.append(f"{rec['title']} {rec['text']}".strip())
    return texts


def fastembed_model_dir(model_dir: Path, scratch: Path, max_length: int) -> Path:
    """A copy of ``model_dir`` with the tokenizer files fastembed reads."""
    target = scratch / model_dir.name
    shutil.copytree(model_dir, target)
    tokenizer = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    added = {t["content"] for t in tokenizer.get("added_tokens", [])}
    xlmr = "<pad>" in added
    specials = (
        {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "sep_token": "</s>",
         "pad_token": "<pad>", "cls_token": "<s>", "mask_token": "<mask>"}
        if xlmr
        else {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
              "mask_token": "[MASK]"}
    )  # fmt: skip
    (target / "special_tokens_map.json").write_text(json.dumps(specials), encoding="utf-8")
    (target / "tokenizer_config.json").write_text(
        json.dumps({"model_max_length": max_length, **specials}), encoding="utf-8"
    )
    return target


def fastembed_encoder(model_dir: Path, scratch: Path, max_length: int, dim: int, **options: Any) -> Any:
    """fastembed's ``TextEmbedding`` (mean pooling, L2 norm) over a copy of ``model_dir`` made in
    ``scratch`` (:func:`fastembed_model_dir`); ``options`` go to ``TextEmbedding`` (threads, providers)."""
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    local = fastembed_model_dir(model_dir, scratch, max_length)
    name = f"clirkit-bench/{model_dir.name}"
    TextEmbedding.add_custom_model(
        model=name,
        pooling=PoolingType.MEAN,
        normalization=True,
        sources=ModelSource(hf=name),
        dim=dim,
        model_file="model.onnx",
    )
    return TextEmbedding(model_name=name, specific_model_path=str(local), **options)


def weight_macs_per_token(model_path: Path) -> tuple[int, int]:
    """Multiply-accumulates per token of the graph's matrix products by weights: (int8 ``MatMulInteger``,
    float ``MatMul``/``Gemm``). A float product's weight is found through the ``Cast``/``Mul``/
    ``DequantizeLinear``/``Transpose`` nodes of a weight-only quantized export (constant-folded at load)."""
    import onnx

    graph = onnx.load(str(model_path), load_external_data=False).graph
    shapes = {t.name: list(t.dims) for t in graph.initializer}
    producers = {out: n for n in graph.node for out in n.output}

    def weight(name: str) -> int:
        for _ in range(4):
            if name in shapes:
                return int(np.prod(shapes[name])) if len(shapes[name]) == 2 else 0
            node = producers.get(name)
            if node is None or node.op_type not in ("Cast", "Mul", "DequantizeLinear", "Transpose"):
                return 0
            # the operand that is (or leads to) the weight: not a per-channel scale of shape (1, N)
            known = [i for i in node.input if i in shapes and len(shapes[i]) == 2 and min(shapes[i]) > 1]
            name = known[0] if known else node.input[0]
        return 0

    int8 = sum(weight(n.input[1]) for n in graph.node if n.op_type == "MatMulInteger")
    floats = sum(weight(n.input[1]) for n in graph.node if n.op_type in ("MatMul", "Gemm"))
    return int8, floats


def cpu_clock_hz() -> float:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            mhz = [float(line.split(":")[1]) for line in f if line.startswith("cpu MHz")]
        return (max(mhz) if mhz else 0.0) * 1e6
    except OSError:
        return 0.0


def has_amx_int8() -> bool:
    """Whether the CPU reports AMX's int8 tile products (Linux's ``amx_int8`` flag)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return any(line.startswith("flags") and "amx_int8" in line.split() for line in f)
    except OSError:
        return False


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def dense_main(args: argparse.Namespace, model_dir: Path, texts: list[str]) -> None:
    clirkit = OnnxEncoder(model_dir, threads=args.threads, device="cpu", max_length=args.max_length)
    fast = OnnxEncoder(
        model_dir, threads=args.threads, device="cpu", max_length=args.max_length, batch_invariant=False
    )
    prefix = clirkit.passage_prefix
    lengths = [len(e.ids) for e in clirkit.tokenizer.encode_batch([prefix + t for t in texts])]
    import onnxruntime

    print(
        f"{len(texts)} SciFact docs, {sum(lengths)} tokens (mean {np.mean(lengths):.0f}, max {max(lengths)}, "
        f"max length {args.max_length}); threads {args.threads}; onnxruntime {onnxruntime.__version__}; "
        f"clirkit graph {clirkit.graph_optimization}, one text per call: {clirkit.one_text_per_call}; fast mode "
        f"graph {fast.graph_optimization}, one text per call: {fast.one_text_per_call}; load {load()}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="vs-fastembed-") as scratch:
        fastembed = fastembed_encoder(
            model_dir, Path(scratch), args.max_length, clirkit.dim, threads=args.threads
        )
        prefixed = [prefix + t for t in texts]
        runners = {
            "fastembed": lambda: np.array(
                list(fastembed.embed(prefixed, batch_size=args.fastembed_batch)), dtype=np.float32
            ),
            "clirkit": lambda: clirkit.encode_passages(texts),
            "clirkit-fast": lambda: fast.encode_passages(texts),
        }
        order = args.order.split(",")
        unknown = sorted(set(order) - set(runners))
        if unknown or "fastembed" not in order or "clirkit" not in order:
            sys.exit(
                f"--order names runs of {', '.join(runners)} (fastembed and clirkit at least); got {unknown}"
            )
        wall, cpu, vectors = interleaved(runners, order, len(texts), "docs")
        reference = np.array(
            list(fastembed.embed(prefixed[: args.reference_docs], batch_size=1)), dtype=np.float32
        )
    print(f"load after: {load()}")
    runs = {name: order.count(name) * len(texts) for name in set(order)}  # documents encoded per runner
    macs, float_macs = weight_macs_per_token(model_dir / "model.onnx")
    hidden = clirkit.dim
    layers = int(clirkit.config.get("num_hidden_layers", 0))
    attention_flops = sum(4 * length * length * hidden * layers for length in lengths)
    clock = cpu_clock_hz()
    amx = has_amx_int8()
    peak = (AMX_INT8_OPS_PER_CYCLE if amx else VNNI_INT8_OPS_PER_CYCLE) * args.threads * clock
    float_peak = FP32_FLOPS_PER_CYCLE * args.threads * clock
    encoders = {"clirkit": clirkit, "clirkit-fast": fast}
    for name in [n for n in ("clirkit", "clirkit-fast") if n in order]:
        cos = (vectors["fastembed"] * vectors[name]).sum(1)
        cos_ref = (reference * vectors[name][: len(reference)]).sum(1)
        int8_ops = 2 * macs * sum(lengths) * order.count(name) / wall[name]
        int8_per_cpu = int8_ops * wall[name] / cpu[name]
        print(
            f"{name}: {runs[name] / wall[name]:.2f} docs/s vs fastembed {runs['fastembed'] / wall['fastembed']:.2f}: "
            f"{runs[name] / wall[name] / (runs['fastembed'] / wall['fastembed']):.2f}x docs/s (wall), "
            f"{runs[name] / cpu[name] / (runs['fastembed'] / cpu['fastembed']):.2f}x docs per cpu-second; "
            f"cosine to fastembed min {cos.min():.5f} median {np.median(cos):.5f}, "
            f"{(cos >= 0.999).mean():.1%} >= 0.999; to fastembed batch_size=1 ({len(reference)} docs) "
            f"min {cos_ref.min():.5f} median {np.median(cos_ref):.5f}"
        )
        shares = f" ({args.threads} cores at {clock / 1e9:.2f} GHz)"
        if macs:
            print(
                f"  int8: {macs / 1e6:.1f}M MACs per token, {int8_ops / 1e9:.0f} Gop/s per wall second"
                + (
                    f" = {int8_ops / peak:.1%} of the cores' {'AMX-INT8' if amx else 'AVX-512 VNNI'} peak "
                    f"{peak / 1e12:.2f} Top/s"
                    if peak
                    else ""
                )
                + f"; {int8_per_cpu / 1e9:.0f} Gop/s per CPU-second"
                + (f" = {int8_per_cpu / peak * args.threads:.1%} of one core's" if peak else "")
                + shares
                + f"; attention {attention_flops * order.count(name) / wall[name] / 1e9:.0f} "
                + (
                    "int8 Gop/s"
                    if encoders[name].graph_optimization.endswith("int8-attention")
                    else "float Gflop/s"
                )
            )
        if float_macs and not macs:
            flops = (2 * float_macs * sum(lengths) + attention_flops) * order.count(name) / wall[name]
            per_cpu = flops * wall[name] / cpu[name]
            print(
                f"  float: {float_macs / 1e6:.1f}M weight MACs per token + attention, {flops / 1e9:.0f} Gflop/s "
                "per wall second"
                + (
                    f" = {flops / float_peak:.1%} of the cores' AVX-512 FMA peak {float_peak / 1e9:.0f}"
                    if clock
                    else ""
                )
                + f"; {per_cpu / 1e9:.0f} Gflop/s per CPU-second"
                + (f" = {per_cpu / float_peak * args.threads:.1%} of one core's" if clock else "")
                + shares
            )
    if "clirkit-fast" in order:
        modes = (vectors["clirkit"] * vectors["clirkit-fast"]).sum(1)
        print(f"clirkit-fast vs clirkit default: cosine min {modes.min():.5f} median {np.median(modes):.5f}")
    ref_self = (reference * vectors["fastembed"][: len(reference)]).sum(1)
    print(
        f"fastembed batch {args.fastembed_batch} vs its own batch_size=1: cosine min {ref_self.min():.5f} "
        f"median {np.median(ref_self):.5f}"
    )


def sparse_main(args: argparse.Namespace, model_dir: Path, texts: list[str]) -> None:
    """encode_throughput.py's SPLADE comparison (clirkit's SparseEncoder against the plain loop, A B B A,
    256 tokens), between two load readings."""
    print(f"load before: {load()}", flush=True)
    encode_throughput_sparse(model_dir, texts, args.threads)
    print(f"load after: {load()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", default=os.environ.get("CLIRKIT_SHARED", "../shared"))
    ap.add_argument("--model", default="multilingual-e5-small-int8")
    ap.add_argument("--docs", type=int, default=2000, help="first N SciFact documents (title + text)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-length", type=int, default=None, help="dense models (default 512; SPLADE: 256)")
    ap.add_argument("--reference-docs", type=int, default=100)
    ap.add_argument(
        "--order",
        default="fastembed,clirkit,clirkit-fast,clirkit-fast,clirkit,fastembed",
        help="the runs, in order (dense models): fastembed, clirkit (default mode), clirkit-fast",
    )
    ap.add_argument(
        "--fastembed-batch",
        type=int,
        default=256,
        help="fastembed's batch size (its default 256 pads 256 texts to 512 tokens: ~15-22 GB for e5 at 512, "
        "more than this 23 GB machine can give twice; 32 keeps it near 2 GB)",
    )
    args = ap.parse_args()
    shared = Path(args.shared)
    model_dir = shared / "models" / args.model
    texts = load_texts(shared, args.docs)
    if is_sparse_model(model_dir):
        sparse_main(args, model_dir, texts)
    else:
        args.max_length = args.max_length or 512
        dense_main(args, model_dir, texts)


if __name__ == "__main__":
    main()
