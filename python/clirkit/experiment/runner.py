"""``clirkit.Experiment``: load an experiment file, plan it, run what is not cached, and report."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Optional, TextIO

from clirkit._atomic import replace_symlink, write_text_atomic
from clirkit.experiment.config import ExperimentConfig, load_config
from clirkit.experiment.data import Task, build_tasks
from clirkit.experiment.plan import Plan, build_plan, node_order
from clirkit.experiment.results import (
    EXTERNAL,
    Results,
    average_rows,
    correlation_rows,
    external_rows,
    named_average_rows,
    read_external_scores,
    significance_rows,
)
from clirkit.experiment.stage import RUN_FILE, RunContext, Stage
from clirkit.experiment.stages import read_eval
from clirkit.experiment.store import WORKDIR_MARKER, ArtifactStore, claim_directory
from clirkit.experiment.systems.impact import audit_rows
from clirkit.experiment.toml_source import ExperimentError

RESULTS_FILE = "results.json"  # rows {system, task, measure, value}
REPORT_FILE = "report.json"  # everything the tables are made of
POSIR_FILES = ("positions.tsv", "posir.json", "posir.txt", "posir.png")


def default_workdir(path: str | os.PathLike) -> Path:
    """Beside the experiment file: ``NAME.toml`` works in ``NAME.work/``."""
    p = Path(path)
    return p.with_name(p.stem + ".work")


class Experiment:
    """An experiment file bound to a working directory.

    >>> exp = Experiment("examples/xquad-clir-neuclir.toml")  # doctest: +SKIP
    >>> exp.run().rows[:1]                                    # doctest: +SKIP
    [{'system': 'bm25', 'task': 'mono/zh', 'measure': 'ndcg_cut_20', 'value': 0.9665...}]
    >>> exp.dataframe()                                       # doctest: +SKIP
    """

    def __init__(
        self,
        path: str | os.PathLike,
        workdir: Optional[str | os.PathLike] = None,
        *,
        threads: Optional[int] = None,
        hits: Optional[int] = None,
        quiet: bool = False,
    ) -> None:
        config = load_config(path)
        overrides: dict[str, Any] = {}
        if threads is not None:
            overrides["threads"] = threads
        if hits is not None:
            overrides["hits"] = hits
        self.config: ExperimentConfig = dataclasses.replace(config, **overrides) if overrides else config
        self.workdir = Path(workdir) if workdir is not None else default_workdir(path)
        self.quiet = quiet
        self.store = ArtifactStore(self.config.store or self.workdir / "store")
        self.tasks: list[Task] = build_tasks(self.config)
        self._check_correlations()
        self.plan: Plan = build_plan(self.config, self.store, self.tasks)
        self.ran = 0
        self.reused = 0
        #: (stage kind, label, seconds) of every stage the last run computed
        self.timings: list[tuple[str, str, float]] = []
        self.results: Optional[Results] = None

    def _check_correlations(self) -> None:
        """Named averages and correlations name columns of this experiment: tasks, group averages,
        earlier named averages (and, for correlations, external scores); query-weighted averages and
        two-level groups name tasks."""
        tasks = {t.label for t in self.tasks}
        columns = set(tasks)
        for task in self.tasks:
            columns.update({f"{task.group}/avg", f"{task.group}/qavg"})
        ev = self.config.evaluation
        for spec in ev.named_averages:
            needs_tasks = bool(spec.groups) or spec.weighting == "query-weighted"
            members = [(("groups", g), c) for g, cs in spec.groups.items() for c in cs] if spec.groups else []
            members += [(("columns",), c) for c in spec.columns]
            for where, label in members:
                known = tasks if needs_tasks else columns
                if label not in known:
                    what = "a task" if needs_tasks else "a task or average column"
                    self._column_error(
                        ("evaluation", "average", spec.name, *where),
                        f"'{label}' is not {what}; columns: {', '.join(sorted(known))}",
                    )
            columns.add(spec.name)
        columns.update(ev.external)
        for i, pair in enumerate(ev.correlations):
            for label in pair:
                if label not in columns:
                    self._column_error(
                        ("evaluation", "correlations", i),
                        f"'{label}' is not a task, average or external column; columns: {', '.join(sorted(columns))}",
                    )

    def _column_error(self, key: tuple, message: str) -> None:
        source = self.config.source
        if source is None:
            raise ExperimentError(f"{self.config.path}: {'.'.join(map(str, key))}: {message}")
        raise source.error(key, message)

    # --- planning -----------------------------------------------------------------------------

    def plan_text(self) -> str:
        """What would run and what is cached, one stage per line, plus the counts."""
        lines = []
        # Kinds such as "sparse-encode-queries" are wider than the usual 12 columns.
        width = max([12, *(len(stage.kind) + 2 for stage in self.plan.stages)])
        for stage in self.plan.stages:
            state = "cached" if self.plan.cached(stage) else "run"
            lines.append(f"{state:<7}{stage.kind:<{width}}{stage.digest}  {stage.label}")
        cached, to_run = self.plan.counts()
        lines.append(f"{len(self.plan.stages)} stages: {cached} cached, {to_run} to run")
        return "\n".join(lines) + "\n"

    # --- running ------------------------------------------------------------------------------

    def run(self, log: Optional[TextIO] = None) -> Results:
        """Run every stage that is not cached, then assemble and write the tables."""
        log = log if log is not None else sys.stderr
        claim_directory(self.workdir, WORKDIR_MARKER, "workdir")
        self.store.claim()
        self.store.remove_stale()
        if self.config.store is None:  # the workdir's own store: no other experiment's work is in it
            self.store.remove_abandoned_partials({s.digest for s in self.plan.stages})
        threads = self.config.threads or (os.cpu_count() or 1)
        ctx = RunContext(self.config, self.store, threads, self.quiet)
        pending = [s for s in self.plan.stages if not self.plan.cached(s)]
        self.reused = len(self.plan.stages) - len(pending)
        self.ran = 0
        self.timings = []
        started = time.monotonic()
        print(
            f"experiment {self.config.name}: {len(self.plan.stages)} stages, {self.reused} cached, "
            f"{len(pending)} to run",
            file=log,
        )
        with ctx.exits:
            for i, stage in enumerate(pending, 1):
                self._run_stage(stage, f"[{i}/{len(pending)}]", ctx, log)
        results = self._assemble()
        self._write(results)
        print(
            f"experiment {self.config.name}: ran {self.ran} stages, reused {self.reused}, "
            f"{time.monotonic() - started:.1f} s; results in {self.workdir}",
            file=log,
        )
        self.results = results
        return results

    def _run_stage(self, stage: Stage, position: str, ctx: RunContext, log: TextIO) -> None:
        """Run ``stage`` under its lock unless a concurrent run of this experiment built it meanwhile."""
        t0 = time.monotonic()
        print(f"{position} {stage.kind} {stage.label} ...", file=log, flush=True)
        with self.store.stage_lock(stage.digest):
            if self.plan.cached(stage):
                print(f"{position} {stage.kind} {stage.label}: built by another run", file=log)
                return
            with self.store.building(stage.kind, stage.digest, stage.manifest()) as work:
                stage.action(stage, work, ctx)
        self.ran += 1
        self.timings.append((stage.kind, stage.label, time.monotonic() - t0))
        print(f"{position} {stage.kind} {stage.label}: {self.timings[-1][2]:.1f} s", file=log)

    def _assemble(self) -> Results:
        nodes = [n for n in node_order(self.config) if n in self.plan.evals]
        rows: list[dict[str, Any]] = []
        per_query: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
        query_counts: dict[tuple[str, str], int] = {}
        measure_names: dict[str, str] = {}
        measures_of: dict[str, list[str]] = {}
        for task in self.tasks:
            keys: list[str] = []
            for node in nodes:
                stage = self.plan.evals[node].get(task.label)
                if stage is None:
                    continue
                evaluation = read_eval(stage)
                keys = [k for spec in task.measures for k in evaluation["keys"][spec]]
                for spec in task.measures:
                    for k in evaluation["keys"][spec]:
                        measure_names.setdefault(k, spec if len(evaluation["keys"][spec]) == 1 else k)
                for k in keys:
                    rows.append(
                        {
                            "system": node,
                            "task": task.label,
                            "measure": k,
                            "value": float(evaluation["aggregate"][k]),
                        }
                    )
                per_query[(node, task.label)] = evaluation["per_query"]
                query_counts[(node, task.label)] = len(evaluation["per_query"])
            measures_of[task.label] = keys
        groups: dict[str, list[str]] = {}
        for task in self.tasks:
            groups.setdefault(task.group, []).append(task.label)
        averages, average_labels = average_rows(
            rows, nodes, groups, query_counts, self.config.evaluation.averages
        )
        columns: list[str] = []
        for group, labels in groups.items():
            columns.extend(labels)
            columns.extend(
                a for a in average_labels if a.startswith(f"{group}/") and a.rsplit("/", 1)[0] == group
            )
        ev = self.config.evaluation
        named, named_labels = named_average_rows(rows + averages, nodes, ev.named_averages, query_counts)
        columns.extend(named_labels)
        all_rows = rows + averages + named
        significance = []
        if ev.baseline is not None:
            significance = significance_rows(
                per_query,
                nodes,
                ev.baseline,
                [t.label for t in self.tasks],
                measures_of,
                ev.test,
                ev.correction,
                ev.alpha,
            )
        measures = list(dict.fromkeys(r["measure"] for r in rows))
        external = [
            row
            for name, spec in ev.external.items()
            for row in external_rows(name, read_external_scores(spec.file, spec.column), nodes)
        ]
        correlations = correlation_rows(
            all_rows + external,
            nodes,
            ev.correlations,
            measures + ([EXTERNAL] if external else []),
            per_query,
            ev.subsample,
        )
        # An approximate search's audit: rows of their own, after the averages, so nothing averages them.
        audits = audit_rows(self.plan.evals, nodes, self.tasks)
        measures.extend(dict.fromkeys(r["measure"] for r in audits))
        return Results(
            nodes,
            columns,
            measures,
            measure_names,
            all_rows + audits,
            significance,
            correlations,
            ev.baseline,
        )

    def _write(self, results: Results) -> None:
        w = self.workdir
        _write_json(w / RESULTS_FILE, results.rows)
        _write_json(w / REPORT_FILE, results.to_json())
        write_text_atomic(w / "table.md", results.markdown())
        write_text_atomic(w / "table.csv", results.csv())
        _write_json(w / "table.json", results.table_json())
        if results.significance:
            _write_json(w / "significance.json", results.significance)
        else:  # a table of the last run is never left beside another one's significance
            (w / "significance.json").unlink(missing_ok=True)
        self._link_runs()
        if self.config.posir is not None:
            self._posir()
        else:
            for name in POSIR_FILES:
                (w / name).unlink(missing_ok=True)

    def _link_runs(self) -> None:
        """``runs/NODE/TASK.trec``: links into the store, so the runs sit beside the tables. Links of
        nodes or tasks no longer in the file are removed (only links to ``*.trec``: what clirkit made)."""
        runs = self.workdir / "runs"
        wanted = set()
        for node, by_task in self.plan.runs.items():
            for label, stage in by_task.items():
                link = runs / node / f"{label}.trec"
                wanted.add(link)
                link.parent.mkdir(parents=True, exist_ok=True)
                target = os.path.relpath(stage.output / RUN_FILE, link.parent)
                replace_symlink(link, target)
        for directory, _subdirs, files in os.walk(runs, topdown=False):
            for name in files:
                path = Path(directory) / name
                if name.endswith(".trec") and path.is_symlink() and path not in wanted:
                    path.unlink()
            if Path(directory) != runs and not os.listdir(directory):
                os.rmdir(directory)

    def _posir(self) -> None:
        from clirkit.experiment import posir
        from clirkit.position import format_tables, plot

        spec = self.config.posir
        assert spec is not None
        positions = self.workdir / "positions.tsv"
        posir.convert_spans(
            spec.spans, spec.corpus, positions, spec.tokenizer if spec.length_unit == "tokens" else None
        )
        runs = {
            node: {label: str(stage.output / RUN_FILE) for label, stage in by_task.items()}
            for node, by_task in self.plan.runs.items()
        }
        languages = {
            t.label: posir.task_language(t, self.config.collections[t.collection]) for t in self.tasks
        }
        tables, details = posir.report(
            positions,
            runs,
            languages,
            spec.measure,
            spec.bins,
            spec.edges,
            spec.min_queries,
            spec.length_unit,
        )
        aggregated = [posir.table_record(t) for t in tables]
        _write_json(self.workdir / "posir.json", {"aggregated": aggregated, **details})
        write_text_atomic(
            self.workdir / "posir.txt",
            posir.format_languages(details, tables) + "\n" + format_tables(tables),
        )
        if spec.plot:
            try:
                plot(
                    tables,
                    self.workdir / "posir.png",
                    title=f"{self.config.name}: {spec.measure} by answer position",
                )
            except ImportError:
                print("clirkit: warning: no matplotlib, posir.png not drawn", file=sys.stderr)

    # --- results ------------------------------------------------------------------------------

    @property
    def rows(self) -> list[dict[str, Any]]:
        """``[{system, task, measure, value}]`` of the last run (or of the working directory)."""
        if self.results is None:
            self.results = load_results(self.workdir)
        return self.results.rows

    def dataframe(self) -> Any:
        """The rows as a ``pandas.DataFrame`` (pandas is imported only here)."""
        try:
            import pandas as pd
        except ImportError as err:  # pragma: no cover - depends on the environment
            raise ImportError("Experiment.dataframe needs pandas: pip install pandas") from err
        return pd.DataFrame.from_records(self.rows, columns=["system", "task", "measure", "value"])


def load_results(workdir: str | os.PathLike) -> Results:
    """The tables of a finished run in ``workdir``."""
    path = Path(workdir) / REPORT_FILE
    try:
        with open(path, encoding="utf-8") as f:
            return Results.from_json(json.load(f))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no results here; run `clirkit experiment run` first") from None
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as err:
        raise ExperimentError(
            f"{path}: not a report clirkit wrote ({type(err).__name__}: {err}); run `clirkit experiment run` again"
        ) from None


def _write_json(path: Path, data: Any) -> None:
    """A report's JSON file (indented, UTF-8 kept, a final newline), written whole."""
    write_text_atomic(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
