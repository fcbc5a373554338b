"""``kind = "impact"``: learned-sparse retrieval, a SPLADE-family ONNX model with clirkit's impact index.

Each documents file is encoded once per model and settings (resumably); a task's index holds the vectors
of its documents (a language's subset, or several files together), quantized with ``quantize`` (default
100), and its search encodes the task's queries with the same model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clirkit.experiment.data import iter_documents
from clirkit.experiment.plan import Plan
from clirkit.experiment.stage import RUN_FILE, RunContext, Stage, model_identity
from clirkit.experiment.systems import register_system_kind
from clirkit.experiment.systems.bm25 import drop_self_hits
from clirkit.experiment.systems.dense import add_index_stage, add_query_stage, cached_encoder, encoder_options
from clirkit.experiment.systems.heads import declared_families, head_query_encoder, heads_encode_stage
from clirkit.experiment.systems.instructions import INSTRUCTION_KEYS, encoder_instructions, role_instructions

VECTORS = "vectors"  # prefix of vectors.vectors.jsonl in an encode artifact
QUERY_VECTORS = "queries.json"


def _encoder(ctx: RunContext, options: dict[str, Any]):
    from clirkit.encoders import SparseEncoder

    return cached_encoder(ctx, "sparse-encoder", SparseEncoder, options, ctx.threads or 0)


class ImpactKind:
    name = "impact"
    options = (
        "model",
        "quantize",
        "max_length",
        "query_max_length",
        "batch_size",
        "fields",
        "hits",
        *INSTRUCTION_KEYS,
    )

    def validate(self, r: Any, base: str) -> dict[str, Any]:
        return {
            **encoder_options(r, base, 8),
            "quantize": r.positive("quantize", 100),
            "query_max_length": r.positive("query_max_length"),
        }

    def plan_search(self, plan: Plan, spec: Any, task: Any) -> Stage:
        options = spec.options
        model = model_identity(options["model"])
        encode_params = {
            "model": model,
            "fields": options["fields"],
            "max_length": options["max_length"],
            **role_instructions(options, "passage"),
        }
        encodes, prefixes = [], []
        for source in task.docs.sources:
            shared = heads_encode_stage(plan, "sparse", source, {**options, "passages": None}, model)
            if shared is not None:
                encodes.append(shared[0])
                prefixes.append(shared[1])
                continue

            def encode(stage: Stage, out: Path, ctx: RunContext, path: str = source.path) -> None:
                from clirkit.encoders import encode_sparse_file

                prefix = ctx.store.partial(stage.digest) / VECTORS
                done = encode_sparse_file(
                    _encoder(ctx, options), path, prefix, fields=options["fields"], quiet=ctx.quiet
                ).vectors_path
                done.rename(out / done.name)

            label = f"sparse-encode {Path(source.path).parent.name}/{Path(source.path).name}"
            identity = {"file": source.identity()["file"]}
            encodes.append(plan.add(Stage("sparse-encode", label, encode_params, (), identity, encode)))
            prefixes.append(VECTORS)

        def build(stage: Stage, out: Path, ctx: RunContext) -> None:
            from clirkit.impact import ImpactIndex

            vectors = out / "docs.vectors.jsonl"
            with open(vectors, "w", encoding="utf-8") as joined:
                for source, encoded, prefix in zip(task.docs.sources, encodes, prefixes):
                    wanted = None
                    if source.lang_filter is not None:
                        wanted = {doc_id for doc_id, *_ in iter_documents(source)}
                    with open(encoded.output / f"{prefix}.vectors.jsonl", encoding="utf-8") as part:
                        for line in part:
                            if wanted is None or str(json.loads(line)["id"]) in wanted:
                                joined.write(line)
            ImpactIndex.build(
                vectors, out / "index", quantize=options["quantize"], threads=ctx.threads, quiet=ctx.quiet
            )
            vectors.unlink()

        index = add_index_stage(
            plan, "impact-index", "impact index", {"quantize": options["quantize"]}, encodes, task, build
        )

        def encode_queries(stage: Stage, out: Path, ctx: RunContext) -> None:
            from clirkit.encoders import SparseEncoder

            if "sparse" in declared_families(options["model"]):
                encoder = head_query_encoder(ctx, options, "sparse", options["query_max_length"])
            else:
                encoder = SparseEncoder(
                    options["model"],
                    max_length=options["query_max_length"],
                    batch_size=options["batch_size"],
                    threads=ctx.threads or 0,
                    **encoder_instructions(options),
                )
            vectors = encoder.encode_queries([text for _, text, _ in task.queries])
            qids = [q for q, _, _ in task.queries]
            (out / QUERY_VECTORS).write_text(json.dumps(list(zip(qids, vectors))), encoding="utf-8")

        queries = add_query_stage(
            plan,
            "sparse-encode-queries",
            "",
            task,
            model,
            options,
            encode_queries,
            verb="sparse-encode",
            max_length_option="query_max_length",
        )
        hits = options["hits"] or plan.config.hits
        params = {"hits": hits, "drop_self_hits": task.drop_self_hits}

        def search(stage: Stage, out: Path, ctx: RunContext) -> None:
            from clirkit.impact import ImpactIndex
            from clirkit.runs import write_run

            opened = ImpactIndex.open(index.output / "index")
            vectors = [
                (q, v) for q, v in json.loads((queries.output / QUERY_VECTORS).read_text(encoding="utf-8"))
            ]
            # A query none of whose terms is weighted (an empty vector) finds nothing.
            vectors = [(q, v) for q, v in vectors if v]
            k = hits + 1 if task.drop_self_hits else hits
            results = opened.batch_search(vectors, k, threads=ctx.threads, quiet=ctx.quiet)
            if task.drop_self_hits:
                run = {q: dict(drop_self_hits(results[q], q, hits)) for q in results.qids()}
                write_run(out / RUN_FILE, run, "clirkit-impact")
            else:
                results.to_trec(out / RUN_FILE)

        return plan.add(Stage("search", f"{spec.name} {task.label}", params, (index, queries), None, search))


register_system_kind(ImpactKind())
