"""``kind = "bm25"``: clirkit's Lucene-equal BM25. One index per document set (shared by every
BM25 system over those documents, whatever their k1 and b), one search per task."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clirkit.experiment.plan import Plan, RunContext, Stage
from clirkit.experiment.stages import RUN_FILE
from clirkit.experiment.systems import register_system_kind


def drop_self_hits(hits: list[tuple[str, float]], qid: str, k: int) -> list[tuple[str, float]]:
    """BEIR's convention (ArguAna): a document whose id is the query's id is not a hit."""
    return [h for h in hits if h[0] != qid][:k]


class Bm25Kind:
    name = "bm25"
    options = ("k1", "b", "fields", "hits")

    def validate(self, r: Any, base: str) -> dict[str, Any]:
        k1 = r.get("k1", (int, float), 0.9)
        b = r.get("b", (int, float), 0.4)
        return {
            "k1": float(k1),
            "b": float(b),
            "fields": list(r.strings("fields", ("title", "text"))),
            "hits": r.positive("hits"),
        }

    def plan_search(self, plan: Plan, spec: Any, task: Any) -> Stage:
        options = spec.options
        docs_path, lang, lang_field = plan.docs_file(task.docs)
        docs_stage = plan.docs(task.docs)
        fields = options["fields"]

        def build(stage: Stage, out: Path, ctx: RunContext) -> None:
            from clirkit.bm25 import BM25Index

            BM25Index.build(
                docs_path,
                out / "index",
                lang=lang,
                lang_field=lang_field,
                fields=fields,
                threads=ctx.threads,
                quiet=ctx.quiet,
            )

        index = plan.add(
            Stage(
                "bm25-index",
                f"bm25 index {task.docs.describe()}",
                {"fields": fields},
                () if docs_stage is None else (docs_stage,),
                task.docs.identity() if docs_stage is None else None,
                build,
            )
        )
        hits = options["hits"] or plan.config.hits
        params = {"k1": options["k1"], "b": options["b"], "hits": hits, "drop_self_hits": task.drop_self_hits}

        def search(stage: Stage, out: Path, ctx: RunContext) -> None:
            from clirkit.bm25 import BM25Index
            from clirkit.runs import write_run

            opened = BM25Index.open(index.output / "index")
            k = hits + 1 if task.drop_self_hits else hits
            results = opened.batch_search(
                list(task.queries), k, threads=ctx.threads, k1=options["k1"], b=options["b"], quiet=ctx.quiet
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
