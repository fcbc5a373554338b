"""``kind = "impact"``: learned-sparse retrieval, a SPLADE-family ONNX model with clirkit's impact index.

Each documents file is encoded once per model and settings (resumably); a task's index holds the vectors
of its documents (a language's subset, or several files together), quantized with ``quantize`` (default
100), and its search encodes the task's queries with the same model.

Search is exact unless the system has an ``approximate = { ... }`` table (``postings_per_term``,
``query_terms``, ``candidates``, ``target_accuracy``, ``calibration_sample``, ``audit``, ``seed``: the
options of ``clirkit search impact --approximate``), which is part of the search stage's key. With
``audit = N`` the search stage writes ``audit.json`` beside its run (with the calibration when a target is
set: the sample's Accuracy@10 and its 95% lower bound), and the experiment's results carry its Accuracy@10
and score gap; a calibration is logged on stderr (even when quiet if its bound falls short of the target).
With ``shards = N`` the index is the sharded one of ``clirkit index impact --shards N`` over the task's
vectors (built and searched in threads here, or on a Ray cluster with ``ray``:
:mod:`clirkit.distributed.impact`), whose exact run is the single index's."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Optional

from clirkit.datasets import ID_FIELDS, is_compressed, record_id
from clirkit.experiment.config.reader import NUMBER, TableReader
from clirkit.experiment.plan import Plan
from clirkit.experiment.stage import RUN_FILE, RunContext, Stage, model_identity
from clirkit.experiment.systems import register_system_kind
from clirkit.experiment.systems.bm25 import drop_self_hits
from clirkit.experiment.systems.dense import (
    add_index_stage,
    add_query_stage,
    cached_encoder,
    document_encode_stages,
    encode_task_queries,
    encoder_options,
    kept_document_ids,
    ray_cluster,
    read_shard_options,
)
from clirkit.experiment.systems.heads import declared_families, head_query_encoder
from clirkit.experiment.systems.instructions import INSTRUCTION_KEYS, encoder_instructions, role_instructions
from clirkit.experiment.systems.precomputed import (
    document_parts,
    input_identity,
    query_input,
    query_rows,
    read_inputs,
)
from clirkit.experiment.toml_source import ExperimentError

VECTORS = "vectors"  # prefix of vectors.vectors.jsonl in an encode artifact
QUERY_VECTORS = "queries.json"
AUDIT_FILE = "audit.json"  # an approximate search's audit, beside its run
APPROXIMATE_KEYS = (
    "postings_per_term",
    "query_terms",
    "candidates",
    "target_accuracy",
    "calibration_sample",
    "audit",
    "seed",
)


def approximate_options(r: Any) -> Optional[dict[str, Any]]:
    """The ``approximate`` table of an impact system, checked (None: exact search)."""
    from clirkit.impact import DEFAULT_CANDIDATES, DEFAULT_POSTINGS_PER_TERM

    table = r.get("approximate", dict)
    if table is None:
        return None
    a = TableReader(r.source, (*r.path, "approximate"), table, APPROXIMATE_KEYS)
    target = a.get("target_accuracy", NUMBER)
    if target is not None and not 0 < target <= 1:
        raise a.error("target_accuracy", f"must be in (0, 1], got {target}")
    return {
        "postings_per_term": a.positive("postings_per_term", DEFAULT_POSTINGS_PER_TERM, allow_zero=True),
        "query_terms": a.positive("query_terms", 0, allow_zero=True),
        "candidates": a.positive("candidates", DEFAULT_CANDIDATES),
        "target_accuracy": None if target is None else float(target),
        "calibration_sample": a.positive("calibration_sample", 50),
        "audit": a.positive("audit"),
        "seed": a.positive("seed", 0, allow_zero=True),
    }


#: The measures an audited approximate search adds to the experiment's results (not averaged).
AUDIT_MEASURES = {"audit Accuracy@10": "accuracy_at_10", "audit score gap": "score_gap"}


def audit_rows(
    evals: dict[str, dict[str, Stage]], nodes: list[str], tasks: list[Any]
) -> list[dict[str, Any]]:
    """Result rows (system, task, measure, value) of every audited approximate search among the runs
    that ``evals`` (node -> task label -> eval stage, whose first input is the run) evaluated."""
    rows = []
    for task in tasks:
        for node in nodes:
            stage = evals[node].get(task.label)
            audit = None if stage is None else read_audit(stage.inputs[0])
            if audit is not None:
                for measure, field in AUDIT_MEASURES.items():
                    rows.append(
                        {"system": node, "task": task.label, "measure": measure, "value": audit[field]}
                    )
    return rows


def read_audit(run_stage: Stage) -> Optional[dict[str, Any]]:
    """The audit an approximate search stage wrote beside its run, if any."""
    path = run_stage.output / AUDIT_FILE
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def _encoder(ctx: RunContext, options: dict[str, Any]):
    from clirkit.encoders import SparseEncoder

    return cached_encoder(ctx, "sparse-encoder", SparseEncoder, options, ctx.threads or 0)


def write_kept_vectors(path: str, out: Path, keep: Any) -> Path:
    """The lines of the vectors file ``path`` (read through the one input layer: gzip or zstd, a
    byte-order mark skipped) whose document id passes ``keep``, written unchanged to ``out``."""
    from clirkit.datasets import BOM, open_input

    with open_input(path) as lines, open(out, "wb") as kept:
        for number, raw in enumerate(lines, 1):
            if number == 1:
                raw = raw.removeprefix(BOM)
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except ValueError as err:
                raise ExperimentError(f"{path}:{number}: not a JSON object ({err})") from None
            if not isinstance(record, dict):
                raise ExperimentError(f"{path}:{number}: not a JSON object")
            if keep(record_id(path, number, record, ID_FIELDS)):
                kept.write(raw if raw.endswith(b"\n") else raw + b"\n")
    return out


def build_impact(parts: list[tuple[str, Any]], out: Path, options: dict[str, Any], ctx: RunContext) -> None:
    """Index the documents of ``parts`` (a vectors file, and the test a kept id passes, None for all)
    one file after another, as ``clirkit index impact`` indexes a file; only a part that keeps some of
    its documents is written (to ``out``, deleted once indexed), the others are read in place. With
    ``shards`` the index is ``clirkit index impact --shards N [--ray]``'s over one plain file: the one
    part read in place when it is whole and plain, else the parts' kept lines written as one file."""
    from clirkit.impact import ImpactIndex

    if options.get("shards") is not None:
        from clirkit.distributed.impact import build_sharded_impact

        if len(parts) == 1 and parts[0][1] is None and not is_compressed(parts[0][0]):
            whole, written = Path(parts[0][0]), None
        else:
            whole = written = out / "documents.vectors.jsonl"
            with open(whole, "wb") as joined:
                for n, (path, keep) in enumerate(parts):
                    kept = write_kept_vectors(path, out / f"part-{n}.vectors.jsonl", keep or (lambda _: True))
                    with open(kept, "rb") as part:
                        shutil.copyfileobj(part, joined)
                    kept.unlink()
        ray_cluster(options, ctx)
        build_sharded_impact(
            whole,
            out / "index",
            options["shards"],
            quantize=options["quantize"],
            memory_budget_mb=options["memory_mb"],
            threads=ctx.threads,
            quiet=ctx.quiet,
            ray=options["ray"],
        )
        if written is not None:
            written.unlink()
        return
    files, written_parts = [], []
    for n, (path, keep) in enumerate(parts):
        if keep is None:
            files.append(path)
        else:
            written_parts.append(write_kept_vectors(path, out / f"part-{n}.vectors.jsonl", keep))
            files.append(os.fspath(written_parts[-1]))
    ImpactIndex.build(
        files,
        out / "index",
        quantize=options["quantize"],
        memory_budget_mb=options["memory_mb"],
        threads=ctx.threads,
        quiet=ctx.quiet,
    )
    for path in written_parts:
        path.unlink()


