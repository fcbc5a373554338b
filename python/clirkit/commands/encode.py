"""``clirkit encode``: ONNX-encode a corpus or a query file to PREFIX.npy + PREFIX.ids.txt (dense) or
PREFIX.vectors.jsonl (a SPLADE-family sparse model), and ``clirkit maxp``: turn a passage run into a
document run."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from clirkit._native import InvalidInputError
from clirkit.commands.common import (
    add_ray_option,
    add_worker_options,
    report,
    threads,
)

FAST_HELP = (
    "fast mode (dense models; the encoder's batch_invariant=False): vectors may depend on their batch-mates, "
    "and a dynamically quantized model on a CPU with AVX-512 VNNI computes attention in int8 "
    "(multilingual-e5-small-int8: cosine to the default >= 0.996, median 0.9988)"
)


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


def _input_values(value: str) -> dict:
    import json

    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"not JSON: {err}") from None
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError("must be a JSON object of input names")
    return parsed


def register(top: argparse._SubParsersAction, groups: dict) -> None:
    p = top.add_parser(
        "encode",
        help="encode a corpus or queries with an ONNX model to PREFIX.npy + PREFIX.ids.txt "
        "(or PREFIX.vectors.jsonl for a sparse model)",
        description="Encode a JSONL corpus (documents, optionally cut into token windows) or a JSONL "
        "query file with an ONNX encoder directory (model.onnx, tokenizer.json, config.json). Writes "
        "PREFIX.npy (one row per document/passage/query) and PREFIX.ids.txt (one id per row). A "
        "learned-sparse (SPLADE-family) model, as its config.json declares, writes PREFIX.vectors.jsonl "
        'instead: one {"id", "contents", "vector": {term: weight}} line per row (Anserini\'s JSON '
        "vector layout). An interrupted run resumes when started again with the same arguments.",
    )
    p.add_argument("--model", required=True, help="model directory (model.onnx, tokenizer.json, config.json)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--corpus", help="documents (JSONL: _id, title, text)")
    source.add_argument("--queries", help="queries (JSONL: _id, text)")
    p.add_argument(
        "--output",
        required=True,
        help="output prefix: writes PREFIX.npy and PREFIX.ids.txt (sparse: PREFIX.vectors.jsonl)",
    )
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
    p.add_argument("--fp16", action="store_true", help="float16 inference on CUDA (dense models)")
    p.add_argument("--fast", action="store_true", help=FAST_HELP)
    p.add_argument(
        "--dtype", choices=("float32", "float16"), default="float32", help="storage type (dense models)"
    )
    p.add_argument(
        "--batch-size",
        type=_positive,
        help="texts per model call (default 32, sparse models 8: their output is batch x tokens x "
        "vocabulary; a dynamically quantized model on CPU runs one text per call, --threads at a time, "
        "so that no text's vector depends on its batch-mates)",
    )
    p.add_argument("--max-length", type=_positive, help="tokens per input (default: the model's limit)")
    p.add_argument("--pooling", choices=("mean", "cls", "last"), help="override config.json (dense models)")
    p.add_argument(
        "--no-normalize", action="store_true", help="do not L2-normalize embeddings (dense models)"
    )
    p.add_argument(
        "--top-terms",
        type=_positive,
        metavar="N",
        help="sparse models: keep the N largest term weights of each vector (default all)",
    )
    p.add_argument(
        "--query-prefix",
        help="prepended to every query (overrides config.json's query_prefix; '' for none)",
    )
    p.add_argument(
        "--passage-prefix",
        help="prepended to every document or passage (overrides config.json's passage_prefix; '' for none)",
    )
    p.add_argument(
        "--input-values",
        type=_input_values,
        metavar="JSON",
        help="values of model inputs the tokenizer does not give, for both roles ('{\"task_id\": 2}') or "
        'per role (\'{"query": {"task_id": 0}, "passage": {"task_id": 1}}\'); added to or replacing '
        "config.json's input_values",
    )
    p.add_argument(
        "--chunk-size",
        type=_positive,
        help="records per chunk (memory bound and resume granularity; default 10,000, with --multivector "
        "1,000: a record there is a matrix)",
    )
    p.add_argument("--restart", action="store_true", help="discard an interrupted run's progress")
    p.add_argument(
        "--outputs",
        metavar="FAMILIES",
        help="a multi-head model (config.json 'heads'): comma-separated families from one forward pass, "
        "of dense,sparse,multivector; writes PREFIX.dense.npy + PREFIX.dense.ids.txt, "
        "PREFIX.sparse.vectors.jsonl, PREFIX.multivector.{tokens.npy,offsets.npy,ids.txt}",
    )
    p.add_argument(
        "--multivector",
        action="store_true",
        help="one vector per token (late interaction): writes PREFIX.tokens.npy, PREFIX.offsets.npy, PREFIX.ids.txt",
    )
    add_ray_option(
        p,
        "encode with Ray Data (an actor pool of ONNX sessions) into --output as a directory of embedding shards",
    )
    p.add_argument(
        "--shards",
        type=_positive,
        default=8,
        metavar="N",
        help="with --ray: embedding shards to write (default 8); a rerun encodes only the unfinished ones",
    )
    add_worker_options(p, run_encode)

    m = top.add_parser("maxp", help="passage run -> document run (document score = max over passages)")
    m.add_argument("run", help="TREC run over passage ids (docid#k)")
    m.add_argument("--output", required=True, help="document run to write")
    m.add_argument("--separator", default="#", help="split passage ids at the last SEPARATOR")
    m.add_argument("--depth", type=_positive, help="documents kept per query")
    m.set_defaults(func=run_maxp)


def run_encode(args: argparse.Namespace) -> int:
    if args.ray is not None:
        return _run_ray_encode(args)
    if args.outputs:
        return _run_heads_encode(args)
    if args.multivector:
        from clirkit.commands.multivector import run_encode_multivector

        return run_encode_multivector(args)
    from clirkit.encoders import is_sparse_model

    if is_sparse_model(args.model):
        return _run_sparse_encode(args)
    if args.top_terms is not None:
        raise InvalidInputError(
            f"--top-terms applies to learned-sparse models; {args.model}/config.json declares none"
        )
    from clirkit.encoders import OnnxEncoder, encode_file

    encoder = OnnxEncoder(args.model, **_dense_options(args), fp16=args.fp16 or None)
    result = encode_file(encoder, **_file_options(args), dtype=args.dtype)
    _report_encoding(
        args,
        result,
        encoder,
        f"{result.rows} rows x {result.dim} ({args.dtype}, {encoder.device})",
        f"{result.embeddings_path}, {result.ids_path}",
    )
    return 0


def _dense_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options of a dense (or multi-head) encoder given on the command line."""
    return {
        "pooling": args.pooling,
        "normalize": False if args.no_normalize else None,
        "query_prefix": args.query_prefix,
        "passage_prefix": args.passage_prefix,
        "input_values": args.input_values,
        "max_length": args.max_length,
        "batch_size": args.batch_size or 32,
        "device": args.device,
        "threads": threads(args),
        "batch_invariant": not args.fast,
    }


