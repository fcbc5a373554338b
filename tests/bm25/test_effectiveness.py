"""Effectiveness of clirkit's BM25 against Lucene's published figures (a few seconds; skipped without
../shared)."""

from __future__ import annotations

import json

import pytest
from clirkit import BM25Index, read_qrels

pytrec_eval = pytest.importorskip("pytrec_eval")


def evaluate(run: dict, qrels: dict, measures=("ndcg_cut_10", "recall_100")) -> dict:
    per_query = pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(run)
    return {m: sum(v[m] for v in per_query.values()) / len(qrels) for m in measures}


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


# Lucene (Pyserini 1.6, per-language analyzer, k1=0.9, b=0.4, text only) nDCG@10 on XQuAD-R with
# qrels/mono.tsv; Pyserini cannot index Thai, for which the issue asks 0.75.
XQUAD_LUCENE = {
    "ar": 0.7752, "de": 0.7860, "el": 0.7362, "en": 0.8458, "es": 0.8090, "hi": 0.8055,
    "ru": 0.8238, "tr": 0.7851, "vi": 0.8452, "zh": 0.8243, "th": 0.75 + 0.01,
}  # fmt: skip


def test_xquad_r_monolingual_matches_lucene(tmp_path, shared):
    data = shared("data", "xquad-r")
    docs: dict = {}
    queries: dict = {}
    with open(data / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            docs.setdefault(json.loads(line)["lang"], []).append(line)
    with open(data / "queries.jsonl", encoding="utf-8") as f:
        for q in map(json.loads, f):
            queries.setdefault(q["lang"], []).append((q["_id"], q["text"]))
    qrels = read_qrels(data / "qrels" / "mono.tsv")
    ndcg = {}
    for lang in XQUAD_LUCENE:
        corpus = tmp_path / f"{lang}.jsonl"
        corpus.write_text("".join(docs[lang]), encoding="utf-8")
        index = BM25Index.build(corpus, tmp_path / lang, lang=lang, fields=["text"], quiet=True)
        run = index.batch_search(queries[lang], k=100, quiet=True).to_dict()
        ndcg[lang] = evaluate(run, {q: qrels[q] for q in run if q in qrels}, ("ndcg_cut_10",))["ndcg_cut_10"]
    below = {
        lang: (round(v, 4), XQUAD_LUCENE[lang]) for lang, v in ndcg.items() if v < XQUAD_LUCENE[lang] - 0.01
    }
    assert not below, f"more than 0.01 below Lucene (clirkit, Lucene): {below}; all: {ndcg}"
