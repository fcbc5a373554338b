"""``kind = "run"``: a system that reads an existing TREC run instead of searching (NeuCLIRBench ships
its fusion run as the starting point for reranking). ``run = PATH`` serves an experiment with one
task; ``runs = { "<task label>" = PATH, ... }`` gives one file per task. The run is copied into the
store byte for byte, so fusion, reranking and evaluation read exactly the file given; its stage is
identified by the file's content identity (:func:`~clirkit.experiment.data.file_identity`), as corpora
and qrels are."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from clirkit.experiment.data import file_identity
from clirkit.experiment.plan import Plan
from clirkit.experiment.stage import RUN_FILE, RunContext, Stage
from clirkit.experiment.systems import register_system_kind, system_error


class RunKind:
    name = "run"
    options = ("run", "runs")

    def validate(self, r: Any, base: str) -> dict[str, Any]:
        if ("run" in r.table) == ("runs" in r.table):
            raise r.source.error(
                r.path, 'needs exactly one of run = PATH or runs = { "<task label>" = PATH, ... }'
            )
        if "run" in r.table:
            return {"run": r.file("run", base), "runs": None}
        runs = r.file_map("runs", base)
        if not runs:
            raise r.error("runs", 'must name at least one task: runs = { "<task label>" = PATH }')
        return {"run": None, "runs": runs}

    def plan_search(self, plan: Plan, spec: Any, task: Any) -> Stage:
        path = self._path(plan, spec, task)

        def copy(stage: Stage, out: Path, ctx: RunContext) -> None:
            from clirkit.runs import read_run

            read_run(path)  # a malformed line is an error naming the file and line, here
            shutil.copyfile(path, out / RUN_FILE)

        return plan.add(Stage("run", f"{spec.name} {task.label}", {}, (), {"run": file_identity(path)}, copy))

    @staticmethod
    def _path(plan: Plan, spec: Any, task: Any) -> str:
        """The file serving ``task``; an error at the system's key when none or an unknown label is named."""
        applies = [t.label for t in plan.tasks if not spec.settings or t.setting in spec.settings]

        def error(key: tuple, message: str) -> Exception:
            return system_error(plan, spec.name, key, message)

        if spec.options["run"] is not None:
            if len(applies) != 1:
                raise error(
                    ("run",),
                    f"run = PATH serves an experiment with one task; this system runs on {len(applies)} "
                    f'({", ".join(applies)}): name one file per task with runs = {{ "<task label>" = PATH }}',
                )
            return spec.options["run"]
        runs = spec.options["runs"]
        unknown = sorted(set(runs) - set(applies))
        if unknown:
            raise error(
                ("runs", unknown[0]),
                f"'{unknown[0]}' is not a task of this system; tasks: {', '.join(applies)}",
            )
        if task.label not in runs:
            raise error(("runs",), f"no run for task '{task.label}'; tasks: {', '.join(applies)}")
        return runs[task.label]


register_system_kind(RunKind())
