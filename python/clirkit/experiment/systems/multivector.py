"""``kind = "multivector"``: per-token ONNX vectors with clirkit's PLAID-style late-interaction index.

Each documents file is encoded once per model and settings into token files
(:mod:`clirkit.encoders.tokens`); a task's index holds the items of its documents (a language's
subset, or several files together), and its search encodes the task's queries per token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clirkit.experiment.data import iter_documents
from clirkit.experiment.plan import Plan
from clirkit.experiment.stage import RunContext, Stage, model_identity
from clirkit.experiment.systems import register_system_kind
from clirkit.experiment.systems.dense import (
    SEPARATOR,
    DenseKind,
    add_index_stage,
    add_query_stage,
    dense_encoder,
    document_encode_params,
    encode_documents_resumably,
    write_search_run,
)
from clirkit.experiment.systems.heads import declared_families, head_query_encoder, heads_encode_stage

TOKENS = "tokens"  # prefix of the token files in an encode artifact
QUERY_TOKENS = "queries"


class MultiVectorKind:
    name = "multivector"
    options = ("model", "passages", "nbits", "centroids", "max_length", "batch_size", "fields", "hits")

    def validate(self, r: Any, base: str) -> dict[str, Any]:
        options = DenseKind().validate(r, base)
        del options["pq"]
        nbits = r.positive("nbits", 2)
        if nbits not in (1, 2, 4):
            raise r.error("nbits", "must be 1, 2 or 4")
        return {**options, "nbits": nbits, "centroids": r.positive("centroids")}

    def plan_search(self, plan: Plan, spec: Any, task: Any) -> Stage:
        options = spec.options
        model = model_identity(options["model"])
        encode_params = {**document_encode_params(model, options), "tokens": True}
        encodes, prefixes = [], []
        for source in task.docs.sources:
            shared = heads_encode_stage(plan, "multivector", source, options, model)
            if shared is not None:
                encodes.append(shared[0])
                prefixes.append(shared[1])
                continue

            def encode(stage: Stage, out: Path, ctx: RunContext, path: str = source.path) -> None:
                from clirkit.encoders.tokens import encode_tokens_file, token_paths

                def written(prefix: Path) -> list[Path]:
                    return list(token_paths(prefix).values())

                encode_documents_resumably(
                    stage, out, ctx, options, path, TOKENS, encode_tokens_file, written
                )

            label = f"encode tokens {Path(source.path).parent.name}/{Path(source.path).name}"
            identity = {"file": source.identity()["file"]}
            encodes.append(plan.add(Stage("encode-tokens", label, encode_params, (), identity, encode)))
            prefixes.append(TOKENS)

        def build(stage: Stage, out: Path, ctx: RunContext) -> None:
            import numpy as np

            from clirkit.multivector import MultiVectorIndex, load_tokens

            parts, lengths, all_ids = [], [], []
            for source, encoded, prefix in zip(task.docs.sources, encodes, prefixes):
                tokens, offsets, ids = load_tokens(encoded.output / prefix)
                keep = range(len(ids))
                if source.lang_filter is not None:
                    wanted = {doc_id for doc_id, *_ in iter_documents(source)}
                    doc_of = (lambda i: i.rsplit(SEPARATOR, 1)[0]) if options["passages"] else (lambda i: i)
                    keep = [n for n, i in enumerate(ids) if doc_of(i) in wanted]
                for n in keep:
                    parts.append(np.asarray(tokens[offsets[n] : offsets[n + 1]]))
                    lengths.append(int(offsets[n + 1] - offsets[n]))
                    all_ids.append(ids[n])
            offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.uint64)
            MultiVectorIndex.build(
                np.concatenate(parts),
                offsets,
                all_ids,
                out / "index",
                nbits=options["nbits"],
                centroids=options["centroids"],
                threads=ctx.threads,
            )

        index = add_index_stage(
            plan,
            "multivector-index",
            "multi-vector index",
            {"nbits": options["nbits"], "centroids": options["centroids"]},
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
            matrices = encoder.encode_queries([text for _, text, _ in task.queries])
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
        params = {"hits": hits, "maxp": maxp, "drop_self_hits": task.drop_self_hits}

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
            )

        return plan.add(Stage("search", f"{spec.name} {task.label}", params, (index, queries), None, search))


register_system_kind(MultiVectorKind())
