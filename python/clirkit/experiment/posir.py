"""PosIR-style position reports over an experiment's runs.

:func:`convert_spans` turns span-annotated qrels (``query-id``, ``corpus-id``, ``span_start``,
``span_end``; other columns ignored) plus the corpus into clirkit's position file
(:mod:`clirkit.position`), the document length counted from the corpus in characters and, given a
``tokenizer.json``, in tokens. :func:`report` aggregates as PosIR (Zeng et al., 2026) does for its
Tables 3 and 10-11:

- every task is one *domain* of one *language*; per language, each bin's mean is query-weighted
  over the language's domains (the per-domain bin means weighted by their queries), in every
  length bucket;
- PSI (1 - min/max over the bins with at least ``min_queries`` queries) is computed per language
  and bucket on that language's curve;
- the aggregate PSI of a bucket is the mean of the per-language PSIs (not the PSI of an averaged
  curve, which averaging flattens); the aggregate curve shown is the mean of the per-language
  curves;
- a bucket's score is a query mean: per language the mean over the bucket's queries (not the mean
  of its bin means), across languages the macro average of those;
- buckets are closed at their upper edge (Q1 = length <= 512, ...), the last also holding the
  documents beyond the last edge (:func:`clirkit.position.position_bias`).

The per-language and per-domain tables are kept in the report."""

from __future__ import annotations

import csv
import json
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from clirkit._atomic import atomic_text_output
from clirkit.experiment.toml_source import ExperimentError
from clirkit.position import BucketTable, PositionTable, format_value, position_bias

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


def _psi(means: Sequence[Optional[float]], counts: Sequence[int], min_queries: int) -> Optional[float]:
    """1 - min/max over the bins with at least ``min_queries`` queries (None when no bin qualifies or
    every qualifying mean is 0), as :mod:`clirkit.position` defines PSI."""
    present = [m for m, n in zip(means, counts) if m is not None and n >= max(1, min_queries)]
    if not present or max(present) == 0:
        return None
    return 1.0 - min(present) / max(present)


def _mean(values: Sequence[Optional[float]]) -> Optional[float]:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _pool(label: str, members: Sequence[BucketTable], min_queries: int) -> BucketTable:
    """One language's bucket from its domains' buckets: bin means and the bucket mean weighted by
    queries (each domain's bin mean times its queries, over the language's queries), PSI of that curve."""
    bins = len(members[0].counts)
    counts = [sum(t.counts[i] for t in members) for i in range(bins)]
    means: list[Optional[float]] = []
    for i in range(bins):
        total = sum(t.counts[i] * t.means[i] for t in members if t.means[i] is not None)  # type: ignore[operator]
        means.append(total / counts[i] if counts[i] else None)
    queries = sum(counts)
    mean = (
        sum(sum(t.counts) * t.mean for t in members if t.mean is not None) / queries  # type: ignore[operator]
        if queries
        else None
    )
    return BucketTable(label, counts, means, _psi(means, counts, min_queries), mean)


def _macro(label: str, languages: Sequence[BucketTable]) -> BucketTable:
    """The aggregate of a bucket over languages: PSI = mean of the per-language PSIs, score = mean of
    the per-language query means, curve = mean of the per-language curves, counts summed."""
    bins = len(languages[0].counts)
    return BucketTable(
        label,
        [sum(t.counts[i] for t in languages) for i in range(bins)],
        [_mean([t.means[i] for t in languages]) for i in range(bins)],
        _mean([t.psi for t in languages]),
        _mean([t.mean for t in languages]),
    )


def _by_label(tables: Sequence[PositionTable]) -> dict[str, list[BucketTable]]:
    """Every bucket of ``tables`` ("all" first, then the length buckets shortest first)."""
    out: dict[str, list[BucketTable]] = defaultdict(list)
    for t in tables:
        out["all"].append(t.overall)
    order: list[str] = []
    for t in tables:
        for b in t.buckets:
            if b.label not in order:
                order.append(b.label)
    # Labels are "LO-HI" (or "LO+"); every table shares the edges, so LO orders them.
    for label in sorted(order, key=lambda lab: int(lab.split("-")[0].rstrip("+"))):
        out[label] = [b for t in tables for b in t.buckets if b.label == label]
    return out


