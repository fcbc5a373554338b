"""clirkit BM25 runs on xquad-pos for the position-bias table (PosIR-style nDCG@10 per answer-position bin
and PSI): one index per language over its 240 paragraphs (`text` only, that language's analyzer, k1=0.9,
b=0.4), that language's queries searched against it (monolingual), top 100, written as one TREC run.

    python benches/eval/xquad_pos_bm25.py OUT.trec [--truncate CHARS]

With --truncate, only each paragraph's first CHARS characters are indexed: a deliberately
position-biased system (like an encoder that cuts long inputs), to show what PSI picks up.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections import defaultdict
from pathlib import Path

from clirkit.bm25 import BM25Index

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "xquad-pos"


def main(out: str, truncate: int = 0, threads: int = 2) -> None:
    docs: dict = defaultdict(list)
    with open(DATA / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            docs[d["lang"]].append({"_id": d["_id"], "text": d["text"][:truncate] if truncate else d["text"]})
    queries: dict = defaultdict(list)
    with open(DATA / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            q = json.loads(line)
            queries[q["lang"]].append((q["_id"], q["text"]))
    tag = f"clirkit-bm25-first{truncate}" if truncate else "clirkit-bm25"
    tmp = out + ".tmp"
    with tempfile.TemporaryDirectory() as work, open(tmp, "w", encoding="utf-8") as w:
        for lang in sorted(docs):
            corpus = Path(work) / f"{lang}.jsonl"
            corpus.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs[lang]), "utf-8")
            index = BM25Index.build(corpus, Path(work) / lang, lang=lang, fields=("text",), quiet=True)
            results = index.batch_search(queries[lang], k=100, threads=threads, quiet=True)
            for qid in results.qids():
                w.writelines(
                    f"{qid} Q0 {doc} {rank} {score!r} {tag}\n"
                    for rank, (doc, score) in enumerate(results[qid], 1)
                )
    os.replace(tmp, out)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--truncate", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    main(a.out, a.truncate, a.threads)
