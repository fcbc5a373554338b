"""`clirkit rerank`: sliding-window listwise reranking of a first-stage run with a model backend
(an OpenAI-compatible server with RankGPT's prompt, or an offline pointwise encoder)."""

from __future__ import annotations

import argparse
import json
import sys

from clirkit._native import InvalidInputError
from clirkit.commands.common import add_quiet
from clirkit.rerank import Backend, OpenAIChatBackend, PointwiseBackend, rerank
from clirkit.runs import write_run


def register(top, groups) -> None:
    p = top.add_parser(
        "rerank",
        help="listwise sliding-window reranking (RankGPT-style) of a run",
        description="Rerank each query's top DEPTH in windows of WINDOW sliding bottom-up with stride "
        "STRIDE (RankGPT's partial sort: 9 model calls per query for 100/20/10). Output: the reranked "
        "top followed by the rest of the run, scored n, n-1, ..., 1 so canonical order is the new order.",
    )
    p.add_argument("--run", required=True, help="first-stage TREC run")
    p.add_argument("--queries", required=True, help="queries (JSONL with _id/text, or id<TAB>text)")
    p.add_argument("--corpus", required=True, help="corpus (JSONL with _id/title/text, or id<TAB>text)")
    p.add_argument("--output", required=True, help="where to write the reranked run")
    p.add_argument("--backend", choices=["openai", "pointwise"], default="openai", help="(default: openai)")
    p.add_argument("--base-url", help="OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model", help="model name sent to the server (openai backend)")
    p.add_argument("--api-key", help="bearer token (default: $OPENAI_API_KEY)")
    p.add_argument("--model-dir", help="ONNX encoder directory (pointwise backend)")
    p.add_argument("--depth", type=int, default=100, help="rerank the top DEPTH (default: 100)")
    p.add_argument("--window", type=int, default=20, help="window size (default: 20)")
    p.add_argument("--stride", type=int, default=10, help="stride (default: 10)")
    p.add_argument("--cache", help="SQLite answer cache: resumes interrupted runs, makes reruns free")
    p.add_argument("--retry-failed", action="store_true", help="ask again for windows cached as failed")
    p.add_argument("--concurrency", type=int, default=8, help="requests in flight (default: 8)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per request (default: 60)")
    p.add_argument("--retries", type=int, default=3, help="retries per window (default: 3)")
    p.add_argument("--max-words", type=int, default=300, help="cut passages to N words (default: 300)")
    p.add_argument("--stats", help="also write the statistics as JSON here")
    p.add_argument("--tag", default="clirkit-rerank", help="run tag (6th column)")
    add_quiet(p)
    p.set_defaults(func=_rerank)


def _backend(args: argparse.Namespace) -> Backend:
    if args.backend == "openai":
        if not args.base_url or not args.model:
            raise InvalidInputError("--backend openai needs --base-url and --model")
        return OpenAIChatBackend(
            args.base_url,
            args.model,
            api_key=args.api_key,
            timeout=args.timeout,
            retries=args.retries,
            concurrency=args.concurrency,
            max_words=args.max_words,
        )
    if not args.model_dir:
        raise InvalidInputError("--backend pointwise needs --model-dir (an ONNX encoder directory)")
    try:
        from clirkit.encoders import OnnxEncoder
    except ImportError as err:
        raise InvalidInputError(f"--backend pointwise needs clirkit.encoders (ONNX encoders): {err}") from err
    return PointwiseBackend.from_encoder(OnnxEncoder(args.model_dir), name=args.model_dir)


def _rerank(args: argparse.Namespace) -> int:
    run, stats = rerank(
        args.run,
        args.queries,
        args.corpus,
        _backend(args),
        depth=args.depth,
        window=args.window,
        stride=args.stride,
        cache=args.cache,
        retry_failed=args.retry_failed,
        progress=not args.quiet,
    )
    write_run(args.output, run, args.tag)
    for failed in stats.failed_windows[:20]:
        print(
            f"clirkit: warning: query '{failed.qid}' window at {failed.start} kept its order: "
            f"{failed.reason}",
            file=sys.stderr,
        )
    if len(stats.failed_windows) > 20:
        print(
            f"clirkit: warning: ... and {len(stats.failed_windows) - 20} more failed windows", file=sys.stderr
        )
    print(f"rerank: {stats.summary()}", file=sys.stderr)
    if args.stats:
        with open(args.stats, "w", encoding="utf-8") as f:
            json.dump(stats.to_dict(), f, indent=1)
    return 0