def _run_heads_encode(args: argparse.Namespace) -> int:
    """``--outputs``: several families' files from one forward pass of a multi-head model."""
    from clirkit.encoders import FAMILIES, MultiHeadEncoder, encode_heads_file

    families = [f.strip() for f in args.outputs.split(",") if f.strip()]
    unknown = [f for f in families if f not in FAMILIES]
    if unknown or not families:
        raise InvalidInputError(
            f"--outputs takes families of {', '.join(FAMILIES)} (the model's heads); got {args.outputs!r}"
        )
    if args.multivector or args.top_terms is not None:
        raise InvalidInputError("--outputs chooses the families itself: drop --multivector / --top-terms")
    encoder = MultiHeadEncoder(args.model, outputs=families, **_dense_options(args))
    options = _file_options(args)
    options["chunk_size"] = args.chunk_size or 1000
    results = encode_heads_file(
        encoder, options.pop("input_path"), options.pop("output_prefix"), dtype=args.dtype, **options
    )
    for family, result in results.items():
        report(
            args,
            f"{family}: {result.records} records encoded ({encoder.forward_passes} forward passes in all)",
        )
    return 0


def _run_ray_encode(args: argparse.Namespace) -> int:
    from clirkit.distributed.cluster import connected
    from clirkit.encoders import is_sparse_model

    if args.multivector or is_sparse_model(args.model):
        raise InvalidInputError("--ray encodes with dense models (one vector per record)")
    if args.passages:
        raise InvalidInputError(
            "--passages is not supported with --ray (a shard's rows must be known before encoding)"
        )
    with connected(args.ray):
        result = _encode_shards(args)
    report(
        args,
        f"encoded {result.rows} rows into {result.shards} shards in {result.seconds:.1f}s "
        f"({len(result.skipped)} already done): {args.output}",
    )
    return 0


