"""``kind = "dense"``: an ONNX bi-encoder with clirkit's dense index (flat, or PQ with ``pq = M``).

Each documents file is encoded once per model and settings (resumably: a killed encoding continues
where it stopped); a task's index holds the rows of its documents (a language's subset, or several
files together), and its search encodes the task's queries."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Callable

from clirkit.experiment.data import iter_documents
from clirkit.experiment.plan import Plan
from clirkit.experiment.stage import RUN_FILE, RunContext, Stage, model_identity
from clirkit.experiment.stages import warn_empty_documents
from clirkit.experiment.systems import register_system_kind
from clirkit.experiment.systems.bm25 import drop_self_hits
from clirkit.experiment.systems.heads import declared_families, head_query_encoder, heads_encode_stage

EMBEDDINGS = "embeddings"  # prefix of embeddings.npy + embeddings.ids.txt in an encode artifact
QUERY_EMBEDDINGS = "queries.npy"
SEPARATOR = "#"


def cached_encoder(ctx: RunContext, name: str, encoder_class: Any, options: dict[str, Any], threads: Any):
    """One ``encoder_class`` per model and settings for the whole run (loading a model is slow)."""
    key = (name, options["model"], options["max_length"], options["batch_size"])
    return ctx.cached(
        key,
        lambda: encoder_class(
            options["model"],
            max_length=options["max_length"],
            batch_size=options["batch_size"],
            threads=threads,
        ),
    )


def dense_encoder(ctx: RunContext, options: dict[str, Any]):
    from clirkit.encoders import OnnxEncoder

    return cached_encoder(ctx, "encoder", OnnxEncoder, options, ctx.threads or None)


def encode_documents_resumably(
    stage: Stage,
    out: Path,
    ctx: RunContext,
    options: dict[str, Any],
    path: str,
    name: str,
    encode_file: Callable[..., Any],
    written: Callable[[Path], Iterable[Path]],
) -> None:
    """Encode the documents at ``path`` with ``encode_file(encoder, path, prefix, ...)`` (a resumable
    encoding: :mod:`clirkit.encoders.corpus`) under the prefix ``name`` in the store's partial directory
    of ``stage``, which outlives a killed run so that the next one continues it, then move the files
    ``written(prefix)`` into ``out``."""
    warn_empty_documents(Path(path), options["fields"], stage.label)
    prefix = ctx.store.partial(stage.digest) / name
    passages = tuple(options["passages"]) if options["passages"] else None
    encode_file(
        dense_encoder(ctx, options),
        path,
        prefix,
        fields=options["fields"],
        passages=passages,
        quiet=ctx.quiet,
    )
    for done in written(prefix):
        done.rename(out / done.name)


def document_encode_params(model: Any, options: dict[str, Any]) -> dict[str, Any]:
    """What an encoding of a documents file depends on (dense and multi-vector alike)."""
    return {
        "model": model,
        "fields": options["fields"],
        "passages": options["passages"],
        "max_length": options["max_length"],
    }


def add_index_stage(
    plan: Plan, name: str, what: str, params: dict[str, Any], encodes: list[Stage], task: Any, build: Any
) -> Stage:
    """The stage indexing a task's documents from their encodings (keyed by the documents)."""
    return plan.add(
        Stage(name, f"{what} {task.docs.describe()}", params, tuple(encodes), task.docs.identity(), build)
    )


def add_query_stage(
    plan: Plan,
    name: str,
    suffix: str,
    task: Any,
    model: Any,
    options: dict[str, Any],
    encode: Any,
    *,
    verb: str = "encode",
    max_length_option: str = "max_length",
) -> Stage:
    # Keyed by model and queries only: tasks asking the same questions (e.g. English topics
    # against each language) share this stage.
    return plan.add(
        Stage(
            name,
            f"{verb} {len(task.queries)} queries of {task.label}{suffix}",
            {"model": model, "max_length": options[max_length_option]},
            (),
            {"queries": task.queries_digest},
            encode,
        )
    )


def write_search_run(
    index: Any,
    queries: tuple[Any, ...],
    out: Path,
    hits: int,
    tag: str,
    task: Any,
    *,
    maxp: bool,
    threads: int,
) -> None:
    """Searches ``index`` (dense or multi-vector: both take ``queries`` then ``qids`` last) and
    writes the task's run; dropping self hits asks for one hit more so each query keeps ``hits``."""
    if task.drop_self_hits:
        from clirkit.runs import write_run

        found = index.search_run(*queries, hits + 1, maxp=maxp, threads=threads)
        run = {q: dict(drop_self_hits(list(found[q].items()), q, hits)) for q in found}
        write_run(out / RUN_FILE, run, tag)
    else:
        index.search_trec(*queries, out / RUN_FILE, hits, maxp=maxp, threads=threads)


