"""`clirkit index bm25` and `clirkit search bm25`."""

from __future__ import annotations

import argparse
import json
import sys

from clirkit.bm25 import DEFAULT_B, DEFAULT_K1, RM3, BM25Index
from clirkit.commands.common import (
    add_ray_option,
    add_search_parser,
    add_spill_memory_option,
    add_worker_options,
    positive_int,
)
from clirkit.distributed.sharded import sharded_kind


def register(top, groups) -> None:
    p = groups["index"].add_parser("bm25", help="build a BM25 index from a JSONL corpus")
    p.add_argument("--corpus", required=True, help="JSONL corpus (_id or id, title, text)")
    p.add_argument("--index", required=True, help="index directory to create (atomically)")
    lang = p.add_mutually_exclusive_group()
    lang.add_argument("--lang", help="analyzer language for every document (default: en)")
    lang.add_argument("--lang-field", help="JSON field holding each document's language code")
    p.add_argument("--fields", default="title,text", help="comma-separated text fields, joined with a space")
    p.add_argument("--keep-first-duplicate", action="store_true", help="keep the first of duplicate doc ids")
    add_spill_memory_option(p)
    p.add_argument(
        "--store-docvectors", action="store_true", help="also store document term vectors (needed by --rm3)"
    )
    p.add_argument(
        "--shards",
        type=positive_int,
        help="build a sharded index of N shards (a plain, uncompressed corpus); searched as the single index",
    )
    add_ray_option(p, "build the shards as tasks on this Ray cluster")
    add_worker_options(p, _index)

    s = add_search_parser(
        groups,
        "bm25",
        "queries.jsonl (id: _id, id, qid or query_id; text: the first of text, query, title; "
        "optional lang) or topics.tsv (id<TAB>text)",
        help="search a BM25 index, writing a TREC run",
    )
    s.add_argument("--output", required=True, help="TREC run file to write")
    s.add_argument("--k", type=positive_int, default=1000, help="hits per query")
    s.add_argument("--k1", type=float, default=DEFAULT_K1, help="BM25 k1")
    s.add_argument("--b", type=float, default=DEFAULT_B, help="BM25 b")
    s.add_argument("--lang", help="analyze every query in this language")
    s.add_argument("--tag", default="clirkit-bm25", help="run tag (6th column)")
    add_ray_option(s, "search a sharded index through shard actors on this Ray cluster")
    rm3 = s.add_argument_group("RM3 pseudo-relevance feedback (Anserini's Rm3Reranker)")
    rm3.add_argument(
        "--rm3", action="store_true", help="expand each query with RM3 (index needs --store-docvectors)"
    )
    rm3.add_argument("--fb-docs", type=positive_int, default=RM3.fb_docs, help="feedback documents")
    rm3.add_argument("--fb-terms", type=positive_int, default=RM3.fb_terms, help="expansion terms")
    rm3.add_argument(
        "--original-weight", type=float, default=RM3.original_weight, help="original query's weight"
    )
    rm3.add_argument("--no-term-filter", action="store_true", help="allow feedback terms outside [a-z0-9]")
    rm3.add_argument("--print-expansions", metavar="FILE", help="write each query's expansion as JSONL")
    add_worker_options(s, _search)


def _index(args: argparse.Namespace) -> int:
    options = {
        "lang": args.lang,
        "lang_field": args.lang_field,
        "fields": [f.strip() for f in args.fields.split(",") if f.strip()],
        "threads": args.threads,
        "keep_first_duplicate": args.keep_first_duplicate,
        "quiet": args.quiet,
        "memory_budget_mb": args.memory_mb,
    }
    if args.shards is not None:
        from clirkit.distributed.bm25 import build_sharded_bm25

        if args.store_docvectors:
            raise SystemExit("clirkit index bm25: --store-docvectors (for RM3) cannot go with --shards")
        sharded = build_sharded_bm25(args.corpus, args.index, args.shards, ray=args.ray, **options)
        built = f"{sharded.num_docs} documents in {sharded.num_shards} shards"
    elif args.ray is not None:
        raise SystemExit("clirkit index bm25: --ray builds a sharded index: give --shards N")
    else:
        index = BM25Index.build(args.corpus, args.index, store_docvectors=args.store_docvectors, **options)
        built = f"{index.num_docs} documents, {index.num_terms} terms"
    if not args.quiet:
        print(f"indexed {built} -> {args.index}", file=sys.stderr)
    return 0


def _search_sharded(args: argparse.Namespace) -> None:
    from clirkit.distributed.bm25 import RayShardedBM25, ShardedBM25Index
    from clirkit.distributed.cluster import connected

    if args.rm3:
        raise SystemExit("clirkit search bm25: --rm3 is not available on a sharded index")
    options = {"tag": args.tag, "lang": args.lang, "k1": args.k1, "b": args.b}
    if args.ray is None:
        index = ShardedBM25Index.open(args.index, threads=args.threads, quiet=args.quiet)
        index.search_file_to_trec(args.queries, args.output, args.k, **options)
        return
    with connected(args.ray), RayShardedBM25(args.index, quiet=args.quiet) as searcher:
        searcher.search_file_to_trec(args.queries, args.output, args.k, **options)


def _search(args: argparse.Namespace) -> int:
    rm3_only = [flag for flag, given in _rm3_flags(args) if given]
    if rm3_only and not args.rm3:
        print(f"clirkit search bm25: error: {', '.join(rm3_only)} need --rm3", file=sys.stderr)
        return 2  # a usage error, as argparse's
    if sharded_kind(args.index) is not None:
        _search_sharded(args)
        if not args.quiet:
            print(f"searched {args.queries} -> {args.output}", file=sys.stderr)
        return 0
    if args.ray is not None:
        raise SystemExit(
            "clirkit search bm25: --ray searches a sharded index (clirkit index bm25 --shards N)"
        )
    rm3 = None
    if args.rm3:
        rm3 = RM3(args.fb_docs, args.fb_terms, args.original_weight, not args.no_term_filter)
    index = BM25Index.open(args.index)
    options = {
        "threads": args.threads,
        "lang": args.lang,
        "k1": args.k1,
        "b": args.b,
        "quiet": args.quiet,
        "rm3": rm3,
    }
    if args.print_expansions:
        results = index.search_file(args.queries, args.k, **options)
        results.to_trec(args.output, tag=args.tag)
        _write_expansions(args.print_expansions, results)
    else:
        # Streamed: results go to the run file window by window, never all in memory.
        index.search_file_to_trec(args.queries, args.output, args.k, tag=args.tag, **options)
    if not args.quiet:
        print(f"searched {args.queries} -> {args.output}", file=sys.stderr)
    return 0


def _rm3_flags(args: argparse.Namespace) -> list[tuple[str, bool]]:
    """RM3's options, and whether each was changed from its default."""
    return [
        ("--fb-docs", args.fb_docs != RM3.fb_docs),
        ("--fb-terms", args.fb_terms != RM3.fb_terms),
        ("--original-weight", args.original_weight != RM3.original_weight),
        ("--no-term-filter", args.no_term_filter),
        ("--print-expansions", args.print_expansions is not None),
    ]


def _write_expansions(path: str, results) -> None:
    """One JSON line per query, ``{"id": qid, "terms": [[term, weight], ...]}`` heaviest first,
    written beside the target and renamed so that a failure leaves no partial file."""
    from clirkit._atomic import atomic_text_output

    with atomic_text_output(path) as out:
        for qid in results.qids():
            terms = results.expansion(qid) or []
            out.write(json.dumps({"id": qid, "terms": [[t, w] for t, w in terms]}, ensure_ascii=False) + "\n")
