"""CPU encoding throughput: clirkit's OnnxEncoder against the naive loop, side by side in one run.

The naive loop is what users write: batches of 32 in corpus order, each padded to its longest text,
the model file as shipped, onnxruntime's default session (built once, outside the timing, like
clirkit's encoders). "clirkit" is the default encoder: a
dynamically quantized model runs one text per call (no padding at all; vectors bit-identical to a
one-at-a-time loop) on the graph as shipped, ``--threads`` texts at a time with one onnxruntime thread
each. "clirkit-fast" is ``batch_invariant=False``: length-sorted batches of 32 (dynamic padding) of the
shipped graph, ``--threads`` batches at a time; vectors then move ~1e-3 with batch composition. All use
the same model, prefixes, max length 512, thread count and texts. Runs alternate (A B C C B A) so load
drift on a shared machine affects all alike; embeddings are compared to the naive loop's.

    python benches/encoders/encode_throughput.py --docs 256

With a learned-sparse model (``--model splade-tiny-en``) clirkit's ``SparseEncoder`` (length-sorted
batches by a token budget, ``--threads`` batches at a time, the vocabulary projection split off the
graph and fused with the max over each text's own tokens, then log(1 + relu)) runs against the naive
SPLADE loop (batches of 8 in corpus order padded to their longest, log(1 + relu) of every token's
logits masked and maxed, onnxruntime's default session) and against itself with
``split_projection=False`` ("clirkit-whole": the prepared graph's full logits, max over each text's
tokens, as before the split), documents at 256 tokens, A B C C B A; vectors are compared term by term
to the naive loop's.

    python benches/encoders/encode_throughput.py --model splade-tiny-en --docs 512 --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnxruntime as ort
import tokenizers
from clirkit.encoders import OnnxEncoder, SparseEncoder, is_sparse_model


class NaiveEncoder:
    """The loop users write: batches of ``batch`` in input order, padded to their longest text, on
    onnxruntime's default session over the shipped graph. Session and tokenizer are built once,
    outside the timed calls, as clirkit's encoders are."""

    def __init__(self, model_dir: Path, threads: int, batch: int = 32) -> None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(
            str(model_dir / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        self.tokenizer = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(512)
        pad = next(t for t in ("<pad>", "[PAD]") if self.tokenizer.token_to_id(t) is not None)
        self.tokenizer.enable_padding(pad_id=self.tokenizer.token_to_id(pad), pad_token=pad)
        self.names = {i.name for i in self.session.get_inputs()}
        self.batch = batch

    def encode(self, texts: list[str], prefix: str) -> np.ndarray:
        out = []
        for start in range(0, len(texts), self.batch):
            enc = self.tokenizer.encode_batch([prefix + t for t in texts[start : start + self.batch]])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = self.session.run(None, {k: v for k, v in feed.items() if k in self.names})[0]
            pooled = (hidden * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
            out.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
        return np.concatenate(out)


def interleaved(
    runners: dict[str, Callable[[], Any]], order: Sequence[str], count: int, unit: str
) -> tuple[dict[str, float], dict[str, float], dict[str, Any]]:
    """Run each runner in ``order`` (each name twice, mirrored, so load drift hits all alike), printing
    each run; total wall and CPU seconds per runner, and each runner's last output."""
    wall = dict.fromkeys(runners, 0.0)
    cpu = dict.fromkeys(runners, 0.0)
    outputs = {}
    for name in order:
        start, start_cpu = time.perf_counter(), time.process_time()
        outputs[name] = runners[name]()
        took, took_cpu = time.perf_counter() - start, time.process_time() - start_cpu
        wall[name] += took
        cpu[name] += took_cpu
        print(
            f"  {name:12s} wall {took:7.1f}s ({count / took:6.2f} {unit}/s)  cpu {took_cpu:7.1f}s",
            flush=True,
        )
    return wall, cpu, outputs


class NaiveSparseEncoder:
    """The SPLADE loop users write: batches of ``batch`` in input order padded to their longest text,
    ``max(log(1 + relu(logits)) * mask)`` over the tokens, onnxruntime's default session (built once)."""

    def __init__(self, model_dir: Path, threads: int, max_length: int, batch: int = 8) -> None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(
            str(model_dir / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        self.tokenizer = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length)
        self.tokenizer.enable_padding(pad_id=self.tokenizer.token_to_id("[PAD]"), pad_token="[PAD]")
        vocab = self.tokenizer.get_vocab(with_added_tokens=True)
        self.vocabulary = sorted(vocab, key=vocab.__getitem__)
        self.batch = batch

    def encode(self, texts: list[str]) -> list[dict[str, float]]:
        out = []
        for start in range(0, len(texts), self.batch):
            enc = self.tokenizer.encode_batch(texts[start : start + self.batch])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            logits = self.session.run(["logits"], feed)[0]
            weights = (np.log1p(np.maximum(logits, 0)) * mask[:, :, None].astype(np.float32)).max(axis=1)
            for row in weights:
                terms = np.flatnonzero(row)
                out.append({self.vocabulary[t]: float(row[t]) for t in terms})
        return out


def sparse_main(model_dir: Path, texts: list[str], threads: int) -> None:
    """clirkit's SparseEncoder against the naive SPLADE loop, documents at 256 tokens."""
    encoder = SparseEncoder(model_dir, max_length=256, threads=threads, device="cpu")
    lengths = [len(e.ids) for e in encoder.tokenizer.encode_batch(texts)]
    print(
        f"{len(texts)} SciFact docs, tokens mean {np.mean(lengths):.0f} max {max(lengths)} (256 at most); "
        f"threads {threads}; onnxruntime {ort.__version__}"
    )
    whole = SparseEncoder(model_dir, max_length=256, threads=threads, device="cpu", split_projection=False)
    print(f"projection kernel: {encoder.runtime.projection.kernel if encoder.runtime.projection else 'none'}")
    naive = NaiveSparseEncoder(model_dir, threads, 256)
    runners = {
        "naive": lambda: naive.encode(texts),
        "clirkit-whole": lambda: whole.encode_passages(texts),
        "clirkit": lambda: encoder.encode_passages(texts),
    }
    order = ("naive", "clirkit-whole", "clirkit", "clirkit", "clirkit-whole", "naive")
    wall, cpu, vectors = interleaved(runners, order, len(texts), "docs")
    n = 2 * len(texts)
    for name in ("clirkit-whole", "clirkit"):
        same_terms = sum(a.keys() == b.keys() for a, b in zip(vectors["naive"], vectors[name]))
        largest = max(
            abs(a[t] - b[t]) for a, b in zip(vectors["naive"], vectors[name]) for t in a.keys() & b.keys()
        )
        print(
            f"{name}: {n / wall[name]:.2f} docs/s vs naive {n / wall['naive']:.2f}: "
            f"{wall['naive'] / wall[name]:.2f}x wall, {cpu['naive'] / cpu[name]:.2f}x cpu time "
            f"({1000 * cpu[name] / n:.1f} ms cpu per document); {same_terms}/{len(texts)} vectors with the "
            f"naive loop's terms, largest weight difference {largest:.2e}; "
            f"mean {np.mean([len(v) for v in vectors[name]]):.0f} terms per document"
        )
    print(
        f"split against whole: {wall['clirkit-whole'] / wall['clirkit']:.2f}x wall, "
        f"{cpu['clirkit-whole'] / cpu['clirkit']:.2f}x cpu time"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", default=os.environ.get("CLIRKIT_SHARED", "../shared"))
    ap.add_argument("--model", default="multilingual-e5-small-int8")
    ap.add_argument("--docs", type=int, default=256, help="first N SciFact documents (title + text)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    shared = Path(args.shared)
    model_dir = shared / "models" / args.model
    texts = []
    with open(shared / "data" / "beir-scifact" / "corpus.jsonl", encoding="utf-8") as f:
        for line, _ in zip(f, range(args.docs)):
            rec = json.loads(line)
            texts.append(f"{rec['title']} {rec['text']}".strip())
    if is_sparse_model(model_dir):
        sparse_main(model_dir, texts, args.threads)
        return
    encoder = OnnxEncoder(model_dir, threads=args.threads, batch_size=32, device="cpu")
    prefix = encoder.passage_prefix
    encodings = encoder.tokenizer.encode_batch([prefix + t for t in texts])
    lengths = [len(e.ids) for e in encodings]
    truncated = sum(1 for e in encodings if e.overflowing)
    print(
        f"{len(texts)} SciFact docs, tokens mean {np.mean(lengths):.0f} max {max(lengths)}, "
        f"{truncated} truncated to 512; threads {args.threads}; onnxruntime {ort.__version__}"
    )
    fast = OnnxEncoder(model_dir, threads=args.threads, batch_size=32, device="cpu", batch_invariant=False)
    naive = NaiveEncoder(model_dir, args.threads)
    runners = {
        "naive": lambda: naive.encode(texts, prefix),
        "clirkit": lambda: encoder.encode_passages(texts),
        "clirkit-fast": lambda: fast.encode_passages(texts),
    }
    order = ("naive", "clirkit", "clirkit-fast", "clirkit-fast", "clirkit", "naive")
    wall, cpu, vectors = interleaved(runners, order, len(texts), "passages")
    n = 2 * len(texts)
    for name in ("clirkit", "clirkit-fast"):
        cos = (vectors["naive"] * vectors[name]).sum(1)
        print(
            f"{name}: {n / wall[name]:.2f} passages/s vs naive {n / wall['naive']:.2f}: "
            f"{wall['naive'] / wall[name]:.2f}x wall, {cpu['naive'] / cpu[name]:.2f}x cpu time; "
            f"cosine to naive: min {cos.min():.4f}, median {np.median(cos):.5f}"
        )


if __name__ == "__main__":
    main()
