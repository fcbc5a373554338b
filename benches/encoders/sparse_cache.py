"""Encode SciFact once with splade-tiny-en and cache its sparse vectors for the impact-index benchmarks.

Writes, under ``--cache`` (default ``/work/cache/sparse``):

- ``beir-scifact.docs.vectors.jsonl``: the 5,183 documents (title + " " + text, 256 tokens);
- ``beir-scifact.queries.vectors.jsonl``: the 300 test queries (64 tokens);

in Anserini's JSON vector layout (``{"id", "contents", "vector": {term: weight}}``, float weights), with
clirkit's own :class:`~clirkit.encoders.SparseEncoder` (``clirkit encode`` writes the same files). An
existing file is kept; an interrupted run resumes. It then scores every query against every document by
the exact float dot product and prints nDCG@10 and R@100 beside the figures the model's config.json
states (0.6436 / 0.8930), so a cache that does not reproduce the model is noticed.

    python benches/encoders/sparse_cache.py --shared ../shared --cache /work/cache/sparse --threads 2
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from clirkit.encoders import SparseEncoder, encode_sparse_file
from clirkit.evaluation import evaluate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benches/: bench_common
import bench_common as bc  # noqa: E402

COLLECTION = "beir-scifact"
MODEL = "splade-tiny-en"
# part -> (input file, kind, max tokens)
PARTS = {
    "docs": ("corpus.jsonl", "passages", 256),
    "queries": ("queries.jsonl", "queries", 64),
}


def cache_paths(cache: Path) -> dict[str, Path]:
    """The cached vector files, by part (``docs``, ``queries``)."""
    return {part: cache / f"{COLLECTION}.{part}.vectors.jsonl" for part in PARTS}


def read_vectors(path: Path) -> tuple[list[str], list[dict[str, float]]]:
    ids, vectors = [], []
    with path.open(encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            ids.append(rec["id"])
            vectors.append(rec["vector"])
    return ids, vectors


def exact_run(cache: Path, depth: int = 1000) -> dict[str, dict[str, float]]:
    """Every query scored against every document by the float dot product, top ``depth`` kept."""
    doc_ids, doc_vectors = read_vectors(cache_paths(cache)["docs"])
    postings: dict[str, tuple[list[int], list[float]]] = defaultdict(lambda: ([], []))
    for row, vector in enumerate(doc_vectors):
        for term, weight in vector.items():
            postings[term][0].append(row)
            postings[term][1].append(weight)
    run = {}
    for qid, query in zip(*read_vectors(cache_paths(cache)["queries"])):
        scores = np.zeros(len(doc_ids), dtype=np.float64)
        for term, weight in query.items():
            if term in postings:
                rows, weights = postings[term]
                scores[rows] += weight * np.asarray(weights)
        top = np.argsort(-scores, kind="stable")[:depth]
        run[qid] = {doc_ids[i]: float(scores[i]) for i in top}
    return run


def main() -> None:
    shared, cache, threads = bc.cache_script_arguments(__doc__, "/work/cache/sparse")
    data = shared / "data" / COLLECTION
    for part, (name, kind, max_length) in PARTS.items():
        target = cache_paths(cache)[part]
        if target.exists():
            print(f"{target}: cached")
            continue
        encoder = SparseEncoder(
            shared / "models" / MODEL, max_length=max_length, device="cpu", threads=threads
        )
        result = encode_sparse_file(
            encoder, data / name, str(target).removesuffix(".vectors.jsonl"), kind=kind
        )
        print(
            f"{target}: {result.rows} vectors in {result.seconds:.0f}s "
            f"({result.truncated} truncated to {max_length} tokens)",
            flush=True,
        )
    config = json.loads((shared / "models" / MODEL / "config.json").read_text(encoding="utf-8"))
    measures = evaluate(data / "qrels" / "test.tsv", exact_run(cache), ["ndcg_cut.10", "recall.100"])
    print(
        f"exact float dot product: nDCG@10 {measures['ndcg_cut_10']:.4f} (config.json "
        f"{config['scifact_ndcg10']}), R@100 {measures['recall_100']:.4f} (config.json "
        f"{config['scifact_recall100']})"
    )


if __name__ == "__main__":
    main()