def _table(system: str, measure: str, unit: str, buckets: dict[str, BucketTable]) -> PositionTable:
    overall = buckets.pop("all")
    return PositionTable(system, measure, unit, overall, list(buckets.values()))


def task_language(task: Any, collection: Any) -> str:
    """The PosIR language of an experiment task (its domains are the tasks sharing it): the task's
    language (``mono/de``), else, for a dataset of a ``beir-group``, the group's name (one group per
    language, its datasets the domains), else the collection's fixed ``lang``, else its group."""
    if task.language is not None:
        return task.language
    if collection.group != collection.name or collection.lang_field is not None:
        return collection.group
    return collection.lang


def table_record(table: PositionTable, **extra: Any) -> dict[str, Any]:
    """A table as JSON: queries, PSI and mean per bucket, and its bins as records."""
    cols = [table.overall, *table.buckets]
    return {
        "system": table.system,
        **extra,
        "queries": {b.label: sum(b.counts) for b in cols},
        "psi": {b.label: b.psi for b in cols},
        "mean": {b.label: b.mean for b in cols},
        "bins": table.to_records(),
    }


def report(
    positions: str | os.PathLike,
    runs: Mapping[str, Mapping[str, str | Mapping[str, Mapping[str, float]]]],
    languages: Mapping[str, str],
    measure: str,
    bins: int,
    edges: Sequence[int],
    min_queries: int,
    length_unit: Optional[str] = None,
) -> tuple[list[PositionTable], dict[str, Any]]:
    """``runs[system][task]`` = a run (file or dict); ``languages[task]`` the task's language (its
    domains are the tasks sharing it). Returns the aggregated table per system and, JSON-able, the
    per-language tables (``per_language``) and the per-domain ones (``per_domain``). ``length_unit``
    ("tokens" or "chars"), when given, must be the unit the position file's lengths are in."""
    aggregated: list[PositionTable] = []
    per_language: list[dict[str, Any]] = []
    per_domain: list[dict[str, Any]] = []
    for system, by_task in runs.items():
        tables_of: dict[str, list[PositionTable]] = defaultdict(list)
        unit, key = length_unit or "chars", measure
        for task, run in by_task.items():
            (table,) = position_bias(positions, {system: run}, measure, bins, edges, False, None, min_queries)
            if length_unit is not None and table.length_unit != length_unit:
                raise ExperimentError(
                    f"{positions}: lengths are in {table.length_unit}, the report asks for {length_unit}"
                )
            unit, key = table.length_unit, table.measure
            tables_of[languages[task]].append(table)
            per_domain.append(table_record(table, task=task, language=languages[task]))
        if not tables_of:
            continue
        language_tables = {}
        for language, tables in tables_of.items():
            pooled = {
                label: _pool(label, members, min_queries) for label, members in _by_label(tables).items()
            }
            language_tables[language] = _table(system, key, unit, pooled)
            domains = [d["task"] for d in per_domain if d["system"] == system and d["language"] == language]
            per_language.append(table_record(language_tables[language], language=language, domains=domains))
        macro = {
            label: _macro(label, members)
            for label, members in _by_label(list(language_tables.values())).items()
        }
        aggregated.append(_table(system, key, unit, macro))
    return aggregated, {"per_language": per_language, "per_domain": per_domain}


def format_languages(details: Mapping[str, Any], aggregated: Sequence[PositionTable]) -> str:
    """Plain text: per system, the PSI and the score of every language per bucket, then their means
    (PosIR's Tables 10-11 and 3)."""
    out = []
    for table in aggregated:
        rows = [r for r in details["per_language"] if r["system"] == table.system]
        labels = [b.label for b in [table.overall, *table.buckets]]
        out.append(
            f"# {table.system}: PSI and mean {table.measure} per language (length in {table.length_unit})"
        )
        out.append(f"{'language':<12}" + "".join(f"{'PSI ' + lab:>16}{'mean ' + lab:>16}" for lab in labels))
        for r in rows:
            out.append(
                f"{r['language']:<12}"
                + "".join(
                    f"{format_value(r['psi'].get(lab)):>16}{format_value(r['mean'].get(lab)):>16}"
                    for lab in labels
                )
            )
        cells = "".join(
            f"{format_value(b.psi):>16}{format_value(b.mean):>16}" for b in [table.overall, *table.buckets]
        )
        out.append(f"{'mean':<12}" + cells)
        out.append("")
    return "\n".join(out)
