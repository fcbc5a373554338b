"""Results of an experiment: rows ``{system, task, measure, value}`` (task = a task label such as
``mono/zh``, or a group's average ``mono/avg``, query-weighted ``mono/qavg``), tables in Markdown,
CSV and JSON (one table per measure: a row per system, a column per task and average), significance
marks against a baseline (paired test per task and measure, corrected across systems) and rank
correlations between the orderings of systems on two columns."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from clirkit.experiment.correlation import kendall_tau, spearman

MARK = "\u2020"  # dagger: significantly different from the baseline


@dataclass
class Results:
    """Everything a table needs, JSON-serialisable through :meth:`to_json`."""

    systems: list[str]
    columns: list[str]  # task labels and average labels, in table order
    measures: list[str]  # measure keys in order
    measure_names: dict[str, str]  # key -> the name the experiment file used
    rows: list[dict[str, Any]]
    significance: list[dict[str, Any]] = field(default_factory=list)
    correlations: list[dict[str, Any]] = field(default_factory=list)
    baseline: Optional[str] = None

    def value(self, system: str, column: str, measure: str) -> Optional[float]:
        for row in self.rows:
            if row["system"] == system and row["task"] == column and row["measure"] == measure:
                return row["value"]
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "systems": self.systems,
            "columns": self.columns,
            "measures": self.measures,
            "measure_names": self.measure_names,
            "baseline": self.baseline,
            "rows": self.rows,
            "significance": self.significance,
            "correlations": self.correlations,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> Results:
        return Results(
            data["systems"],
            data["columns"],
            data["measures"],
            data["measure_names"],
            data["rows"],
            data.get("significance", []),
            data.get("correlations", []),
            data.get("baseline"),
        )

    def _marked(self) -> set[tuple[str, str, str]]:
        return {(s["system"], s["task"], s["measure"]) for s in self.significance if s["significant"]}

    def grid(self, measure: str) -> list[list[str]]:
        """Header plus one row per system, values to 4 places, '-' where absent."""
        columns = [
            c for c in self.columns if any(self.value(s, c, measure) is not None for s in self.systems)
        ]
        marked = self._marked()
        out = [["system", *columns]]
        for system in self.systems:
            cells = [system]
            for column in columns:
                v = self.value(system, column, measure)
                mark = MARK if (system, column, measure) in marked else ""
                cells.append("-" if v is None else f"{v + 0.0:.4f}{mark}")
            out.append(cells)
        return out

    def text(self) -> str:
        """Plain aligned tables, one per measure, then the correlations."""
        parts = []
        for measure in self.measures:
            grid = self.grid(measure)
            widths = [max(len(r[i]) for r in grid) for i in range(len(grid[0]))]
            parts.append(f"{self.measure_names.get(measure, measure)}")
            for r in grid:
                parts.append(
                    "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                )
            parts.append("")
        parts.extend(self._footnotes())
        return "\n".join(parts).rstrip("\n") + "\n"

    def _footnotes(self) -> list[str]:
        lines = []
        if self.baseline and any(s["significant"] for s in self.significance):
            lines.append(f"{MARK}: significantly different from {self.baseline} (see significance.json)")
        for c in self.correlations:
            lines.append(
                f"rank correlation {c['a']} vs {c['b']} ({self.measure_names.get(c['measure'], c['measure'])}, "
                f"{c['systems']} systems): Spearman rho {_num(c['spearman'])} (p {_num(c['spearman_p'])}), "
                f"Kendall tau {_num(c['kendall'])} (p {_num(c['kendall_p'])})"
            )
            sub = c.get("subsampled")
            if sub:
                lines.append(
                    f"  over {sub['samples']} samples of {sub['queries']} queries (seed {sub['seed']}): "
                    f"rho {_num(sub['spearman']['mean'])} ± {_num(sub['spearman']['std'])}, "
                    f"tau {_num(sub['kendall']['mean'])} ± {_num(sub['kendall']['std'])}"
                )
        return lines

    def markdown(self) -> str:
        parts = []
        for measure in self.measures:
            grid = self.grid(measure)
            parts.append(f"### {self.measure_names.get(measure, measure)}\n")
            parts.append("| " + " | ".join(grid[0]) + " |")
            parts.append("|" + "|".join(["---"] + ["---:"] * (len(grid[0]) - 1)) + "|")
            for r in grid[1:]:
                parts.append("| " + " | ".join(r) + " |")
            parts.append("")
        notes = self._footnotes()
        if notes:
            parts.extend(notes)
        return "\n".join(parts).rstrip("\n") + "\n"

    def csv(self) -> str:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["measure", "system", *self.columns])
        for measure in self.measures:
            for system in self.systems:
                values = [self.value(system, c, measure) for c in self.columns]
                writer.writerow([measure, system, *("" if v is None else repr(v) for v in values)])
        return buf.getvalue()

    def table_json(self) -> dict[str, Any]:
        """``{measure: {system: {column: value}}}``."""
        out: dict[str, Any] = {}
        for measure in self.measures:
            out[measure] = {
                s: {c: v for c in self.columns if (v := self.value(s, c, measure)) is not None}
                for s in self.systems
            }
        return out


def _num(x: Optional[float]) -> str:
    return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.4g}"


def average_rows(
    rows: list[dict[str, Any]],
    systems: Sequence[str],
    groups: dict[str, list[str]],
    query_counts: dict[tuple[str, str], int],
    averages: Sequence[str],
) -> tuple[list[dict[str, Any]], list[str]]:
    """Per system, group and measure: the macro average over the group's tasks (``GROUP/avg``) and
    the query-weighted one (``GROUP/qavg``), when the system has a value on every task of the group."""
    out, labels = [], []
    by_key = {(r["system"], r["task"], r["measure"]): r["value"] for r in rows}
    measures = list(dict.fromkeys(r["measure"] for r in rows))
    for group, tasks in groups.items():
        if len(tasks) < 2:
            continue
        for kind in averages:
            label = f"{group}/{'avg' if kind == 'macro' else 'qavg'}"
            added = False
            for system in systems:
                for measure in measures:
                    values = [by_key.get((system, t, measure)) for t in tasks]
                    if any(v is None for v in values):
                        continue
                    if kind == "macro":
                        value = sum(values) / len(values)  # type: ignore[arg-type]
                    else:
                        weights = [query_counts[(system, t)] for t in tasks]
                        total = sum(weights)
                        value = sum(v * w for v, w in zip(values, weights)) / total if total else 0.0  # type: ignore[operator]
                    out.append({"system": system, "task": label, "measure": measure, "value": value})
                    added = True
            if added:
                labels.append(label)
    return out, labels


def _weighted(values: Sequence[float], weights: Sequence[int]) -> float:
    total = sum(weights)
    return sum(v * w for v, w in zip(values, weights)) / total if total else 0.0


def named_average_rows(
    rows: list[dict[str, Any]],
    systems: Sequence[str],
    averages: Sequence[Any],
    query_counts: dict[tuple[str, str], int],
) -> tuple[list[dict[str, Any]], list[str]]:
    """The experiment's named averages (``[evaluation.average.NAME]``), in file order, per system and
    measure where the system has every column: over ``columns``, the macro average (any column, a
    group average or an earlier named average included) or the query-weighted one (task columns);
    over ``groups``, two levels: query-weighted within each group, then the macro average of the
    groups (PosIR's domains within a language, then languages). Returns the rows and the names."""
    out: list[dict[str, Any]] = []
    names: list[str] = []
    by_key = {(r["system"], r["task"], r["measure"]): r["value"] for r in rows}
    measures = list(dict.fromkeys(r["measure"] for r in rows))
    for spec in averages:
        parts = list(spec.groups.values()) if spec.groups else [spec.columns]
        added = False
        for system in systems:
            for measure in measures:
                levels = []
                for columns in parts:
                    values = [by_key.get((system, c, measure)) for c in columns]
                    if any(v is None for v in values):
                        break
                    if spec.groups or spec.weighting == "query-weighted":
                        levels.append(_weighted(values, [query_counts[(system, c)] for c in columns]))  # type: ignore[arg-type]
                    else:
                        levels.append(sum(values) / len(values))  # type: ignore[arg-type]
                else:
                    value = sum(levels) / len(levels)
                    row = {"system": system, "task": spec.name, "measure": measure, "value": value}
                    out.append(row)
                    by_key[(system, spec.name, measure)] = value
                    added = True
        if added:
            names.append(spec.name)
    return out, names


def read_external_scores(path: str, column: Optional[str]) -> dict[str, float]:
    """System -> score from a CSV (a header; systems in the column ``system``, or the first; scores in
    ``column``, else the column ``score``, else the first other column) or a JSON object (``{system: score}`` or ``{system: {column: score}}``).
    Errors name the file and the line or system."""
    from clirkit.experiment.toml_source import ExperimentError

    out: dict[str, float] = {}
    if path.endswith(".json"):
        import json

        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if not isinstance(data, dict):
            raise ExperimentError(f"{path}: must be a JSON object of system -> score")
        for system, value in data.items():
            if isinstance(value, dict):
                if column is None or column not in value:
                    raise ExperimentError(
                        f"{path}: system '{system}': no score '{column}' (name it with column)"
                    )
                value = value[column]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ExperimentError(f"{path}: system '{system}': score {value!r} is not a finite number")
            out[system] = float(value)
        return out
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header or len(header) < 2:
            raise ExperimentError(f"{path}:1: a header naming the system column and a score column is needed")
        name_col = header.index("system") if "system" in header else 0
        if column is None:
            score_col = header.index("score") if "score" in header else (1 if name_col == 0 else 0)
        elif column in header:
            score_col = header.index(column)
        else:
            raise ExperimentError(f"{path}:1: no column '{column}' (columns: {', '.join(header)})")
        for number, fields in enumerate(reader, 2):
            if not fields:
                continue
            try:
                value = float(fields[score_col])
            except (ValueError, IndexError):
                raise ExperimentError(f"{path}:{number}: score is not a number") from None
            if not math.isfinite(value):
                raise ExperimentError(f"{path}:{number}: score {value} is not finite")
            if fields[name_col] in out:
                raise ExperimentError(f"{path}:{number}: system '{fields[name_col]}' appears twice")
            out[fields[name_col]] = value
    return out


EXTERNAL = "external"  # the measure name of external scores' rows


def external_rows(name: str, scores: dict[str, float], systems: Sequence[str]) -> list[dict[str, Any]]:
    """Rows of an external column (measure ``external``) for the systems of the experiment."""
    return [
        {"system": s, "task": name, "measure": EXTERNAL, "value": scores[s]} for s in systems if s in scores
    ]


def significance_rows(
    per_query: dict[tuple[str, str], dict[str, dict[str, float]]],
    systems: Sequence[str],
    baseline: str,
    tasks: Sequence[str],
    measures_of: dict[str, list[str]],
    test: str,
    correction: str,
    alpha: float,
) -> list[dict[str, Any]]:
    """Paired tests of every system against ``baseline`` per task and measure; queries are the
    union of those evaluated for the compared systems, a missing one scoring 0 (trec_eval -c)."""
    from clirkit.significance import adjust_p_values, paired_t_test, randomization_test

    out = []
    for task in tasks:
        base = per_query.get((baseline, task))
        if base is None:
            continue
        others = [s for s in systems if s != baseline and (s, task) in per_query]
        for measure in measures_of[task]:
            tests = []
            for system in others:
                values = per_query[(system, task)]
                qids = sorted(set(base) | set(values))
                a = [base.get(q, {}).get(measure, 0.0) for q in qids]
                b = [values.get(q, {}).get(measure, 0.0) for q in qids]
                if len(qids) < 2:
                    continue
                result = paired_t_test(a, b) if test == "t" else randomization_test(a, b)
                tests.append((system, result))
            if not tests:
                continue
            adjusted = adjust_p_values([r.p_value for _, r in tests], correction)
            for (system, result), p_adj in zip(tests, adjusted):
                out.append(
                    {
                        "system": system,
                        "baseline": baseline,
                        "task": task,
                        "measure": measure,
                        "difference": result.mean_difference,
                        "p": result.p_value,
                        "p_adjusted": p_adj,
                        "significant": p_adj < alpha,
                        "test": test,
                        "correction": correction,
                    }
                )
    return out


def correlation_rows(
    rows: list[dict[str, Any]],
    systems: Sequence[str],
    pairs: Sequence[tuple[str, str]],
    measures: Sequence[str],
    per_query: Optional[dict[tuple[str, str], dict[str, dict[str, float]]]] = None,
    subsample: Optional[Any] = None,
) -> list[dict[str, Any]]:
    """Spearman and Kendall between the systems' values on two columns, per shared measure (columns
    without one, such as an external column, are compared on their first measures). With
    ``subsample`` (samples, queries, seed) and a task as the first column, each correlation is also
    computed ``samples`` times with the first column's value recomputed over a seeded random sample of
    ``queries`` of its queries (AIR-Bench's Fig. 3), reported as mean, spread and range of rho and tau."""
    by_key = {(r["system"], r["task"], r["measure"]): r["value"] for r in rows}
    out = []
    for a, b in pairs:
        measures_a = [m for m in measures if any((s, a, m) in by_key for s in systems)]
        measures_b = [m for m in measures if any((s, b, m) in by_key for s in systems)]
        common = [m for m in measures_a if m in measures_b]
        # Columns scored differently (e.g. nDCG@10 for QA, Recall@10 for long documents) are compared
        # on their first measures.
        compared = [(m, m) for m in common] or (
            [(measures_a[0], measures_b[0])] if measures_a and measures_b else []
        )
        for measure_a, measure_b in compared:
            shared = [s for s in systems if (s, a, measure_a) in by_key and (s, b, measure_b) in by_key]
            if len(shared) < 3:
                continue
            x = [by_key[(s, a, measure_a)] for s in shared]
            y = [by_key[(s, b, measure_b)] for s in shared]
            rho, tau = spearman(x, y), kendall_tau(x, y)
            row = {
                "a": a,
                "b": b,
                "measure": measure_a if measure_a == measure_b else f"{measure_a} vs {measure_b}",
                "systems": len(shared),
                "spearman": _finite(rho.statistic),
                "spearman_p": _finite(rho.pvalue),
                "kendall": _finite(tau.statistic),
                "kendall_p": _finite(tau.pvalue),
            }
            if subsample is not None and per_query is not None and all((s, a) in per_query for s in shared):
                row["subsampled"] = subsampled_correlation(
                    [per_query[(s, a)] for s in shared], measure_a, y, subsample
                )
            out.append(row)
    return out


def subsampled_correlation(
    per_query: Sequence[dict[str, dict[str, float]]], measure: str, y: Sequence[float], subsample: Any
) -> dict[str, Any]:
    """Spearman's rho and Kendall's tau of each system's mean ``measure`` over ``subsample.samples``
    seeded random samples of ``subsample.queries`` queries (without replacement, from the union of the
    systems' queries in sorted order, a query a system did not return scoring 0) against ``y``: mean,
    sample standard deviation, minimum and maximum of each."""
    import random
    import statistics

    qids = sorted(set().union(*per_query))
    if subsample.queries > len(qids):
        from clirkit.experiment.toml_source import ExperimentError

        raise ExperimentError(f"subsample: {subsample.queries} queries asked, the column has {len(qids)}")
    rng = random.Random(subsample.seed)
    rhos, taus = [], []
    for _ in range(subsample.samples):
        chosen = rng.sample(qids, subsample.queries)
        x = [sum(values.get(q, {}).get(measure, 0.0) for q in chosen) / len(chosen) for values in per_query]
        rhos.append(spearman(x, y).statistic)
        taus.append(kendall_tau(x, y).statistic)

    def spread(values: list[float]) -> dict[str, Optional[float]]:
        finite = [v for v in values if not math.isnan(v)]
        return {
            "mean": statistics.fmean(finite) if finite else None,
            "std": statistics.stdev(finite) if len(finite) > 1 else None,
            "min": min(finite) if finite else None,
            "max": max(finite) if finite else None,
        }

    return {
        "samples": subsample.samples,
        "queries": subsample.queries,
        "seed": subsample.seed,
        "spearman": spread(rhos),
        "kendall": spread(taus),
    }


def _finite(x: float) -> Optional[float]:
    return None if math.isnan(x) else x