def write_impact_run(results: Any, rows: list[int], out: Path, hits: int, task: Any) -> None:
    """The task's run from the results of a whole queries file: as searched when the task asks every
    query of it, else its queries' results (``rows``), without self hits when the task drops them."""
    from clirkit._native import write_run_pairs

    qids = results.qids()
    if len(rows) == len(qids) and not task.drop_self_hits:
        results.to_trec(out / RUN_FILE)
        return
    run = []
    for n in rows:  # in the file's order, as the CLI writes them
        q = qids[n]
        run.append((q, drop_self_hits(results[q], q, hits) if task.drop_self_hits else results[q]))
    write_run_pairs(out / RUN_FILE, run, "clirkit-impact")


#: Keys that only apply to encoding with a model.
ENCODING_KEYS = ("max_length", "query_max_length", "batch_size", "fields", *INSTRUCTION_KEYS)


class ImpactKind:
    name = "impact"
    options = (
        "model",
        "vectors",
        "query_vectors",
        "quantize",
        "max_length",
        "query_max_length",
        "batch_size",
        "fields",
        "hits",
        "approximate",
        "memory_mb",
        "shards",
        "ray",
        *INSTRUCTION_KEYS,
    )

    def validate(self, r: Any, base: str) -> dict[str, Any]:
        # clirkit index impact --memory-mb: postings held before spilling (the files are the same for any)
        build = {"quantize": r.positive("quantize", 100), "memory_mb": r.positive("memory_mb", 1024)}
        # clirkit index impact --shards N [--ray], clirkit search impact [--ray]
        build.update(read_shard_options(r))
        approximate = approximate_options(r)
        if approximate is not None and approximate["target_accuracy"] is not None and build["shards"]:
            raise r.error(
                "approximate",
                "target_accuracy is not available on a sharded index (as clirkit search impact refuses it): "
                "give query_terms and candidates",
            )
        given = read_inputs(r, base, ("vectors", "query_vectors"), _one, _one, ENCODING_KEYS)
        if given is not None:
            return {**given, **build, "approximate": approximate}
        return {
            **encoder_options(r, base, 8),
            **build,
            "query_max_length": r.positive("query_max_length"),
            "approximate": approximate,
        }

    def plan_search(self, plan: Plan, spec: Any, task: Any) -> Stage:
        options = spec.options
        if options["model"] is None:
            return self._plan_precomputed(plan, spec, task)
        model = model_identity(options["model"])
        encode_params = {
            "model": model,
            "fields": options["fields"],
            "max_length": options["max_length"],
            **role_instructions(options, "passage"),
        }

        def encode(stage: Stage, out: Path, ctx: RunContext, path: str) -> None:
            from clirkit.encoders import encode_sparse_file

            prefix = ctx.store.partial(stage.digest) / VECTORS
            done = encode_sparse_file(
                _encoder(ctx, options), path, prefix, fields=options["fields"], quiet=ctx.quiet
            ).vectors_path
            done.rename(out / done.name)

        encodes, prefixes = document_encode_stages(
            plan,
            "sparse",
            task,
            {**options, "passages": None},
            model,
            ("sparse-encode", "sparse-encode", encode_params),
            VECTORS,
            encode,
        )

        def build(stage: Stage, out: Path, ctx: RunContext) -> None:
            parts = []
            for source, encoded, prefix in zip(task.docs.sources, encodes, prefixes):
                kept = kept_document_ids(source)
                keep = None if kept is None else kept.__contains__
                parts.append((os.fspath(encoded.output / f"{prefix}.vectors.jsonl"), keep))
            build_impact(parts, out, options, ctx)

        index = add_index_stage(
            plan, "impact-index", "impact index", index_key(options), encodes, task, build
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
            vectors = encode_task_queries(encoder, task, ctx)
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
        approximate = options["approximate"]
        if approximate is not None:  # exact searches keep their keys
            params["approximate"] = approximate

        def search(stage: Stage, out: Path, ctx: RunContext) -> None:
            from clirkit.impact import ImpactIndex
            from clirkit.runs import write_run

            vectors = [
                (q, v) for q, v in json.loads((queries.output / QUERY_VECTORS).read_text(encoding="utf-8"))
            ]
            # A query none of whose terms is weighted (an empty vector) finds nothing.
            vectors = [(q, v) for q, v in vectors if v]
            k = hits + 1 if task.drop_self_hits else hits
            if options["shards"] is not None:
                results: Any = search_sharded(index.output / "index", vectors, k, options, out, ctx)
            elif approximate is None:
                opened = ImpactIndex.open(index.output / "index")
                results = opened.batch_search(vectors, k, threads=ctx.threads, quiet=ctx.quiet)
            else:
                opened = ImpactIndex.open(index.output / "index")
                results = _search_approximate(opened, vectors, k, approximate, out, ctx)
            if task.drop_self_hits:
                run = {q: dict(drop_self_hits(results[q], q, hits)) for q in results.qids()}
                write_run(out / RUN_FILE, run, "clirkit-impact")
            else:
                results.to_trec(out / RUN_FILE)

        return plan.add(Stage("search", f"{spec.name} {task.label}", params, (index, queries), None, search))

    def _plan_precomputed(self, plan: Plan, spec: Any, task: Any) -> Stage:
        """The index of the task's documents of precomputed vectors files (read in place) and its
        search with the task's queries of a precomputed query vectors file: ``clirkit index impact``
        then ``clirkit search impact`` on those files."""
        options = spec.options
        doc_parts = document_parts(plan, spec.name, "vectors", options["vectors"], task)
        identity: dict[str, Any] = {"vectors": input_identity([p.path for p in doc_parts])}
        if any(p.wanted is not None for p in doc_parts):
            identity["docs"] = task.docs.identity()

        def build(stage: Stage, out: Path, ctx: RunContext) -> None:
            parts = [(p.path, None if p.wanted is None else p.wanted.__contains__) for p in doc_parts]
            build_impact(parts, out, options, ctx)

        label = f"impact index {task.docs.describe()}"
        index = plan.add(Stage("impact-index", label, index_key(options), (), identity, build))
        query_path = query_input(plan, spec.name, "query_vectors", options["query_vectors"], task)
        hits = options["hits"] or plan.config.hits
        params = {"hits": hits, "drop_self_hits": task.drop_self_hits}
        approximate = options["approximate"]
        if approximate is not None:  # exact searches keep their keys
            params["approximate"] = approximate
        query_identity = {"query_vectors": input_identity([query_path]), "queries": task.queries_digest}

        def search(stage: Stage, out: Path, ctx: RunContext) -> None:
            from clirkit.impact import ImpactIndex

            k = hits + 1 if task.drop_self_hits else hits
            if options["shards"] is not None:
                results: Any = search_sharded(index.output / "index", query_path, k, options, out, ctx)
            elif approximate is None:
                opened = ImpactIndex.open(index.output / "index")
                results = opened.search_file(query_path, k, threads=ctx.threads, quiet=ctx.quiet)
            else:
                opened = ImpactIndex.open(index.output / "index")
                results = _search_approximate(opened, query_path, k, approximate, out, ctx)
            write_impact_run(results, query_rows(results.qids(), task, query_path), out, hits, task)

        return plan.add(
            Stage("search", f"{spec.name} {task.label}", params, (index,), query_identity, search)
        )


def _one(path: str) -> list[str]:
    return [path]


def index_key(options: dict[str, Any]) -> dict[str, Any]:
    """What an impact index stage depends on: ``quantize``, and ``shards`` when given (a sharded index
    is another directory, even of one shard; where it is built, here or on Ray, changes nothing)."""
    key: dict[str, Any] = {"quantize": options["quantize"]}
    if options.get("shards") is not None:
        key["shards"] = options["shards"]
    return key


class MergedRun:
    """A sharded search's run (``{qid: [(docid, score), ...]}`` in query order) with what the run
    writers of this module read of a single index's results: ``qids()``, ``run[qid]``, ``to_trec``."""

    def __init__(self, hits: dict[str, list[tuple[str, float]]]) -> None:
        self.hits = hits

    def qids(self) -> list[str]:
        return list(self.hits)

    def __getitem__(self, qid: str) -> list[tuple[str, float]]:
        return self.hits[qid]

    def to_trec(self, path: Path) -> None:
        from clirkit._native import write_run_pairs

        write_run_pairs(path, list(self.hits.items()), "clirkit-impact")


def search_sharded(
    index_dir: Path, queries: Any, k: int, options: dict[str, Any], out: Path, ctx: RunContext
):
    """The queries (``(qid, vector)`` pairs or a query vectors file) searched on the sharded index at
    ``index_dir`` as ``clirkit search impact`` searches it: through its shards in threads, or through
    shard actors on the Ray cluster ``ray`` names; approximate and audited when the system asks."""
    from clirkit._atomic import write_json_atomic
    from clirkit.distributed.impact import Pruning, ShardedImpactIndex
    from clirkit.impact import ApproximateSettings

    approximate = options["approximate"]
    pruning = None
    if approximate is not None:
        settings = ApproximateSettings(
            query_terms=approximate["query_terms"], candidates=approximate["candidates"]
        )
        pruning = Pruning(settings, approximate["postings_per_term"])
    ray_cluster(options, ctx)
    placement = {"threads": ctx.threads, "quiet": ctx.quiet, "ray": options["ray"] is not None}
    with ShardedImpactIndex.open(index_dir, **placement) as sharded:
        results = MergedRun(sharded.batch_search(queries, k, pruning=pruning))
        if pruning is not None and approximate["audit"] is not None and results.hits:
            report = sharded.audit(
                queries, approximate["audit"], seed=approximate["seed"], k=k, pruning=pruning
            )
            write_json_atomic(out / AUDIT_FILE, report.to_dict())
    return results


def _search_approximate(
    index: Any, vectors: Any, k: int, options: dict[str, Any], out: Path, ctx: RunContext
):
    """An approximate search of ``vectors`` (``(qid, vector)`` pairs or a query vectors file), calibrated
    when a target is set, audited when asked."""
    from clirkit._atomic import write_json_atomic
    from clirkit.impact import ApproximateSettings

    approx = index.approximate(postings_per_term=options["postings_per_term"], threads=ctx.threads)
    settings = ApproximateSettings(query_terms=options["query_terms"], candidates=options["candidates"])
    calibration = None
    if options["target_accuracy"] is not None and vectors:
        calibration = approx.calibrate(
            vectors,
            options["target_accuracy"],
            sample=options["calibration_sample"],
            seed=options["seed"],
            k=k,
            threads=ctx.threads,
        )
        settings = calibration.settings
        if not ctx.quiet or not calibration.reached:
            print(f"clirkit: {calibration.summary()}", file=sys.stderr)
    results = approx.batch_search(vectors, k, settings=settings, threads=ctx.threads, quiet=ctx.quiet)
    if options["audit"] is not None and vectors:
        report = approx.audit(
            vectors, options["audit"], seed=options["seed"], k=k, settings=settings, threads=ctx.threads
        )
        calibrated = None if calibration is None else calibration.to_dict()
        write_json_atomic(out / AUDIT_FILE, {**report.to_dict(), "calibration": calibrated})
    return results


register_system_kind(ImpactKind())
