"""``kind = "bm25"``: clirkit's Lucene-equal BM25. One index per document set (shared by every
BM25 system over those documents, whatever their k1 and b; systems with ``rm3 = true`` share one
with document vectors), one search per task. ``rm3 = true`` expands each query with RM3
(Anserini's defaults; ``fb_docs``, ``fb_terms``, ``original_weight`` and ``filter_terms = false``,
the CLI's ``--no-term-filter``, change them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clirkit.experiment.plan import Plan
from clirkit.experiment.stage import RUN_FILE, RunContext, Stage
from clirkit.experiment.stages import warn_empty_documents
from clirkit.experiment.systems import register_system_kind

#: ``clirkit index bm25 --memory-mb``'s default.
MEMORY_MB = 1024


def drop_self_hits(hits: list[tuple[str, float]], qid: str, k: int) -> list[tuple[str, float]]:
    """BEIR's convention (ArguAna): a document whose id is the query's id is not a hit."""
    return [h for h in hits if h[0] != qid][:k]


class Bm25Kind:
    name = "bm25"
    options = (
        "k1",
        "b",
        "fields",
        "hits",
        "memory_mb",
        "keep_first_duplicate",
        "rm3",
        "fb_docs",
        "fb_terms",
        "original_weight",
        "filter_terms",
    )

    def validate(self, r: Any, base: str) -> dict[str, Any]:
        from clirkit.bm25 import RM3

        k1 = r.get("k1", (int, float), 0.9)
        b = r.get("b", (int, float), 0.4)
        if not 0.0 <= k1 < float("inf"):  # NaN fails both comparisons
            raise r.error("k1", f"must be a finite number >= 0, got {k1}")
        if not 0.0 <= b <= 1.0:
            raise r.error("b", f"must be in [0, 1], got {b}")
        rm3 = None
        if r.get("rm3", bool, False):
            weight = float(r.get("original_weight", (int, float), RM3.original_weight))
            if not 0.0 <= weight <= 1.0:
                raise r.error("original_weight", f"must be in [0, 1], got {weight}")
            rm3 = {
                "fb_docs": r.positive("fb_docs", RM3.fb_docs),
                "fb_terms": r.positive("fb_terms", RM3.fb_terms),
                "original_weight": weight,
            }
            # clirkit search bm25 --no-term-filter; in the key only when changed, as the CLI's default
            if not r.get("filter_terms", bool, RM3.filter_terms):
                rm3["filter_terms"] = False
        else:
            for key in ("fb_docs", "fb_terms", "original_weight", "filter_terms"):
                if key in r.table:
                    raise r.error(key, "is an RM3 option; set rm3 = true")
        return {
            "k1": float(k1),
            "b": float(b),
            "fields": list(r.strings("fields", ("title", "text"))),
            "hits": r.positive("hits"),
            # clirkit index bm25 --memory-mb: postings held before spilling (the index's manifest
            # records it, so it is in the index stage's key when set)
            "memory_mb": r.positive("memory_mb", MEMORY_MB),
            # clirkit index bm25 --keep-first-duplicate: a repeated id is skipped instead of an error
            "keep_first_duplicate": r.get("keep_first_duplicate", bool, False),
            "rm3": rm3,
        }

    def plan_search(self, plan: Plan, spec: Any, task: Any) -> Stage:
        options = spec.options
        docs_path, lang, lang_field = plan.docs_file(task.docs)
        docs_stage = plan.docs(task.docs)
        fields = options["fields"]
        rm3 = options["rm3"]
        # Only RM3 needs document vectors: plain BM25 systems keep their index (and its digest).
        index_params: dict[str, Any] = {"fields": fields}
        if rm3 is not None:
            index_params["docvectors"] = True
        # In the key only when changed from the CLI's defaults, so indexes keep theirs.
        if options["memory_mb"] != MEMORY_MB:
            index_params["memory_mb"] = options["memory_mb"]
        if options["keep_first_duplicate"]:
            index_params["keep_first_duplicate"] = True

        def build(stage: Stage, out: Path, ctx: RunContext) -> None:
            from clirkit.bm25 import BM25Index

            warn_empty_documents(docs_path, fields, spec.name)
            BM25Index.build(
                docs_path,
                out / "index",
                lang=lang,
                lang_field=lang_field,
                fields=fields,
                threads=ctx.threads,
                quiet=ctx.quiet,
                memory_budget_mb=options["memory_mb"],
                keep_first_duplicate=options["keep_first_duplicate"],
                store_docvectors=rm3 is not None,
            )

        index = plan.add(
            Stage(
                "bm25-index",
                f"bm25 index {task.docs.describe()}",
                index_params,
                () if docs_stage is None else (docs_stage,),
                task.docs.identity() if docs_stage is None else None,
                build,
            )
        )
        hits = options["hits"] or plan.config.hits
        params = {"k1": options["k1"], "b": options["b"], "hits": hits, "drop_self_hits": task.drop_self_hits}
        if rm3 is not None:
            params["rm3"] = rm3

        def search(stage: Stage, out: Path, ctx: RunContext) -> None:
            from clirkit.bm25 import RM3, BM25Index
            from clirkit.runs import write_run

            opened = BM25Index.open(index.output / "index")
            k = hits + 1 if task.drop_self_hits else hits
            results = opened.batch_search(
                list(task.queries),
                k,
                threads=ctx.threads,
                k1=options["k1"],
                b=options["b"],
                quiet=ctx.quiet,
                rm3=None if rm3 is None else RM3(**rm3),
            )
            if task.drop_self_hits:
                run = {q: dict(drop_self_hits(results[q], q, hits)) for q in results.qids()}
                write_run(out / RUN_FILE, run, "clirkit-bm25")
            else:
                results.to_trec(out / RUN_FILE)

        return plan.add(
            Stage(
                "search",
                f"{spec.name} {task.label}",
                params,
                (index,),
                {"queries": task.queries_digest},
                search,
            )
        )


register_system_kind(Bm25Kind())