def encoder_options(r: Any, base: str, batch_size: int) -> dict[str, Any]:
    """The options every system that encodes its documents with an ONNX model takes."""
    return {
        "model": r.file("model", base, directory=True),
        "max_length": r.positive("max_length"),
        "batch_size": r.positive("batch_size", batch_size),
        "fields": list(r.strings("fields", ("title", "text"))),
        "hits": r.positive("hits"),
    }


class DenseKind:
    name = "dense"
    options = ("model", "passages", "pq", "max_length", "batch_size", "fields", "hits")

    def validate(self, r: Any, base: str) -> dict[str, Any]:
        passages = r.get("passages", list)
        if passages is not None and (
            len(passages) != 2 or not all(isinstance(p, int) and p > 0 for p in passages)
        ):
            raise r.error("passages", "must be [size, stride] in tokens")
        return {**encoder_options(r, base, 32), "passages": passages, "pq": r.positive("pq")}

    def plan_search(self, plan: Plan, spec: Any, task: Any) -> Stage:
        options = spec.options
        model = model_identity(options["model"])
        encode_params = document_encode_params(model, options)
        encodes, prefixes = [], []
        for source in task.docs.sources:
            shared = heads_encode_stage(plan, "dense", source, options, model)
            if shared is not None:
                encodes.append(shared[0])
                prefixes.append(shared[1])
                continue

            def encode(stage: Stage, out: Path, ctx: RunContext, path: str = source.path) -> None:
                from clirkit.encoders.corpus import encode_file, output_paths

                def written(prefix: Path) -> list[Path]:
                    return [output_paths(prefix)[kind] for kind in ("npy", "ids")]

                encode_documents_resumably(stage, out, ctx, options, path, EMBEDDINGS, encode_file, written)

            label = f"encode {Path(source.path).parent.name}/{Path(source.path).name}"
            identity = {"file": source.identity()["file"]}
            encodes.append(plan.add(Stage("encode", label, encode_params, (), identity, encode)))
            prefixes.append(EMBEDDINGS)

        def build(stage: Stage, out: Path, ctx: RunContext) -> None:
            import numpy as np

            from clirkit.dense import DenseIndex
            from clirkit.encoders.corpus import load_embeddings

            matrices, all_ids = [], []
            for source, encoded, prefix in zip(task.docs.sources, encodes, prefixes):
                matrix, ids = load_embeddings(encoded.output / prefix)
                if source.lang_filter is not None:
                    wanted = {doc_id for doc_id, *_ in iter_documents(source)}
                    doc_of = (lambda i: i.rsplit(SEPARATOR, 1)[0]) if options["passages"] else (lambda i: i)
                    rows = [n for n, i in enumerate(ids) if doc_of(i) in wanted]
                    matrix, ids = matrix[rows], [ids[n] for n in rows]
                matrices.append(np.asarray(matrix))
                all_ids.extend(ids)
            embeddings = matrices[0] if len(matrices) == 1 else np.concatenate(matrices)
            index = DenseIndex.build(
                embeddings, all_ids, pq=options["pq"], threads=ctx.threads, quiet=ctx.quiet
            )
            index.save(out / "index")

        index = add_index_stage(
            plan, "dense-index", "dense index", {"pq": options["pq"]}, encodes, task, build
        )

        def encode_queries(stage: Stage, out: Path, ctx: RunContext) -> None:
            import numpy as np

            encoder = (
                head_query_encoder(ctx, options, "dense", options["max_length"])
                if "dense" in declared_families(options["model"])
                else dense_encoder(ctx, options)
            )
            vectors = encoder.encode_queries([text for _, text, _ in task.queries])
            np.save(out / QUERY_EMBEDDINGS, vectors)

        queries = add_query_stage(plan, "encode-queries", "", task, model, options, encode_queries)
        hits = options["hits"] or plan.config.hits
        params = {
            "hits": hits,
            "maxp": options["passages"] is not None,
            "drop_self_hits": task.drop_self_hits,
        }

        def search(stage: Stage, out: Path, ctx: RunContext) -> None:
            import numpy as np

            from clirkit.dense import DenseIndex

            opened = DenseIndex.open(index.output / "index")
            qids = [q for q, _, _ in task.queries]
            vectors = np.load(queries.output / QUERY_EMBEDDINGS)
            maxp = options["passages"] is not None
            write_search_run(
                opened, (vectors, qids), out, hits, "clirkit-dense", task, maxp=maxp, threads=ctx.threads
            )

        return plan.add(Stage("search", f"{spec.name} {task.label}", params, (index, queries), None, search))


register_system_kind(DenseKind())
