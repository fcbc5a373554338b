"""Effectiveness of clirkit's BM25 against Lucene's published figures (slow: run with -m slow)."""

from __future__ import annotations

import pytest
from clirkit import BM25Index, read_qrels

pytrec_eval = pytest.importorskip("pytrec_eval")


def evaluate(run: dict, qrels: dict, measures=("ndcg_cut_10", "recall_100")) -> dict:
    per_query = pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(run)
    return {m: sum(v[m] for v in per_query.values()) / len(qrels) for m in measures}


@pytest.mark.slow
def test_scifact_matches_lucene(tmp_path, shared):
    data = shared("data", "beir-scifact")
    index = BM25Index.build(data / "corpus.jsonl", tmp_path / "idx", lang="en", quiet=True)
    qrels = read_qrels(data / "qrels" / "test.tsv")
    results = index.search_file(data / "queries.jsonl", k=1000, quiet=True)
    run = {q: docs for q, docs in results.to_dict().items() if q in qrels}
    scores = evaluate(run, qrels)
    # Lucene (Pyserini, k1=0.9, b=0.4): nDCG@10 0.6789, R@100 0.9253.
    assert scores["ndcg_cut_10"] >= 0.674, scores
    assert scores["recall_100"] >= 0.92, scores
