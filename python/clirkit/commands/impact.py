"""`clirkit index impact` and `clirkit search impact`."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from clirkit.commands.common import (
    add_ray_option,
    add_search_parser,
    add_spill_memory_option,
    add_worker_options,
    non_negative_int,
    picked,
    positive_int,
    positive_u32,
    seed_int,
    threads,
)
from clirkit.distributed.sharded import sharded_kind
from clirkit.impact import (
    DEFAULT_CANDIDATES,
    DEFAULT_POSTINGS_PER_TERM,
    DEFAULT_QUANTIZE,
    RUN_TAG,
    ApproximateSettings,
    AuditReport,
    Calibration,
    ImpactIndex,
)

#: The approximate-only options, each with its default (None: unset).
APPROXIMATE_OPTIONS = {
    "postings_per_term": DEFAULT_POSTINGS_PER_TERM,
    "query_terms": 0,
    "candidates": DEFAULT_CANDIDATES,
    "target_accuracy": None,
    "calibration_sample": 50,
    "audit": None,
    "audit_seed": 0,
}


def register(top, groups) -> None:
    p = groups["index"].add_parser("impact", help="build an impact index from JSONL term-weight vectors")
    p.add_argument(
        "--vectors", required=True, help='JSONL vectors: {"id"|"_id": ..., "vector": {"term": weight, ...}}'
    )
    p.add_argument("--index", required=True, help="index directory to create (atomically)")
    p.add_argument(
        "--quantize",
        type=positive_u32,
        default=DEFAULT_QUANTIZE,
        help="impacts are round(weight * QUANTIZE) (default 100; 1 keeps integer weights as they are)",
    )
    add_spill_memory_option(p)
    p.add_argument(
        "--shards",
        type=positive_int,
        help="build a sharded index of N shards (a plain, uncompressed vectors file); searched as the single index",
    )
    add_ray_option(p, "build the shards as tasks on this Ray cluster")
    add_worker_options(p, _index)

    s = add_search_parser(
        groups,
        "impact",
        "query vectors (JSONL, as the documents) or TSV: qid<TAB>term term ... or qid<TAB>term<TAB>weight; "
        "with --model, query texts (JSONL: _id/id, text)",
        help="search an impact index, writing a TREC run",
    )
    s.add_argument(
        "--model", help="a SPLADE-family ONNX model directory: encode the query texts at search time"
    )
    s.add_argument(
        "--max-length", type=positive_int, help="with --model: query tokens kept (default: the model's limit)"
    )
    s.add_argument(
        "--device", choices=("auto", "cuda", "cpu"), default="auto", help="with --model: where to encode"
    )
    s.add_argument("--output", required=True, help="TREC run file to write")
    s.add_argument("--k", type=positive_int, default=1000, help="hits per query")
    s.add_argument("--tag", default=RUN_TAG, help="run tag (6th column)")
    add_ray_option(s, "search a sharded index through shard actors on this Ray cluster")
    _add_approximate_options(s)
    add_worker_options(s, _search)


def _target(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"{value} is not in (0, 1]")
    return value


def _add_approximate_options(s: argparse.ArgumentParser) -> None:
    g = s.add_argument_group(
        "approximate search",
        "Search is exact unless --approximate is given. Approximate search walks statically pruned posting "
        "lists and re-scores candidates exactly: returned scores are exact, but documents of the exact top k "
        "may be missed; --audit measures how many.",
    )
    g.add_argument("--approximate", action="store_true", help="search approximately (default: exact search)")
    g.add_argument(
        "--postings-per-term",
        type=non_negative_int,
        help=f"postings of highest impact kept per term (default {DEFAULT_POSTINGS_PER_TERM}; 0 keeps all): "
        "more costs memory and time, misses less",
    )
    g.add_argument(
        "--query-terms",
        type=non_negative_int,
        help="the query's heaviest terms walked for candidates (default 0: all): fewer is faster, misses more",
    )
    g.add_argument(
        "--candidates",
        type=positive_int,
        help=f"documents re-scored exactly (default {DEFAULT_CANDIDATES}, at least --k): fewer is faster, "
        "misses more",
    )
    g.add_argument(
        "--target-accuracy",
        type=_target,
        help="choose --query-terms and --candidates: the least work whose Accuracy@10 on all queries "
        "reaches this with 95%% confidence, judged on --calibration-sample of them (re-run exactly): "
        "the lower confidence bound of the sample's mean must reach it",
    )
    g.add_argument(
        "--calibration-sample",
        type=positive_int,
        help="queries re-run exactly to choose settings for --target-accuracy (default 50; more gives a "
        "tighter bound, so cheaper settings; all queries make the bound their exact mean)",
    )
    g.add_argument(
        "--audit",
        type=positive_int,
        metavar="N",
        help="re-run N sampled queries exactly and report Accuracy@10 and the score gap (on stderr and in "
        "OUTPUT.audit.json)",
    )
    g.add_argument(
        "--audit-seed", type=seed_int, help="seed of the audit's (and calibration's) sample (default 0)"
    )


def _index(args: argparse.Namespace) -> int:
    options = picked(args, "quantize", "threads", "quiet")
    options["memory_budget_mb"] = args.memory_mb
    if args.ray is not None and args.shards is None:
        raise SystemExit("clirkit index impact: --ray builds a sharded index: give --shards N")
    if args.shards is not None:
        from clirkit.distributed.impact import build_sharded_impact

        sharded = build_sharded_impact(args.vectors, args.index, args.shards, ray=args.ray, **options)
        built = f"{sharded.num_docs} documents in {sharded.num_shards} shards"
    else:
        index = ImpactIndex.build(args.vectors, args.index, **options)
        built = f"{index.num_docs} documents, {index.num_terms} terms"
    if not args.quiet:
        print(f"indexed {built} -> {args.index}", file=sys.stderr)
    return 0


def _search(args: argparse.Namespace) -> int:
    given = [name for name in APPROXIMATE_OPTIONS if getattr(args, name) is not None]
    if given and not args.approximate:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise SystemExit(f"clirkit search impact: {flags} need --approximate (search is exact without it)")
    for name, default in APPROXIMATE_OPTIONS.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    if sharded_kind(args.index) is not None:
        if args.target_accuracy is not None:
            raise SystemExit(
                "clirkit search impact: --target-accuracy is not available on a sharded index; "
                "give --query-terms and --candidates (calibrate them on the single index)"
            )
        with tempfile.TemporaryDirectory(prefix="clirkit-queries-") as tmp:
            queries = _encode_queries(args, Path(tmp)) if args.model else args.queries
            searched = _search_sharded(args, queries)
    elif args.ray is not None:
        raise SystemExit(
            "clirkit search impact: --ray searches a sharded index (clirkit index impact --shards N)"
        )
    else:
        searched = _search_single(args)
    if not args.quiet:
        print(f"searched {searched} queries -> {args.output}", file=sys.stderr)
    return 0


def _search_sharded(args: argparse.Namespace, queries: str | Path) -> int:
    """``clirkit search impact`` on a sharded index: shards in threads, or through Ray actors."""
    from contextlib import ExitStack

    from clirkit.distributed.cluster import connected
    from clirkit.distributed.impact import Pruning, ShardedImpactIndex

    settings = ApproximateSettings(query_terms=args.query_terms, candidates=args.candidates)
    pruning = Pruning(settings, args.postings_per_term)
    approximate = pruning if args.approximate else None
    with ExitStack() as stack:
        if args.ray is not None:
            stack.enter_context(connected(args.ray))
        index = stack.enter_context(
            ShardedImpactIndex.open(
                args.index, threads=args.threads, quiet=args.quiet, ray=args.ray is not None
            )
        )
        searched = index.search_file_to_trec(queries, args.output, args.k, tag=args.tag, pruning=approximate)
        if args.audit is not None:
            report = index.audit(queries, args.audit, seed=args.audit_seed, k=args.k, pruning=pruning)
            _write_audit(args, report)
    return searched


def _search_single(args: argparse.Namespace) -> int:
    """``clirkit search impact`` on one index, exact or approximate."""
    index = ImpactIndex.open(args.index)
    with tempfile.TemporaryDirectory(prefix="clirkit-queries-") as tmp:
        queries = _encode_queries(args, Path(tmp)) if args.model else args.queries
        if args.approximate:
            searched = _search_approximate(args, index, queries)
        else:
            # Streamed: results go to the run file window by window, never all in memory.
            searched = index.search_file_to_trec(
                queries, args.output, args.k, tag=args.tag, threads=args.threads, quiet=args.quiet
            )
    return searched


def _search_approximate(args: argparse.Namespace, index: ImpactIndex, queries: str | Path) -> int:
    """The approximate search of ``clirkit search impact --approximate``, its calibration and audit."""
    approx = index.approximate(postings_per_term=args.postings_per_term, threads=args.threads)
    settings = ApproximateSettings(query_terms=args.query_terms, candidates=args.candidates)
    calibration = None
    if args.target_accuracy is not None:
        calibration = approx.calibrate(
            queries,
            args.target_accuracy,
            sample=args.calibration_sample,
            seed=args.audit_seed,
            k=args.k,
            threads=args.threads,
        )
        settings = calibration.settings
        if not args.quiet or not calibration.reached:
            print(calibration.summary(), file=sys.stderr)
    searched = approx.search_file_to_trec(
        queries, args.output, args.k, tag=args.tag, settings=settings, threads=args.threads, quiet=args.quiet
    )
    if args.audit is not None:
        report = approx.audit(
            queries, args.audit, seed=args.audit_seed, k=args.k, settings=settings, threads=args.threads
        )
        _write_audit(args, report, calibration)
    return searched


def _write_audit(
    args: argparse.Namespace, report: AuditReport, calibration: Calibration | None = None
) -> None:
    """The audit beside the run (``OUTPUT.audit.json``, with the calibration that chose the settings, if
    any) and its summary on stderr."""
    from clirkit._atomic import write_json_atomic

    data = {
        "postings_per_term": args.postings_per_term,
        "target_accuracy": args.target_accuracy,
        "calibration": None if calibration is None else calibration.to_dict(),
        **report.to_dict(),
    }
    write_json_atomic(f"{args.output}.audit.json", data, indent=1)
    # The audit is the point of asking for it: printed even with --quiet.
    print(report.summary(), file=sys.stderr)


def _encode_queries(args: argparse.Namespace, tmp: Path) -> Path:
    """The query texts encoded with ``--model`` into a vectors file under ``tmp``."""
    from clirkit.encoders import SparseEncoder, encode_sparse_file

    encoder = SparseEncoder(args.model, max_length=args.max_length, device=args.device, threads=threads(args))
    return encode_sparse_file(
        encoder, args.queries, tmp / "queries", kind="queries", quiet=args.quiet
    ).vectors_path
