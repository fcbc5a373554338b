"""Carve the embedded sample collection (python/clirkit/data/sample) out of XQuAD-R.

Source: LAReQA's XQuAD-R (google-research-datasets/lareqa), CC BY-SA 4.0, as laid out in
../shared/data/xquad-r. Keeps the sentences of the first paragraphs of article 0 in every
language, the queries whose answer sentence is among them, and same-language (mono) qrels.

    python scripts/make_sample.py ../shared/data/xquad-r python/clirkit/data/sample
"""

import json
import sys
from pathlib import Path

PARAGRAPHS = 10  # paragraphs of article 0 kept per language
QUERIES_PER_LANG = 20


def main(src: str, dst: str) -> None:
    src_dir, dst_dir = Path(src), Path(dst)
    dst_dir.mkdir(parents=True, exist_ok=True)
    docs = []
    with open(src_dir / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            lang, article, paragraph, _ = d["_id"].rsplit("-", 3)
            if article == "0" and int(paragraph) < PARAGRAPHS:
                docs.append({"_id": d["_id"], "text": d["text"].strip(), "lang": d["lang"]})
    kept = {d["_id"] for d in docs}
    qrels = []
    with open(src_dir / "qrels" / "mono.tsv", encoding="utf-8") as f:
        next(f)
        for line in f:
            q, d, rel = line.split()
            if d in kept:
                qrels.append((q, d, rel))
    per_lang: dict = {}
    queries = []
    chosen = set()
    with open(src_dir / "queries.jsonl", encoding="utf-8") as f:
        relevant = {q for q, _, _ in qrels}
        for line in f:
            q = json.loads(line)
            if q["_id"] in relevant and per_lang.get(q["lang"], 0) < QUERIES_PER_LANG:
                per_lang[q["lang"]] = per_lang.get(q["lang"], 0) + 1
                queries.append({"_id": q["_id"], "text": q["text"], "lang": q["lang"]})
                chosen.add(q["_id"])
    with open(dst_dir / "corpus.jsonl", "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    with open(dst_dir / "queries.jsonl", "w", encoding="utf-8") as f:
        for q in queries:
            f.write(json.dumps(q, ensure_ascii=False) + "\n")
    with open(dst_dir / "qrels.tsv", "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for q, d, rel in qrels:
            if q in chosen:
                f.write(f"{q}\t{d}\t{rel}\n")
    print(f"{len(docs)} docs, {len(queries)} queries, languages {sorted(per_lang)}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
