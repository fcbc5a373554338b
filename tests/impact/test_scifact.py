"""Impact parity on SciFact with splade-tiny-en (issue 13): clirkit's impact search returns the run of an
exact dot product over the same quantized vectors, written here (identical ranking, canonical ties), and
its nDCG@10 is within 0.002 of the unquantized float dot product's.

The vectors are the cache ``benches/encoders/sparse_cache.py`` writes (``$CLIRKIT_SPARSE_CACHE``, default
``/work/cache/sparse``), else encoded here with clirkit's SparseEncoder (minutes on a CPU); without
../shared or either of those the test skips."""

from __future__ import annotations

import json
import os
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import numpy as np
import pytest
from clirkit import ImpactIndex
from clirkit.evaluation import evaluate

SPARSE_CACHE = Path(os.environ.get("CLIRKIT_SPARSE_CACHE", "/work/cache/sparse"))
QUANTIZE = 100
DEPTH = 1000


def impact(weight: float) -> int:
    """round(weight × 100), half away from zero, on the double product (as the index computes it)."""
    return int(Decimal(weight * QUANTIZE).to_integral_value(rounding=ROUND_HALF_UP))


def read_vectors(path: Path) -> tuple[list[str], list[dict[str, float]]]:
    ids, vectors = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            ids.append(str(record.get("id", record.get("_id"))))
            vectors.append(record["vector"])
    return ids, vectors


def encode_scifact(data: Path, model: Path, out: Path) -> dict[str, Path]:
    sparse = pytest.importorskip("clirkit.encoders.sparse", reason="no sparse encoder and no cached vectors")
    paths = {}
    for part, source, length in (("docs", "corpus.jsonl", 256), ("queries", "queries.jsonl", 64)):
        encoder = sparse.SparseEncoder(model, max_length=length, device="cpu")
        records = [json.loads(line) for line in open(data / source, encoding="utf-8")]
        if part == "docs":
            texts = [f"{r.get('title', '')} {r.get('text', '')}" for r in records]
            vectors = encoder.encode_passages(texts)
        else:
            vectors = encoder.encode_queries([r["text"] for r in records])
        paths[part] = out / f"{part}.vectors.jsonl"
        with open(paths[part], "w", encoding="utf-8") as f:
            for r, v in zip(records, vectors):
                f.write(json.dumps({"id": r["_id"], "contents": "", "vector": v}) + "\n")
    return paths


def exact_run(doc_ids, doc_vectors, query_ids, query_vectors, weight) -> dict[str, dict[str, float]]:
    """Every query scored against every document by the dot product of ``weight``-mapped vectors;
    the top DEPTH with canonical ties (score descending, then doc id descending)."""
    postings: dict[str, tuple[list[int], list]] = {}
    for d, vector in enumerate(doc_vectors):
        for term, w in vector.items():
            docs, weights = postings.setdefault(term, ([], []))
            docs.append(d)
            weights.append(weight(w))
    arrays = {t: (np.array(d), np.array(w)) for t, (d, w) in postings.items()}
    order_desc = sorted(range(len(doc_ids)), key=lambda d: doc_ids[d].encode(), reverse=True)
    run = {}
    for qid, query in zip(query_ids, query_vectors):
        scores = np.zeros(len(doc_ids), dtype=np.float64 if weight is float else np.int64)
        for term, w in query.items():
            if term in arrays and weight(w):
                docs, weights = arrays[term]
                scores[docs] += weights * weight(w)
        hits = [d for d in order_desc if scores[d] > 0]
        hits.sort(key=lambda d: -scores[d])  # stable: ties stay in doc id descending order
        run[qid] = {doc_ids[d]: float(scores[d]) for d in hits[:DEPTH]}
    return run


@pytest.fixture(scope="module")
def scifact(shared, tmp_path_factory):
    data = shared("data", "beir-scifact")
    model = shared("models", "splade-tiny-en")
    tmp = tmp_path_factory.mktemp("scifact-impact")
    paths = {part: SPARSE_CACHE / f"beir-scifact.{part}.vectors.jsonl" for part in ("docs", "queries")}
    if not all(p.exists() for p in paths.values()):
        paths = encode_scifact(data, model, tmp)
    return data, paths, tmp


def test_scifact_impact_run_is_the_exact_quantized_dot_product(scifact):
    data, paths, tmp = scifact
    index = ImpactIndex.build(paths["docs"], tmp / "idx", quantize=QUANTIZE, quiet=True)
    qids, queries = read_vectors(paths["queries"])
    test_qids = {line.split("\t")[0] for line in open(data / "qrels" / "test.tsv", encoding="utf-8")}
    keep = [i for i, q in enumerate(qids) if q in test_qids]
    qids, queries = [qids[i] for i in keep], [queries[i] for i in keep]
    results = index.batch_search(dict(zip(qids, queries)), k=DEPTH, quiet=True)
    ours = {q: dict(results[q]) for q in qids}
    doc_ids, doc_vectors = read_vectors(paths["docs"])
    exact = exact_run(doc_ids, doc_vectors, qids, queries, impact)
    for q in qids:
        assert list(ours[q].items()) == list(exact[q].items()), q
    floats = exact_run(doc_ids, doc_vectors, qids, queries, float)
    qrels = data / "qrels" / "test.tsv"
    quantized_ndcg = evaluate(qrels, ours, ["ndcg_cut.10"])["ndcg_cut_10"]
    float_ndcg = evaluate(qrels, floats, ["ndcg_cut.10"])["ndcg_cut_10"]
    assert abs(quantized_ndcg - float_ndcg) <= 0.002, (quantized_ndcg, float_ndcg)
