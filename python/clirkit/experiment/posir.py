"""PosIR-style position reports over an experiment's runs.

:func:`convert_spans` turns span-annotated qrels (``query-id``, ``corpus-id``, ``span_start``,
``span_end``; other columns ignored) plus the corpus into clirkit's position file
(:mod:`clirkit.position`), the document length counted from the corpus in characters and, given a
``tokenizer.json``, in tokens. :func:`report` computes, per system, the mean measure per relative
position bin and the PSI per document-length bucket on every task, then aggregates them as PosIR
does: within a group (a language) the tasks are weighted by their queries, across groups the macro
average is taken."""

from __future__ import annotations

import csv
import json
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from clirkit._atomic import atomic_text_output
from clirkit.experiment.toml_source import ExperimentError
from clirkit.position import BucketTable, PositionTable, position_bias

SPAN_COLUMNS = ("query-id", "corpus-id", "span_start", "span_end")


def convert_spans(
    spans: str | os.PathLike,
    corpus: str | os.PathLike,
    output: str | os.PathLike,
    tokenizer: Optional[str | os.PathLike] = None,
) -> int:
    """Write the position file for ``spans`` (TSV with a header) and ``corpus`` (JSONL, ``text``);
    returns the number of rows. Unknown documents and spans outside the document are errors."""
    lengths: dict[str, int] = {}
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                doc = json.loads(line)
                lengths[str(doc.get("_id", doc.get("id")))] = len(doc.get("text", ""))
    tokens = None
    if tokenizer is not None:
        from clirkit.position import token_lengths

        tokens = token_lengths(corpus, tokenizer)
    rows = []
    with open(spans, encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter="\t")
        header = next(reader, None)
        if header is None or any(c not in header for c in SPAN_COLUMNS):
            raise ExperimentError(f"{spans}:1: the header must name {', '.join(SPAN_COLUMNS)}")
        col = {name: header.index(name) for name in SPAN_COLUMNS}
        for number, fields in enumerate(reader, 2):
            if not fields:
                continue
            qid, doc = fields[col["query-id"]], fields[col["corpus-id"]]
            if doc not in lengths:
                raise ExperimentError(f"{spans}:{number}: document '{doc}' is not in {corpus}")
            try:
                start, end = int(fields[col["span_start"]]), int(fields[col["span_end"]])
            except ValueError:
                raise ExperimentError(f"{spans}:{number}: span_start and span_end must be integers") from None
            if not 0 <= start <= end <= lengths[doc]:
                raise ExperimentError(
                    f"{spans}:{number}: span {start}-{end} lies outside document '{doc}' ({lengths[doc]} chars)"
                )
            row = [qid, doc, str(start), str(end), str(lengths[doc])]
            if tokens is not None:
                row.append(str(tokens[doc]))
            rows.append(row)
    with atomic_text_output(output) as f:
        f.write(
            "\t".join([*SPAN_COLUMNS, "doc_chars", *(["doc_tokens"] if tokens is not None else [])]) + "\n"
        )
        for row in rows:
            f.write("\t".join(row) + "\n")
    return len(rows)


def _psi(means: Sequence[Optional[float]]) -> Optional[float]:
    present = [m for m in means if m is not None]
    if not present or max(present) == 0:
        return None
    return 1.0 - min(present) / max(present)


def _aggregate(tables: Sequence[tuple[str, int, BucketTable]], bins: int) -> BucketTable:
    """Weighted by queries within a group, then the macro average across groups, per bin."""
    by_group: dict[str, list[BucketTable]] = defaultdict(list)
    for group, _, table in tables:
        by_group[group].append(table)
    group_means: list[list[Optional[float]]] = []
    counts = [0] * bins
    for members in by_group.values():
        means = []
        for i in range(bins):
            n = sum(t.counts[i] for t in members)
            counts[i] += n
            total = sum(t.counts[i] * t.means[i] for t in members if t.means[i] is not None)
            means.append(total / n if n else None)
        group_means.append(means)
    macro: list[Optional[float]] = []
    for i in range(bins):
        present = [g[i] for g in group_means if g[i] is not None]
        macro.append(sum(present) / len(present) if present else None)
    label = tables[0][2].label
    present = [m for m in macro if m is not None]
    return BucketTable(label, counts, macro, _psi(macro), sum(present) / len(present) if present else None)


def report(
    positions: str | os.PathLike,
    runs: Mapping[str, Mapping[str, str]],
    groups: Mapping[str, str],
    measure: str,
    bins: int,
    edges: Sequence[int],
    min_queries: int,
) -> tuple[list[PositionTable], dict[str, Any]]:
    """``runs[system][task] = run file``; ``groups[task]`` its PosIR group. Returns the aggregated
    table per system and every per-task table as JSON-able records."""
    aggregated, per_task = [], {}
    for system, by_task in runs.items():
        overall, buckets = [], defaultdict(list)
        unit, key = "chars", measure
        for task, run in by_task.items():
            (table,) = position_bias(positions, {system: run}, measure, bins, edges, False, None, min_queries)
            unit, key = table.length_unit, table.measure
            queries = sum(table.overall.counts)
            overall.append((groups[task], queries, table.overall))
            for b in table.buckets:
                buckets[b.label].append((groups[task], sum(b.counts), b))
            per_task[f"{system}\t{task}"] = {
                "system": system,
                "task": task,
                "psi": {b.label: b.psi for b in [table.overall, *table.buckets]},
                "bins": table.to_records(),
            }
        if not overall:
            continue
        aggregated.append(
            PositionTable(
                system,
                key,
                unit,
                _aggregate(overall, bins),
                [_aggregate(members, bins) for members in buckets.values()],
            )
        )
    return aggregated, {"per_task": list(per_task.values())}
