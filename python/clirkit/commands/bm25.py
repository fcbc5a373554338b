"""`clirkit index bm25` and `clirkit search bm25`."""

from __future__ import annotations

import argparse
import sys

from clirkit.bm25 import DEFAULT_B, DEFAULT_K1, BM25Index
from clirkit.commands.common import add_quiet, add_threads


def register(top, groups) -> None:
    p = groups["index"].add_parser("bm25", help="build a BM25 index from a JSONL corpus")
    p.add_argument("--corpus", required=True, help="JSONL corpus (_id or id, title, text)")
    p.add_argument("--index", required=True, help="index directory to create (atomically)")
    lang = p.add_mutually_exclusive_group()
    lang.add_argument("--lang", help="analyzer language for every document (default: en)")
    lang.add_argument("--lang-field", help="JSON field holding each document's language code")
    p.add_argument("--fields", default="title,text", help="comma-separated text fields, joined with a space")
    p.add_argument("--keep-first-duplicate", action="store_true", help="keep the first of duplicate doc ids")
    p.add_argument("--memory-mb", type=int, default=1024, help="postings memory before spilling to disk")
    add_threads(p)
    add_quiet(p)
    p.set_defaults(func=_index)

    s = groups["search"].add_parser("bm25", help="search a BM25 index, writing a TREC run")
    s.add_argument("--index", required=True, help="index directory")
    s.add_argument(
        "--queries",
        required=True,
        help="queries.jsonl (id: _id, id, qid or query_id; text: the first of text, query, title; "
        "optional lang) or topics.tsv (id<TAB>text)",
    )
    s.add_argument("--output", required=True, help="TREC run file to write")
    s.add_argument("--k", type=int, default=1000, help="hits per query")
    s.add_argument("--k1", type=float, default=DEFAULT_K1, help="BM25 k1")
    s.add_argument("--b", type=float, default=DEFAULT_B, help="BM25 b")
    s.add_argument("--lang", help="analyze every query in this language")
    s.add_argument("--tag", default="clirkit-bm25", help="run tag (6th column)")
    add_threads(s)
    add_quiet(s)
    s.set_defaults(func=_search)


def _index(args: argparse.Namespace) -> int:
    fields = [f.strip() for f in args.fields.split(",") if f.strip()]
    index = BM25Index.build(
        args.corpus,
        args.index,
        lang=args.lang,
        lang_field=args.lang_field,
        fields=fields,
        threads=args.threads,
        keep_first_duplicate=args.keep_first_duplicate,
        quiet=args.quiet,
        memory_budget_mb=args.memory_mb,
    )
    if not args.quiet:
        print(f"indexed {index.num_docs} documents, {index.num_terms} terms -> {args.index}", file=sys.stderr)
    return 0


def _search(args: argparse.Namespace) -> int:
    index = BM25Index.open(args.index)
    results = index.search_file(
        args.queries,
        args.k,
        threads=args.threads,
        lang=args.lang,
        k1=args.k1,
        b=args.b,
        quiet=args.quiet,
    )
    results.to_trec(args.output, tag=args.tag)
    if not args.quiet:
        print(f"searched {len(results)} queries -> {args.output}", file=sys.stderr)
    return 0
