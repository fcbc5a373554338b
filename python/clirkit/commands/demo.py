"""`clirkit demo`: the main job on the embedded sample collection.

Builds one multilingual BM25 index over the sample (each document analyzed in its own language), searches
every query with its own language's analyzer, writes the run, evaluates it with clirkit's trec_eval-equal
evaluator and prints one column per language, as multilingual papers tabulate results."""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import defaultdict
from pathlib import Path

from clirkit.commands.common import add_quiet, add_threads, threads

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample"
MEASURES = {"nDCG@10": "ndcg_cut_10", "R@100": "recall_100", "MRR": "recip_rank"}


def register(top, groups) -> None:
    p = top.add_parser(
        "demo",
        help="index, search and evaluate the embedded multilingual sample collection",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--workdir", help="keep the index and run here (default: a temporary directory)")
    p.add_argument("--k", type=int, default=100, help="documents retrieved per query (default 100)")
    add_threads(p)
    add_quiet(p)
    p.set_defaults(func=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    if args.workdir:
        return _run(Path(args.workdir), args)
    with tempfile.TemporaryDirectory(prefix="clirkit-demo-") as tmp:
        return _run(Path(tmp), args)


def _run(work: Path, args: argparse.Namespace) -> int:
    from clirkit.bm25 import BM25Index
    from clirkit.evaluation import RelevanceEvaluator
    from clirkit.runs import read_qrels

    work.mkdir(parents=True, exist_ok=True)
    index = BM25Index.build(
        SAMPLE / "corpus.jsonl",
        work / "bm25-index",
        lang_field="lang",
        fields=("text",),
        threads=threads(args),
        quiet=args.quiet,
    )
    results = index.search_file(SAMPLE / "queries.jsonl", k=args.k, threads=threads(args), quiet=args.quiet)
    run_path = work / "bm25.trec"
    results.to_trec(run_path)
    print(
        f"indexed {index.num_docs} documents in {len(index.languages)} languages; "
        f"searched {len(results)} queries -> {run_path if args.workdir else 'bm25.trec'}"
    )

    lang_of = {}
    with open(SAMPLE / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            q = json.loads(line)
            lang_of[q["_id"]] = q["lang"]
    per_query = RelevanceEvaluator(read_qrels(SAMPLE / "qrels.tsv"), set(MEASURES.values())).evaluate(
        results.to_dict()
    )
    by_lang: dict = defaultdict(list)
    for qid, values in per_query.items():
        by_lang[lang_of[qid]].append(values)
    print(_table(by_lang))
    return 0


def _table(by_lang: dict) -> str:
    langs = sorted(by_lang)
    header = ["measure"] + langs + ["avg"]
    rows = [header, ["queries"] + [str(len(by_lang[lang])) for lang in langs] + [""]]
    for label, key in MEASURES.items():
        means = [sum(v[key] for v in by_lang[lang]) / len(by_lang[lang]) for lang in langs]
        rows.append([label] + [f"{m:.4f}" for m in means] + [f"{sum(means) / len(means):.4f}"])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(r, widths)))
        for r in rows
    ]
    return "\n".join(lines)
