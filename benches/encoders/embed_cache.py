"""Encode the shared real collections once with multilingual-e5-small (int8 ONNX) and cache .npy files.

Used by ``benches/dense/pq_vs_faiss.py`` for the real-embedding recall parity. Pure onnxruntime + tokenizers
(the reference recipe: "query: "/"passage: " prefixes, max length 512, mean pooling over the attention
mask, L2 normalization), so it does not depend on clirkit's own encoder.

    python benches/encoders/embed_cache.py --shared ../shared --cache /work/cache/emb
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benches/: bench_common
import bench_common as bc  # noqa: E402

COLLECTIONS = {
    # name -> (corpus text fields, query file)
    "beir-scifact": ("title+text", "queries.jsonl"),
    "xquad-r": ("text", "queries.jsonl"),
}


def read_texts(path: Path, fields: str) -> tuple[list[str], list[str]]:
    """Read ids and texts from a BEIR JSONL file; ``fields`` is "text" or "title+text"."""
    ids, texts = [], []
    with path.open(encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            ids.append(str(rec["_id"]))
            if fields == "title+text":
                texts.append(f"{rec.get('title', '')} {rec['text']}".strip())
            else:
                texts.append(rec["text"].strip())
    return ids, texts


class E5Encoder:
    """Minimal multilingual-e5 encoder on onnxruntime."""

    def __init__(self, model_dir: Path, threads: int) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(
            str(model_dir / "model.onnx"), opts, providers=["CPUExecutionProvider"]
        )
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(512)
        self.inputs = {i.name for i in self.session.get_inputs()}

    def encode(self, texts: list[str], prefix: str, batch: int = 32) -> np.ndarray:
        """Embed texts (sorted by length internally for padding efficiency), L2-normalized float32."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for start in range(0, len(order), batch):
            idx = order[start : start + batch]
            encs = self.tokenizer.encode_batch([prefix + texts[i] for i in idx])
            width = max(len(e.ids) for e in encs)
            ids = np.ones((len(idx), width), dtype=np.int64)  # pad id 1
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for r, e in enumerate(encs):
                ids[r, : len(e.ids)] = e.ids
                mask[r, : len(e.ids)] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self.inputs:
                feed["token_type_ids"] = np.zeros_like(ids)
            hidden = self.session.run(None, feed)[0]
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)
            pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
            out[idx] = pooled
        return out


def main() -> None:
    shared, cache, threads = bc.cache_script_arguments(__doc__, "/work/cache/emb")
    cache.mkdir(parents=True, exist_ok=True)
    enc = E5Encoder(shared / "models" / "multilingual-e5-small-int8", threads)
    for name, (fields, qfile) in COLLECTIONS.items():
        for part, path, prefix, f in (
            ("queries", shared / "data" / name / qfile, "query: ", "text"),
            ("docs", shared / "data" / name / "corpus.jsonl", "passage: ", fields),
        ):
            target = cache / f"{name}.{part}.npy"
            if target.exists():
                continue
            ids, texts = read_texts(path, f)
            t0 = time.time()
            emb = enc.encode(texts, prefix)
            tmp = cache / f".{name}.{part}.tmp.npy"
            np.save(tmp, emb)
            (cache / f"{name}.{part}.ids.txt").write_text("\n".join(ids) + "\n", encoding="utf-8")
            tmp.rename(target)
            print(f"{name} {part}: {len(ids)} in {time.time() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    main()
