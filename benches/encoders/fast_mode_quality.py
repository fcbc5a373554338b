"""What fast mode's int8 attention costs in retrieval quality: a BEIR collection's corpus and test queries
encoded by ``OnnxEncoder`` in its default mode and in fast mode (``batch_invariant=False``; for a
dynamically quantized model on a CPU with AVX-512 VNNI, attention in int8), exact inner-product search
over each, nDCG@10 and R@100 by clirkit's evaluator, a paired randomization test per measure, and each
document vector's cosine to the default's. Both modes run in one process, the default first; each
encoding's CPU and wall time is printed.

    python benches/encoders/fast_mode_quality.py --shared ../shared \\
        [--model multilingual-e5-small-int8] [--collection beir-scifact] [--docs N] [--threads 2]
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from pathlib import Path

import numpy as np
from clirkit import evaluate, read_qrels
from clirkit.datasets import QUERY_FIELDS, QUERY_ID_FIELDS, iter_jsonl
from clirkit.encoders import OnnxEncoder
from clirkit.significance import randomization_test

MEASURES = ("ndcg_cut_10", "recall_100")


def search(queries: np.ndarray, docs: np.ndarray, doc_ids: list[str], query_ids: list[str], k: int) -> dict:
    """Exact top ``k`` by inner product (the vectors are L2-normalized: cosine)."""
    scores = queries @ docs.T
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return {qid: {doc_ids[j]: float(scores[i, j]) for j in top[i]} for i, qid in enumerate(query_ids)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", default=os.environ.get("CLIRKIT_SHARED", "../shared"))
    ap.add_argument("--model", default="multilingual-e5-small-int8")
    ap.add_argument("--collection", default="beir-scifact", help="a folder of ../shared/data with BEIR files")
    ap.add_argument("--docs", type=int, default=0, help="first N corpus documents (0: all)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    shared = Path(args.shared)
    data = shared / "data" / args.collection
    corpus = list(itertools.islice(iter_jsonl(data / "corpus.jsonl"), args.docs or None))
    doc_ids = [d.id for d in corpus]
    texts = [d.text for d in corpus]
    qrels = read_qrels(data / "qrels" / "test.tsv")
    records = iter_jsonl(data / "queries.jsonl", QUERY_FIELDS, QUERY_ID_FIELDS, text_rule="first")
    queries = [q for q in records if q.id in qrels]
    query_ids = [q.id for q in queries]
    model = shared / "models" / args.model
    print(
        f"{args.collection}: {len(texts)} documents, {len(queries)} judged queries; {args.model}; "
        f"threads {args.threads}; load {os.getloadavg()}",
        flush=True,
    )
    vectors: dict[str, np.ndarray] = {}
    per_query: dict[str, dict] = {}
    for mode, batch_invariant in (("default", True), ("fast", False)):
        encoder = OnnxEncoder(model, threads=args.threads, device="cpu", batch_invariant=batch_invariant)
        wall, cpu = time.perf_counter(), time.process_time()
        vectors[mode] = encoder.encode_passages(texts)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        query_vectors = encoder.encode_queries([q.text for q in queries])
        run = search(query_vectors, vectors[mode], doc_ids, query_ids, 100)
        per_query[mode] = evaluate(qrels, run, MEASURES, per_query=True)
        means = per_query[mode]["all"]
        print(
            f"{mode} ({encoder.graph_optimization}): documents in {wall:.1f} s wall, {cpu:.1f} s CPU; "
            + ", ".join(f"{m} {means[m]:.4f}" for m in MEASURES),
            flush=True,
        )
    cosines = np.sum(vectors["default"] * vectors["fast"], axis=1)
    print(
        f"fast vs default, per document: cosine min {cosines.min():.5f}, 1st percentile "
        f"{np.percentile(cosines, 1):.5f}, median {np.median(cosines):.5f}"
    )
    for measure in MEASURES:
        default = [per_query["default"][q][measure] for q in query_ids if q in per_query["default"]]
        fast = [per_query["fast"][q][measure] for q in query_ids if q in per_query["fast"]]
        test = randomization_test(default, fast)
        print(
            f"{measure}: fast - default {test.mean_difference:+.4f} over {test.queries} queries, "
            f"randomization p = {test.p_value:.3f}; load {os.getloadavg()}"
        )


if __name__ == "__main__":
    main()
