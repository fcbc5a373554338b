"""Dense retrieval quality end to end: cached multilingual-e5-small embeddings -> flat and PQ indexes
(clirkit.dense) -> nDCG@10 (pytrec_eval, the reference evaluator), plus BM25 + dense fused by RRF on
XQuAD-R cross-language and multilingual.

Embeddings come from ``clirkit encode`` (PREFIX.npy + PREFIX.ids.txt), e.g.::

    clirkit encode --model ../shared/models/multilingual-e5-small-int8 \
        --queries ../shared/data/xquad-r/queries.jsonl --output /work/cache/emb/clirkit/xquad-r.queries
    clirkit encode --model ../shared/models/multilingual-e5-small-int8 --fields text \
        --corpus ../shared/data/xquad-r/corpus.jsonl --output /work/cache/emb/clirkit/xquad-r.docs
    python benches/dense/dense_quality.py --collection xquad-r --queries /work/cache/emb/clirkit/xquad-r.queries \
        --docs /work/cache/emb/clirkit/xquad-r.docs --bm25

Prints one markdown table row per setting: nDCG@10 flat, PQ{d/2}x4 from its codes alone
(``refine=0``), PQ{d/2}x4 as searched by default (its top k re-scored exactly with the stored vectors,
FAISS's ``PQ{M}x4fs,RFlat``), each with its difference to flat, and with ``--bm25`` BM25 and
RRF(BM25, dense flat).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytrec_eval
from clirkit import BM25Index, DenseIndex, fuse, read_qrels
from clirkit.encoders import load_embeddings

CROSS_LANGUAGES = ("ar", "hi", "ru", "zh")


def ndcg10(qrels: dict, run: dict) -> float:
    """Mean nDCG@10 over the queries that have relevance judgements (pytrec_eval)."""
    run = {q: docs for q, docs in run.items() if q in qrels}
    scores = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
    return float(np.mean([s["ndcg_cut_10"] for s in scores.values()])) if scores else 0.0


def select(matrix: np.ndarray, ids: list[str], keep: Iterable[str]) -> tuple[np.ndarray, list[str]]:
    wanted = set(keep)
    rows = [i for i, x in enumerate(ids) if x in wanted]
    return np.ascontiguousarray(matrix[rows], dtype=np.float32), [ids[i] for i in rows]


def dense_runs(queries, qids, docs, dids, k: int) -> tuple[dict, dict, dict, float]:
    """Flat exact, PQ{d/2}x4 codes only, and PQ{d/2}x4 with the default exact re-scoring of its top k
    (and a check that flat equals numpy's exact inner products)."""
    flat = DenseIndex.build(docs, dids, quiet=True)
    flat_run = flat.search_run(queries, qids, k=k)
    best = np.argmax(queries[:50] @ docs.T, axis=1)
    agree = np.mean([dids[b] == next(iter(flat_run[q])) for b, q in zip(best, qids[:50])])
    pq = DenseIndex.build(docs, dids, pq=docs.shape[1] // 2, nbits=4, seed=0, quiet=True)
    return (
        flat_run,
        pq.search_run(queries, qids, k=k, refine=0),
        pq.search_run(queries, qids, k=k),
        float(agree),
    )


def faiss_pq_runs(queries, qids, docs, dids, k: int) -> list[dict]:
    """FAISS's fast-scan PQ{d/2}x4 without and with an OPQ rotation, codes only (the peer of
    clirkit's ``refine=0`` column)."""
    import faiss

    runs = []
    m = docs.shape[1] // 2
    for spec in (f"PQ{m}x4fs", f"OPQ{m},PQ{m}x4fs"):
        index = faiss.index_factory(docs.shape[1], spec, faiss.METRIC_INNER_PRODUCT)
        index.train(docs)
        index.add(docs)
        scores, rows = index.search(queries, k)
        runs.append(
            {q: {dids[r]: float(s) for r, s in zip(rows[n], scores[n]) if r >= 0} for n, q in enumerate(qids)}
        )
    return runs


def bm25_run(
    corpus: Path, doc_ids: set[str], lang: str | None, queries: list[tuple[str, str]], k: int
) -> dict:
    """BM25 (clirkit, Lucene-compatible) over the selected documents of ``corpus``."""
    with tempfile.TemporaryDirectory() as tmp:
        subset = Path(tmp) / "corpus.jsonl"
        with open(corpus, encoding="utf-8") as src, open(subset, "w", encoding="utf-8") as out:
            for line in src:
                rec = json.loads(line)
                if rec["_id"] in doc_ids:
                    rec["lang"] = rec["_id"].split("-", 1)[0]
                    out.write(
                        json.dumps({"_id": rec["_id"], "text": rec["text"], "lang": rec["lang"]}) + "\n"
                    )
        index = BM25Index.build(
            subset,
            Path(tmp) / "index",
            lang=lang,
            lang_field=None if lang else "lang",
            fields=("text",),
            quiet=True,
        )
        return index.batch_search(queries, k=k, lang="en" if lang is None else None, quiet=True).to_dict()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--collection", choices=("scifact", "xquad-r"), required=True)
    ap.add_argument("--queries", required=True, help="query embeddings prefix")
    ap.add_argument("--docs", required=True, help="document embeddings prefix")
    ap.add_argument("--shared", default=os.environ.get("CLIRKIT_SHARED", "../shared"))
    ap.add_argument("--bm25", action="store_true", help="also BM25 and RRF(BM25, dense) (xquad-r)")
    ap.add_argument(
        "--faiss", action="store_true", help="also FAISS PQ{d/2}x4fs and OPQ{d/2},PQ{d/2}x4fs (codes only)"
    )
    ap.add_argument("-k", type=int, default=100)
    args = ap.parse_args()
    shared = Path(args.shared)
    qmat, qids = load_embeddings(args.queries)
    dmat, dids = load_embeddings(args.docs)
    started = time.time()
    print(
        "| setting | queries | docs | flat | PQ{d/2}x4 codes only | - flat | PQ{d/2}x4 + refine top k "
        "(default) | - flat | BM25 | RRF(BM25, flat) | RRF weighted 0.25:1 |"
        + (" FAISS PQ{d/2}x4fs | FAISS OPQ+PQ{d/2}x4fs |" if args.faiss else "")
    )
    print("|---" * (13 if args.faiss else 11) + "|")

    def report(name, qrels, q_keep, d_keep, bm25=None):
        qs, qk = select(qmat, qids, q_keep)
        ds, dk = select(dmat, dids, d_keep)
        dset, qset = set(dk), set(qk)
        qrels = {q: {d: r for d, r in docs.items() if d in dset} for q, docs in qrels.items() if q in qset}
        qrels = {q: docs for q, docs in qrels.items() if docs}
        if not dk:
            print(f"| {name} | no documents |")
            return
        flat, pq, refined, agree = dense_runs(qs, qk, ds, dk, args.k)
        assert agree == 1.0, f"{name}: flat index disagrees with numpy exact search"
        f, p, r = ndcg10(qrels, flat), ndcg10(qrels, pq), ndcg10(qrels, refined)
        extra = ["", "", ""]
        if args.faiss:
            extra += [f"{ndcg10(qrels, run):.4f}" for run in faiss_pq_runs(qs, qk, ds, dk, args.k)]
        if bm25 is not None:
            lexical = bm25()
            fused = fuse([lexical, flat], method="rrf", k=60)
            weighted = fuse([lexical, flat], method="rrf", k=60, weights=[0.25, 1.0])
            extra[:3] = [f"{ndcg10(qrels, run):.4f}" for run in (lexical, fused, weighted)]
        print(
            f"| {name} | {len(qrels)} | {len(dk)} | {f:.4f} | {p:.4f} | {p - f:+.4f} | {r:.4f} | {r - f:+.4f} | "
            + " | ".join(extra)
            + " |",
            flush=True,
        )

    if args.collection == "scifact":
        data = shared / "data" / "beir-scifact"
        report("SciFact", read_qrels(data / "qrels" / "test.tsv"), qids, dids)
    else:
        data = shared / "data" / "xquad-r"
        mono, multi = read_qrels(data / "qrels" / "mono.tsv"), read_qrels(data / "qrels" / "test.tsv")
        lang_of_query = {}
        query_text = {}
        with open(data / "queries.jsonl", encoding="utf-8") as f:
            for line in f:
                rec = json.loads(line)
                lang_of_query[rec["_id"]], query_text[rec["_id"]] = rec["lang"], rec["text"]
        languages = sorted(set(lang_of_query.values()))
        docs_of = {lang: [d for d in dids if d.split("-", 1)[0] == lang] for lang in languages}
        queries_of = {lang: [q for q in qids if lang_of_query[q] == lang] for lang in languages}
        english = [(q, query_text[q]) for q in queries_of["en"]]
        for lang in languages:
            own = [(q, query_text[q]) for q in queries_of[lang]]
            bm25 = (
                (
                    lambda lang=lang, own=own: bm25_run(
                        data / "corpus.jsonl", set(docs_of[lang]), lang, own, args.k
                    )
                )
                if args.bm25
                else None
            )
            report(f"XQuAD-R mono {lang}", mono, queries_of[lang], docs_of[lang], bm25)
        for lang in CROSS_LANGUAGES:
            bm25 = (
                (lambda lang=lang: bm25_run(data / "corpus.jsonl", set(docs_of[lang]), lang, english, args.k))
                if args.bm25
                else None
            )
            report(f"XQuAD-R cross en->{lang}", multi, queries_of["en"], docs_of[lang], bm25)
        bm25_all = (
            (lambda: bm25_run(data / "corpus.jsonl", set(dids), None, english, args.k)) if args.bm25 else None
        )
        report("XQuAD-R multilingual en->all", multi, queries_of["en"], dids, bm25_all)
    print(f"\n({time.time() - started:.0f}s)")


if __name__ == "__main__":
    main()
