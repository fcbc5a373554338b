"""``kind = "multivector"``: per-token ONNX vectors with clirkit's PLAID-style late-interaction index.

Each documents file is encoded once per model and settings into token files
(:mod:`clirkit.encoders.tokens`); a task's index holds the items of its documents (a language's
subset, or several files together), and its search encodes the task's queries per token."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from clirkit.experiment.plan import Plan
from clirkit.experiment.stage import RunContext, Stage, model_identity
from clirkit.experiment.systems import register_system_kind
from clirkit.experiment.systems.dense import (
    ENCODING_KEYS,
    MODEL_SYSTEM_KEYS,
    SEPARATOR,
    DenseKind,
    add_index_stage,
    add_query_stage,
    dense_encoder,
    document_encode_params,
    document_encode_stages,
    encode_documents_resumably,
    encode_task_queries,
    kept_document_ids,
    write_search_run,
)
from clirkit.experiment.systems.heads import declared_families, head_query_encoder
from clirkit.experiment.systems.precomputed import (
    document_parts,
    input_identity,
    query_input,
    query_rows,
    read_inputs,
)
from clirkit.multivector import BUILD_DEFAULTS

TOKENS = "tokens"  # prefix of the token files in an encode artifact
QUERY_TOKENS = "queries"


def token_files(prefix: str) -> list[str]:
    """The files of precomputed token vectors: ``PREFIX.tokens.npy``, ``PREFIX.offsets.npy`` and
    ``PREFIX.ids.txt``, as ``clirkit encode --multivector`` writes them."""
    from clirkit.encoders.tokens import token_paths

    return [os.fspath(p) for p in token_paths(prefix).values()]


def select_items(tokens: Any, offsets: Any, ids: list[str], keep: list[bool]) -> tuple[Any, Any, list[str]]:
    """The items of a token matrix whose ``keep`` is true, in order, copied at once (no per-item copy):
    a task's rows of precomputed query tokens (document tokens are never copied: see
    :func:`index_token_parts`)."""
    import numpy as np

    mask = np.asarray(keep, dtype=bool)
    lengths = np.diff(np.asarray(offsets, dtype=np.int64))
    rows = np.repeat(mask, lengths)
    kept = np.concatenate([[0], np.cumsum(lengths[mask])]).astype(np.uint64)
    return tokens[rows], kept, [i for i, k in zip(ids, keep) if k]


def index_token_parts(
    parts: list[tuple[Any, Any]], out: Path, options: dict[str, Any], ctx: RunContext
) -> None:
    """Index the items of ``parts`` (a token prefix, and a test of the ids kept, None for all) one part
    after another, as ``clirkit index multivector`` indexes its prefixes: the token files are read in
    place, the items kept given to the build by number, so no matrix is copied or concatenated."""
    from clirkit.dense.vectors import read_ids
    from clirkit.encoders.tokens import token_paths
    from clirkit.multivector import MultiVectorIndex

    items: list[list[int] | None] = []
    for prefix, wanted in parts:
        ids = None if wanted is None else read_ids(token_paths(prefix)["ids"])
        items.append(None if ids is None else [n for n, i in enumerate(ids) if wanted(i)])
    MultiVectorIndex.build_files(
        [prefix for prefix, _ in parts],
        out / "index",
        items=items,
        **{k: options.get(k, v) for k, v in BUILD_DEFAULTS.items()},
        threads=ctx.threads,
        quiet=ctx.quiet,
    )


#: ``clirkit search multivector``'s search options as keys (None: PLAID's budgets for k); the build
#: options are :data:`clirkit.multivector.BUILD_DEFAULTS`.
SEARCH_DEFAULTS: dict[str, Any] = {
    "ncells": None,
    "centroid_score_threshold": None,
    "ndocs": None,
    "rerank": None,
    "refine": False,
    "exact": False,
}


def read_index_options(r: Any, nbits: int) -> dict[str, Any]:
    """The build and search keys of a multi-vector system, checked as the CLI checks them."""
    threshold = r.get("centroid_score_threshold", (int, float))
    options = {
        "nbits": nbits,
        "centroids": r.positive("centroids"),
        "kmeans_sample": r.positive("kmeans_sample"),
        "kmeans_iterations": r.positive("kmeans_iterations", 4),
        "seed": r.positive("seed", 0, allow_zero=True),
        "keep_vectors": r.get("keep_vectors", bool, False),
        "ncells": r.positive("ncells"),
        "centroid_score_threshold": None if threshold is None else float(threshold),
        "ndocs": r.positive("ndocs"),
        "rerank": r.positive("rerank"),
        "refine": r.get("refine", bool, False),
        "exact": r.get("exact", bool, False),
    }
    for key in ("refine", "exact"):
        if options[key] and not options["keep_vectors"]:
            raise r.error(key, "needs the full vectors: set keep_vectors = true")
    return options


def build_key(options: dict[str, Any]) -> dict[str, Any]:
    """The index stage's key: ``nbits``, ``centroids`` and every other build option given another value
    than the default (an index built with the defaults keeps its key)."""
    return {
        "nbits": options["nbits"],
        "centroids": options["centroids"],
        **{
            k: options[k]
            for k, v in BUILD_DEFAULTS.items()
            if options.get(k, v) != v and k not in ("nbits", "centroids")
        },
    }


def search_options(options: dict[str, Any]) -> dict[str, Any]:
    """The search options given (the others keep the search's defaults)."""
    return {k: options[k] for k, v in SEARCH_DEFAULTS.items() if options.get(k, v) != v}


class MultiVectorKind:
    name = "multivector"
    options = (
        "model",
        "tokens",
        "query_tokens",
        "passages",
        "dtype",
        *BUILD_DEFAULTS,
        *SEARCH_DEFAULTS,
        *MODEL_SYSTEM_KEYS,
    )

    def validate(self, r: Any, base: str) -> dict[str, Any]:
        nbits = r.positive("nbits", 2)
        if nbits not in (1, 2, 4):
            raise r.error("nbits", "must be 1, 2 or 4")
        index_options = read_index_options(r, nbits)
        given = read_inputs(r, base, ("tokens", "query_tokens"), token_files, token_files, ENCODING_KEYS)
        if given is not None:
            return {**given, "passages": None, **index_options}
        return {**DenseKind.encoding_options(r, base), **index_options}

    def plan_search(self, plan: Plan, spec: Any, task: Any) -> Stage:
        options = spec.options
        if options["model"] is None:
            return self._plan_precomputed(plan, spec, task)
        model = model_identity(options["model"])
        encode_params = {**document_encode_params(model, options), "tokens": True}

        def encode(stage: Stage, out: Path, ctx: RunContext, path: str) -> None:
            from clirkit.encoders.tokens import encode_tokens_file, token_paths

            def written(prefix: Path) -> list[Path]:
                return list(token_paths(prefix).values())

            encode_documents_resumably(stage, out, ctx, options, path, TOKENS, encode_tokens_file, written)

        encodes, prefixes = document_encode_stages(
            plan,
            "multivector",
            task,
            options,
            model,
            ("encode-tokens", "encode tokens", encode_params),
            TOKENS,
            encode,
        )

        def build(stage: Stage, out: Path, ctx: RunContext) -> None:
            parts = []
            for source, encoded, prefix in zip(task.docs.sources, encodes, prefixes):
                wanted = None
                docs = kept_document_ids(source)
                if docs is not None:
                    doc_of = (lambda i: i.rsplit(SEPARATOR, 1)[0]) if options["passages"] else (lambda i: i)
                    wanted = lambda i, docs=docs, doc_of=doc_of: doc_of(i) in docs  # noqa: E731
                parts.append((encoded.output / prefix, wanted))
            index_token_parts(parts, out, options, ctx)

        index = add_index_stage(
            plan,
            "multivector-index",
            "multi-vector index",
            build_key(options),
            encodes,
            task,
            build,
        )

        def encode_queries(stage: Stage, out: Path, ctx: RunContext) -> None:
            import numpy as np

            from clirkit.encoders.tokens import TokenEncoder, token_paths

            if "multivector" in declared_families(options["model"]):
                encoder = head_query_encoder(ctx, options, "multivector", options["max_length"])
            else:
                encoder = TokenEncoder(dense_encoder(ctx, options))
            matrices = encode_task_queries(encoder, task, ctx)
            paths = token_paths(out / QUERY_TOKENS)
            np.save(paths["tokens"], np.concatenate(matrices))
            np.save(
                paths["offsets"],
                np.concatenate([[0], np.cumsum([len(m) for m in matrices])]).astype(np.int64),
            )
            paths["ids"].write_text("".join(q + "\n" for q, _, _ in task.queries), encoding="utf-8")

        queries = add_query_stage(
            plan, "encode-query-tokens", " per token", task, model, options, encode_queries
        )
        hits = options["hits"] or plan.config.hits
        maxp = options["passages"] is not None
        params = {
            "hits": hits,
            "maxp": maxp,
            "drop_self_hits": task.drop_self_hits,
            **search_options(options),
        }

        def search(stage: Stage, out: Path, ctx: RunContext) -> None:
            from clirkit.multivector import MultiVectorIndex, load_tokens

            opened = MultiVectorIndex.open(index.output / "index")
            tokens, offsets, qids = load_tokens(queries.output / QUERY_TOKENS)
            write_search_run(
                opened,
                (tokens, offsets, qids),
                out,
                hits,
                "clirkit-multivector",
                task,
                maxp=maxp,
                threads=ctx.threads,
                quiet=ctx.quiet,
                **search_options(options),
            )

        return plan.add(Stage("search", f"{spec.name} {task.label}", params, (index, queries), None, search))

    def _plan_precomputed(self, plan: Plan, spec: Any, task: Any) -> Stage:
        """The index of the task's items of precomputed token files and its search with the task's
        rows of precomputed query tokens: ``clirkit index multivector`` then ``clirkit search
        multivector`` on those files."""
        options = spec.options
        doc_parts = document_parts(plan, spec.name, "tokens", options["tokens"], task)
        identity: dict[str, Any] = {
            "tokens": input_identity([f for part in doc_parts for f in token_files(part.path)])
        }
        if any(part.wanted is not None for part in doc_parts):
            identity["docs"] = task.docs.identity()

        def build(stage: Stage, out: Path, ctx: RunContext) -> None:
            parts = [(p.path, None if p.wanted is None else p.wanted.__contains__) for p in doc_parts]
            index_token_parts(parts, out, options, ctx)

        index_params = build_key(options)
        label = f"multi-vector index {task.docs.describe()}"
        index = plan.add(Stage("multivector-index", label, index_params, (), identity, build))
        query_prefix = query_input(plan, spec.name, "query_tokens", options["query_tokens"], task)
        hits = options["hits"] or plan.config.hits
        params = {
            "hits": hits,
            "maxp": False,
            "drop_self_hits": task.drop_self_hits,
            **search_options(options),
        }
        query_identity = {
            "query_tokens": input_identity(token_files(query_prefix)),
            "queries": task.queries_digest,
        }

        def search(stage: Stage, out: Path, ctx: RunContext) -> None:
            from clirkit.multivector import MultiVectorIndex, load_tokens

            tokens, offsets, qids = load_tokens(query_prefix)
            rows = set(query_rows(qids, task, query_prefix))
            if len(rows) != len(qids):
                tokens, offsets, qids = select_items(
                    tokens, offsets, qids, [n in rows for n in range(len(qids))]
                )
            write_search_run(
                MultiVectorIndex.open(index.output / "index"),
                (tokens, offsets, qids),
                out,
                hits,
                "clirkit-multivector",
                task,
                maxp=False,
                threads=ctx.threads,
                quiet=ctx.quiet,
                **search_options(options),
            )

        return plan.add(
            Stage("search", f"{spec.name} {task.label}", params, (index,), query_identity, search)
        )


register_system_kind(MultiVectorKind())