def _encode_shards(args: argparse.Namespace) -> Any:
    from clirkit.distributed.encode import encode_shards

    return encode_shards(
        args.model,
        args.corpus or args.queries,
        args.output,
        shards=args.shards,
        kind="queries" if args.queries else "passages",
        fields=tuple(f.strip() for f in args.fields.split(",") if f.strip()) if args.fields else None,
        dtype=args.dtype,
        encoder_options={
            **{k: v for k, v in _dense_options(args).items() if k not in ("threads", "device")},
            "fp16": args.fp16 or None,
            **({"threads": args.threads} if args.threads else {}),
            **({"device": args.device} if args.device != "auto" else {}),
        },
        restart=args.restart,
    )


def _run_sparse_encode(args: argparse.Namespace) -> int:
    from clirkit.encoders import SparseEncoder, encode_sparse_file

    dense_only = [
        option
        for option, given in (
            ("--pooling", args.pooling is not None),
            ("--no-normalize", args.no_normalize),
            ("--fp16", args.fp16),
            ("--fast", args.fast),
            ("--dtype", args.dtype != "float32"),
        )
        if given
    ]
    if dense_only:
        raise InvalidInputError(
            f"{', '.join(dense_only)} applies to dense models; {args.model} is a learned-sparse model"
        )
    encoder = SparseEncoder(
        args.model,
        top_terms=args.top_terms,
        query_prefix=args.query_prefix,
        passage_prefix=args.passage_prefix,
        input_values=args.input_values,
        max_length=args.max_length,
        batch_size=args.batch_size or 8,
        device=args.device,
        threads=threads(args),
    )
    result = encode_sparse_file(encoder, **_file_options(args))
    _report_encoding(
        args, result, encoder, f"{result.rows} sparse vectors ({encoder.device})", str(result.vectors_path)
    )
    return 0


def _file_options(args: argparse.Namespace) -> dict[str, Any]:
    """What dense and sparse file encoding take alike: input, output, fields, passages, chunks."""
    return {
        "input_path": args.corpus or args.queries,
        "output_prefix": args.output,
        "kind": "queries" if args.queries else "passages",
        "fields": tuple(f.strip() for f in args.fields.split(",") if f.strip()) if args.fields else None,
        "passages": args.passages,
        "separator": args.separator,
        "chunk_size": args.chunk_size or 10_000,
        "restart": args.restart,
        "quiet": args.quiet,
    }


def _report_encoding(args: argparse.Namespace, result: Any, encoder: Any, made: str, written: str) -> None:
    """What dense and sparse encoding report alike: truncated inputs (always), then unless ``--quiet``
    the records encoded into ``made``, the time, any resumption and the files ``written``."""
    if result.truncated:
        print(
            f"clirkit: warning: {result.truncated} inputs were longer than {encoder.max_length} tokens "
            "and were truncated",
            file=sys.stderr,
        )
    resumed = f" (resumed after {result.resumed_rows} rows)" if result.resumed_rows else ""
    report(args, f"encoded {result.records} records -> {made} in {result.seconds:.1f}s{resumed}: {written}")


def run_maxp(args: argparse.Namespace) -> int:
    from clirkit.encoders import maxp_file

    maxp_file(args.run, args.output, args.separator, args.depth)
    return 0
