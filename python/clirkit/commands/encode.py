"""``clirkit encode``: ONNX-encode a corpus or a query file to PREFIX.npy + PREFIX.ids.txt, and
``clirkit maxp``: turn a passage run into a document run."""

from __future__ import annotations

import argparse
import sys

from clirkit.commands.common import add_quiet, add_threads, threads


def _passages(value: str) -> tuple[int, int]:
    try:
        size, stride = (int(x) for x in value.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected SIZE:STRIDE in tokens (e.g. 180:90), got {value!r}"
        ) from None
    if size < 1 or stride < 1 or stride > size:
        raise argparse.ArgumentTypeError(f"need 1 <= STRIDE <= SIZE, got {value!r}")
    return size, stride


def _positive(value: str) -> int:
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return n


def register(top: argparse._SubParsersAction, groups: dict) -> None:
    p = top.add_parser(
        "encode",
        help="encode a corpus or queries with an ONNX model to PREFIX.npy + PREFIX.ids.txt",
        description="Encode a JSONL corpus (documents, optionally cut into token windows) or a JSONL "
        "query file with an ONNX encoder directory (model.onnx, tokenizer.json, config.json). Writes "
        "PREFIX.npy (one row per document/passage/query) and PREFIX.ids.txt (one id per row). An "
        "interrupted run resumes when started again with the same arguments.",
    )
    p.add_argument("--model", required=True, help="model directory (model.onnx, tokenizer.json, config.json)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--corpus", help="documents (JSONL: _id, title, text)")
    source.add_argument("--queries", help="queries (JSONL: _id, text)")
    p.add_argument("--output", required=True, help="output prefix: writes PREFIX.npy and PREFIX.ids.txt")
    p.add_argument(
        "--fields", help="comma-separated text fields (default: title,text for a corpus, text for queries)"
    )
    p.add_argument(
        "--passages",
        type=_passages,
        metavar="SIZE:STRIDE",
        help="cut documents into windows of SIZE tokens every STRIDE tokens (ids docid#k)",
    )
    p.add_argument("--separator", default="#", help="between doc id and passage number (default '#')")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--fp16", action="store_true", help="float16 inference on CUDA")
    p.add_argument("--dtype", choices=("float32", "float16"), default="float32", help="storage type")
    p.add_argument(
        "--batch-size",
        type=_positive,
        default=32,
        help="texts per model call (default 32; a dynamically quantized model on CPU runs one text per "
        "call, --threads at a time, so that no text's vector depends on its batch-mates)",
    )
    p.add_argument("--max-length", type=_positive, help="tokens per input (default: the model's limit)")
    p.add_argument("--pooling", choices=("mean", "cls", "last"), help="override config.json")
    p.add_argument("--no-normalize", action="store_true", help="do not L2-normalize embeddings")
    p.add_argument(
        "--query-prefix",
        help="prepended to every query (overrides config.json's query_prefix; '' for none)",
    )
    p.add_argument(
        "--passage-prefix",
        help="prepended to every document or passage (overrides config.json's passage_prefix; '' for none)",
    )
    p.add_argument(
        "--chunk-size",
        type=_positive,
        default=10_000,
        help="records per chunk (memory bound and resume granularity)",
    )
    p.add_argument("--restart", action="store_true", help="discard an interrupted run's progress")
    p.add_argument(
        "--multivector",
        action="store_true",
        help="one vector per token (late interaction): writes PREFIX.tokens.npy, PREFIX.offsets.npy, PREFIX.ids.txt",
    )
    add_threads(p)
    add_quiet(p)
    p.set_defaults(func=run_encode)

    m = top.add_parser("maxp", help="passage run -> document run (document score = max over passages)")
    m.add_argument("run", help="TREC run over passage ids (docid#k)")
    m.add_argument("--output", required=True, help="document run to write")
    m.add_argument("--separator", default="#", help="split passage ids at the last SEPARATOR")
    m.add_argument("--depth", type=_positive, help="documents kept per query")
    m.set_defaults(func=run_maxp)


def run_encode(args: argparse.Namespace) -> int:
    if args.multivector:
        from clirkit.commands.multivector import run_encode_multivector

        return run_encode_multivector(args)
    from clirkit.encode_corpus import encode_file
    from clirkit.encoders import OnnxEncoder

    encoder = OnnxEncoder(
        args.model,
        pooling=args.pooling,
        normalize=False if args.no_normalize else None,
        query_prefix=args.query_prefix,
        passage_prefix=args.passage_prefix,
        max_length=args.max_length,
        batch_size=args.batch_size,
        device=args.device,
        fp16=args.fp16 or None,
        threads=threads(args),
    )
    fields: tuple[str, ...] | None = (
        tuple(f.strip() for f in args.fields.split(",") if f.strip()) if args.fields else None
    )
    result = encode_file(
        encoder,
        args.corpus or args.queries,
        args.output,
        kind="queries" if args.queries else "passages",
        fields=fields,
        passages=args.passages,
        separator=args.separator,
        dtype=args.dtype,
        chunk_size=args.chunk_size,
        restart=args.restart,
        quiet=args.quiet,
    )
    if result.truncated:
        print(
            f"clirkit: warning: {result.truncated} inputs were longer than {encoder.max_length} tokens "
            "and were truncated",
            file=sys.stderr,
        )
    if not args.quiet:
        resumed = f" (resumed after {result.resumed_rows} rows)" if result.resumed_rows else ""
        print(
            f"encoded {result.records} records -> {result.rows} rows x {result.dim} ({args.dtype}, "
            f"{encoder.device}) in {result.seconds:.1f}s{resumed}: {result.embeddings_path}, {result.ids_path}",
            file=sys.stderr,
        )
    return 0


def run_maxp(args: argparse.Namespace) -> int:
    from clirkit.passages import maxp_file

    maxp_file(args.run, args.output, args.separator, args.depth)
    return 0
