"""A BM25 run on xquad-pos for the position-bias table (development stand-in for clirkit's own BM25):
bm25s (k1=0.9, b=0.4, Lucene scoring), one index per language over its 240 paragraphs, that language's
queries searched against it (monolingual), top 100, written as a TREC run. bm25s's default tokenizer
(lowercased word regex, no stemming, no stopwords) splits Chinese and Thai poorly; fine for studying
where in a paragraph the answer sits, not for comparing languages.

    /work/venv-peers/bin/python benches/xquad_pos_bm25s.py OUT.trec [--truncate CHARS]

With --truncate, only each paragraph's first CHARS characters are indexed: a deliberately
position-biased system (like an encoder that cuts long inputs), to show what PSI picks up.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict

import bm25s

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data", "xquad-pos")


def main(out: str, truncate: int = 0) -> None:
    docs = defaultdict(list)
    with open(os.path.join(DATA, "corpus.jsonl"), encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            docs[d["lang"]].append((d["_id"], d["text"][:truncate] if truncate else d["text"]))
    queries = defaultdict(list)
    with open(os.path.join(DATA, "queries.jsonl"), encoding="utf-8") as f:
        for line in f:
            q = json.loads(line)
            queries[q["lang"]].append((q["_id"], q["text"]))
    tag = f"bm25s-first{truncate}" if truncate else "bm25s"
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as w:
        for lang in sorted(docs):
            ids = [i for i, _ in docs[lang]]
            retriever = bm25s.BM25(k1=0.9, b=0.4, method="lucene")
            retriever.index(bm25s.tokenize([t for _, t in docs[lang]], stopwords=None, show_progress=False),
                            show_progress=False)
            qtoks = bm25s.tokenize([t for _, t in queries[lang]], stopwords=None, show_progress=False)
            k = min(100, len(ids))
            results, scores = retriever.retrieve(qtoks, k=k, show_progress=False)
            for (qid, _), row, srow in zip(queries[lang], results, scores):
                w.writelines(f"{qid} Q0 {ids[int(di)]} {rank} {float(s):.6f} {tag}\n" for rank, (di, s) in enumerate(zip(row, srow), 1))
    os.replace(tmp, out)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--truncate", type=int, default=0)
    a = ap.parse_args()
    main(a.out, a.truncate)
