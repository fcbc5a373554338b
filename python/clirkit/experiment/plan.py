"""The plan: every stage an experiment needs (:class:`~clirkit.experiment.stage.Stage`, identified by
a digest of its kind, its own parameters and its inputs' identities, with the clirkit version and the
stage format). Two tasks or experiments needing the same stage get the same digest, hence one artifact;
changing a parameter changes the digest of that stage and of everything downstream only."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from clirkit.bm25 import CorpusFile
from clirkit.experiment import stages as st
from clirkit.experiment.config import ExperimentConfig
from clirkit.experiment.data import Corpus, DocSet, Task, file_identity
from clirkit.experiment.stage import Stage
from clirkit.experiment.store import ArtifactStore
from clirkit.experiment.systems import system_kind


class Plan:
    """Stages in dependency order (inputs first), shared by digest; ``runs[node][task]`` is the
    stage producing that node's run on that task and ``evals[node][task]`` its evaluation."""

    def __init__(self, config: ExperimentConfig, store: ArtifactStore, tasks: list[Task]) -> None:
        self.config = config
        self.store = store
        self.tasks = tasks
        self.stages: list[Stage] = []
        self._by_digest: dict[str, Stage] = {}
        self.runs: dict[str, dict[str, Stage]] = {}
        self.evals: dict[str, dict[str, Stage]] = {}
        self.qrels_paths: dict[str, Path] = {}
        # What system kinds work out once per plan when they plan stages shared across systems
        # (e.g. :mod:`.systems.heads`: which systems read one multi-head encoding), by topic.
        self.shared: dict[str, Any] = {}

    def add(self, stage: Stage) -> Stage:
        """Add ``stage`` unless an identical one is planned; return the planned one."""
        existing = self._by_digest.get(stage.digest)
        if existing is not None:
            return existing
        stage.output = self.store.path(stage.kind, stage.digest)
        self._by_digest[stage.digest] = stage
        self.stages.append(stage)
        return stage

    def cached(self, stage: Stage) -> bool:
        return self.store.has(stage.kind, stage.digest)

    def docs(self, docs: DocSet) -> Optional[Stage]:
        """The stage writing a task's documents to one file, or None when the sources are read in
        place (:attr:`DocSet.in_place`)."""
        if docs.in_place:
            return None
        return self.add(
            Stage("docs", f"documents {docs.describe()}", {}, (), docs.identity(), st.write_documents(docs))
        )

    def docs_file(self, docs: DocSet) -> tuple[Corpus, Optional[str], Optional[str]]:
        """(corpus, fixed analyzer language, per-document language field) for ``docs``: the source
        file, several read in sequence (each with its language rule), or the written copy."""
        stage = self.docs(docs)
        if stage is not None:
            return stage.output / "corpus.jsonl", None, "lang"
        if docs.direct:
            source = docs.sources[0]
            return Path(source.path), source.fixed_lang, None if source.fixed_lang else source.lang_field
        files = [CorpusFile(s.path, s.fixed_lang, s.default_lang) for s in docs.sources]
        return files, None, docs.language_field

    def qrels_file(self, task: Task) -> tuple[Path, Optional[Stage]]:
        if not task.filter_qrels:
            return Path(task.qrels), None
        docs_stage = self.docs(task.docs)
        inputs = (docs_stage,) if docs_stage is not None else ()
        stage = self.add(
            Stage(
                "qrels",
                f"qrels {task.label}",
                {},
                inputs,
                {
                    "qrels": file_identity(task.qrels),
                    "queries": task.queries_digest,
                    "docs": task.docs.identity(),
                },
                st.write_qrels(task),
            )
        )
        return stage.output / "qrels.trec", stage

    def counts(self) -> tuple[int, int]:
        """(stages cached, stages to run)."""
        cached = sum(1 for s in self.stages if self.cached(s))
        return cached, len(self.stages) - cached


def node_order(config: ExperimentConfig) -> list[str]:
    """Systems, then fusion and rerank nodes after their inputs."""
    order: list[str] = list(config.systems)
    done = set(order)
    pending = [*config.fusion, *config.rerank]
    while pending:
        for name in pending:
            inputs = config.fusion[name].inputs if name in config.fusion else (config.rerank[name].input,)
            if all(i in done for i in inputs):
                order.append(name)
                done.add(name)
                pending.remove(name)
                break
        else:  # pragma: no cover - cycles are rejected when the file is read
            raise AssertionError(f"unresolvable nodes {pending}")
    return order


def build_plan(config: ExperimentConfig, store: ArtifactStore, tasks: list[Task]) -> Plan:
    """Every stage needed for every node on every task it applies to."""
    plan = Plan(config, store, tasks)
    for task in tasks:
        qrels_path, qrels_stage = plan.qrels_file(task)
        plan.qrels_paths[task.label] = qrels_path
        for name in node_order(config):
            run: Optional[Stage] = None
            if name in config.systems:
                spec = config.systems[name]
                if spec.settings and task.setting not in spec.settings:
                    continue
                run = system_kind(spec.kind).plan_search(plan, spec, task)
            elif name in config.fusion:
                fusion = config.fusion[name]
                inputs = [plan.runs.get(i, {}).get(task.label) for i in fusion.inputs]
                if any(i is None for i in inputs):
                    continue
                run = plan.add(st.fuse_stage(fusion, task, tuple(i for i in inputs if i is not None)))
            else:
                spec_r = config.rerank[name]
                source = plan.runs.get(spec_r.input, {}).get(task.label)
                if source is None:
                    continue
                docs_path, _, _ = plan.docs_file(task.docs)
                docs_stage = plan.docs(task.docs)
                seeds = st.reusable_embeddings(plan.stages, spec_r, task)
                run = plan.add(st.rerank_stage(spec_r, task, source, docs_path, docs_stage, seeds))
            plan.runs.setdefault(name, {})[task.label] = run
            evaluation = st.eval_stage(task, run, qrels_path, qrels_stage)
            plan.evals.setdefault(name, {})[task.label] = plan.add(evaluation)
    return plan
