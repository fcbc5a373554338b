"""`clirkit rerank`: reranking of a first-stage run, listwise over an OpenAI-compatible chat server (sliding
windows, a named prompt family) or pointwise (a full sort of the top DEPTH by a cross-encoder, an
LLM-likelihood scorer over a completions endpoint, or a bi-encoder's cosine)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields
from typing import Optional, Tuple

from clirkit._native import InvalidInputError
from clirkit.commands.common import add_command, add_quiet, non_negative_int, picked, positive_int
from clirkit.rerank import TEMPLATES, Backend, Scorer, rerank, rerank_pointwise
from clirkit.rerank.http import scrub
from clirkit.rerank.settings import (
    BACKENDS,
    CROSS_ENCODER_MAX_LENGTH,
    ONNX_BACKENDS,
    SERVER_BACKENDS,
    RerankerSettings,
    make_reranker,
)
from clirkit.runs import write_run

#: Exit status of a run that wrote its output but some windows kept their order.
EXIT_WINDOWS_FAILED = 3


def register(top, groups) -> None:
    p = add_command(
        top,
        "rerank",
        "rerank a run: listwise (sliding windows over a chat model) or pointwise (full sort)",
        "Rerank each query's top DEPTH. Listwise (--backend openai): windows of WINDOW sliding "
        "bottom-up with stride STRIDE (RankGPT's partial sort: 9 model calls per query for 100/20/10), prompt "
        "family --template. Pointwise (cross-encoder, query-likelihood, yes-no, pointwise): every candidate "
        "scored, the whole depth sorted. Output: the reranked top followed by the rest of the run, scored "
        "n, n-1, ..., 1 so canonical order is the new order. Answers are cached in OUTPUT.answers.sqlite "
        "(unless --no-cache), so an interrupted run resumes. Exit status 3 when some windows failed "
        "(they keep their order; the output is written all the same).",
    )
    p.add_argument("--run", required=True, help="first-stage TREC run")
    p.add_argument("--queries", required=True, help="queries (JSONL with _id/text, or id<TAB>text)")
    p.add_argument("--corpus", required=True, help="corpus (JSONL with _id/title/text, or id<TAB>text)")
    p.add_argument("--output", required=True, help="where to write the reranked run")
    p.add_argument(
        "--backend",
        choices=list(BACKENDS),
        default="openai",
        help="openai: listwise chat completions; cross-encoder: ONNX cross-encoder (--model-dir); "
        "query-likelihood: UPR log P(query|passage) over /completions; yes-no: Qwen3-Reranker's yes/no "
        "over /completions; pointwise: bi-encoder cosine (--model-dir) (default: openai)",
    )
    p.add_argument("--base-url", help="OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model", help="model name sent to the server")
    p.add_argument("--api-key", help="bearer token (default: $OPENAI_API_KEY); never stored or printed")
    p.add_argument("--model-dir", help="ONNX model directory (cross-encoder and pointwise backends)")
    p.add_argument("--template", choices=sorted(TEMPLATES), default="rankgpt", help="listwise prompt family")
    p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (default: 0)")
    p.add_argument(
        "--max-tokens", type=positive_int, help="max_tokens of each listwise request (default: the server's)"
    )
    p.add_argument(
        "--extra-body",
        help='JSON object merged into each request, e.g. \'{"chat_template_kwargs": {"enable_thinking": true}}\'',
    )
    p.add_argument("--instruction", help="the yes-no backend's instruction (default: Qwen3-Reranker's)")
    p.add_argument("--depth", type=positive_int, default=100, help="rerank the top DEPTH (default: 100)")
    p.add_argument("--window", type=positive_int, default=20, help="window size, listwise (default: 20)")
    p.add_argument("--stride", type=positive_int, default=10, help="stride, listwise (default: 10)")
    p.add_argument("--cache", help="SQLite answer cache (default: OUTPUT.answers.sqlite)")
    p.add_argument("--no-cache", action="store_true", help="keep no answers: an interrupted run starts over")
    p.add_argument("--retry-failed", action="store_true", help="ask again for windows cached as failed")
    p.add_argument("--concurrency", type=positive_int, default=8, help="requests in flight (default: 8)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per request, all of it (default: 60)")
    p.add_argument("--retries", type=non_negative_int, default=3, help="retries per request (default: 3)")
    p.add_argument(
        "--max-response-mb", type=float, default=8.0, help="a larger response fails its window (default: 8)"
    )
    p.add_argument(
        "--max-words", type=positive_int, default=300, help="cut listwise passages to N words (default: 300)"
    )
    p.add_argument(
        "--passage-tokens", type=positive_int, help="cut passages to N tokens (--tokenizer, or script-aware)"
    )
    p.add_argument(
        "--query-tokens", type=positive_int, help="cut queries to N tokens (--tokenizer, or script-aware)"
    )
    p.add_argument("--tokenizer", help="the model's tokenizer.json, for --passage-tokens/--query-tokens")
    p.add_argument(
        "--max-length",
        type=positive_int,
        help=f"cross-encoder pair length (default: {CROSS_ENCODER_MAX_LENGTH}); pointwise: the bi-encoder's "
        "input length (default: the model's limit)",
    )
    p.add_argument("--batch-size", type=positive_int, default=32, help="texts per ONNX call (default: 32)")
    p.add_argument("--stats", help="also write the statistics as JSON here")
    p.add_argument("--tag", default="clirkit-rerank", help="run tag (6th column)")
    add_quiet(p)
    p.set_defaults(func=_rerank)


def _extra_body(text: Optional[str]) -> dict:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise InvalidInputError(f"--extra-body is not JSON: {err}") from None
    if not isinstance(value, dict):
        raise InvalidInputError("--extra-body must be a JSON object")
    return value


def _reranker(args: argparse.Namespace) -> Tuple[Optional[Backend], Optional[Scorer]]:
    """The listwise backend or the pointwise scorer the arguments ask for."""
    if args.backend in ONNX_BACKENDS and not args.model_dir:
        raise InvalidInputError(f"--backend {args.backend} needs --model-dir (an ONNX model directory)")
    if args.backend in SERVER_BACKENDS and (not args.base_url or not args.model):
        raise InvalidInputError(f"--backend {args.backend} needs --base-url and --model")
    if args.max_response_mb <= 0:
        raise InvalidInputError("--max-response-mb must be positive")
    if args.backend in ONNX_BACKENDS and (args.passage_tokens or args.query_tokens):
        raise InvalidInputError(f"--backend {args.backend} truncates with its own tokenizer (--max-length)")
    settings = RerankerSettings(
        extra_body=_extra_body(args.extra_body),
        **picked(args, *(f.name for f in fields(RerankerSettings) if f.name != "extra_body")),
    )
    return make_reranker(settings)


def _rerank(args: argparse.Namespace) -> int:
    if args.no_cache and args.cache:
        raise InvalidInputError("--cache and --no-cache contradict each other")
    cache = None if args.no_cache else (args.cache or f"{args.output}.answers.sqlite")
    backend, scorer = _reranker(args)
    if scorer is not None:
        run, stats = rerank_pointwise(
            args.run,
            args.queries,
            args.corpus,
            scorer,
            depth=args.depth,
            cache=cache,
            progress=not args.quiet,
        )
    else:
        run, stats = rerank(
            args.run,
            args.queries,
            args.corpus,
            backend,  # type: ignore[arg-type]
            depth=args.depth,
            window=args.window,
            stride=args.stride,
            cache=cache,
            retry_failed=args.retry_failed,
            progress=not args.quiet,
        )
    write_run(args.output, run, args.tag)
    secret = getattr(getattr(backend or scorer, "client", None), "api_key", None) or args.api_key
    for failed in stats.failed_windows[:20]:
        print(
            f"clirkit: warning: query '{failed.qid}' window at {failed.start} kept its order: "
            f"{scrub(failed.reason, secret)}",
            file=sys.stderr,
        )
    if len(stats.failed_windows) > 20:
        print(
            f"clirkit: warning: ... and {len(stats.failed_windows) - 20} more failed windows", file=sys.stderr
        )
    print(f"rerank: {stats.summary()}", file=sys.stderr)
    if args.stats:
        with open(args.stats, "w", encoding="utf-8") as f:
            json.dump(json.loads(scrub(json.dumps(stats.to_dict()), secret)), f, indent=1)
    if stats.failures:
        print(
            f"clirkit: error: {stats.failures} of {stats.windows} windows failed and kept their first-stage "
            f"order (output written; rerun to retry the transient failures)",
            file=sys.stderr,
        )
        return EXIT_WINDOWS_FAILED
    return 0
