"""``[evaluation]`` (measures, baseline, significance, averages, correlations) and the optional
``[posir]`` report."""

from __future__ import annotations

from typing import Optional

from clirkit.experiment.config.model import (
    AVERAGES,
    CORRECTIONS,
    LENGTH_UNITS,
    AverageSpec,
    Collection,
    EvaluationSpec,
    ExternalSpec,
    PosirSpec,
    SubsampleSpec,
)
from clirkit.experiment.config.reader import NUMBER, TableReader, check_measures
from clirkit.experiment.toml_source import TomlSource

#: The keys of ``[evaluation]``, ``[evaluation.average.NAME]``, ``[evaluation.external.NAME]``,
#: ``[evaluation.subsample]`` and ``[posir]``.
EVALUATION_KEYS = (
    "measures",
    "baseline",
    "test",
    "correction",
    "alpha",
    "averages",
    "correlations",
    "average",
    "external",
    "subsample",
)
AVERAGE_KEYS = ("columns", "weighting", "groups")
EXTERNAL_KEYS = ("file", "column")
SUBSAMPLE_KEYS = ("samples", "queries", "seed")
POSIR_KEYS = (
    "spans",
    "corpus",
    "tokenizer",
    "length_unit",
    "measure",
    "bins",
    "edges",
    "min_queries",
    "plot",
)


def read_evaluation(
    source: TomlSource,
    top: TableReader,
    collections: dict[str, Collection],
    names_seen: dict[str, str],
    base: str,
) -> EvaluationSpec:
    """``[evaluation]``, its measures and every collection's own measures checked; the baseline must
    name a node."""
    ev = TableReader(source, ("evaluation",), top.get("evaluation", dict, {}), EVALUATION_KEYS)
    measures = ev.strings("measures", ("nDCG@10",))
    check_measures(source, ("evaluation", "measures"), measures)
    for cname, coll in collections.items():
        if coll.measures:
            check_measures(source, ("collections", cname, "measures"), coll.measures)
    baseline = ev.get("baseline", str)
    if baseline is not None and baseline not in names_seen:
        raise ev.error("baseline", f"system '{baseline}' is referenced but not defined")
    averages = ev.strings("averages", ("macro",))
    for a in averages:
        if a not in AVERAGES:
            raise ev.error("averages", f"'{a}' is not one of {', '.join(AVERAGES)}")
    correlations = ev.get("correlations", list, [])
    pairs = []
    for i, pair in enumerate(correlations):
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
            raise source.error(("evaluation", "correlations", i), "must be a pair of column names")
        pairs.append((pair[0], pair[1]))
    alpha = ev.get("alpha", NUMBER, 0.05)
    return EvaluationSpec(
        measures,
        baseline,
        ev.choice("test", ("t", "perm"), "t"),
        ev.choice("correction", CORRECTIONS, "holm"),
        float(alpha),
        averages,
        tuple(pairs),
        _named_averages(source, ev),
        _external(source, ev, base),
        _subsample(source, ev),
    )


def _named_averages(source: TomlSource, ev: TableReader) -> tuple[AverageSpec, ...]:
    """``[evaluation.average.NAME]``: ``columns`` with ``weighting``, or ``groups`` (two levels); the
    columns are checked against the tasks when the experiment is built."""
    out = []
    for name, table in ev.get("average", dict, {}).items():
        r = TableReader(source, ("evaluation", "average", name), table, AVERAGE_KEYS)
        columns = r.strings("columns", ())
        raw_groups = r.get("groups", dict)
        if raw_groups is not None and columns:
            raise source.error(("evaluation", "average", name), "give columns or groups, not both")
        groups = None
        if raw_groups is not None:
            groups = {}
            for group, members in raw_groups.items():
                if not (isinstance(members, list) and members and all(isinstance(m, str) for m in members)):
                    raise r.error("groups", f"group '{group}' must be a non-empty list of task labels")
                groups[group] = tuple(members)
            if not groups:
                raise r.error("groups", "must name at least one group")
        elif not columns:
            raise source.error(("evaluation", "average", name), "needs columns = [...] or groups = { ... }")
        weighting = r.choice("weighting", AVERAGES, "macro")
        if groups is not None and "weighting" in r.table:
            raise r.error("weighting", "groups are always query-weighted within, macro across")
        out.append(AverageSpec(name, columns, weighting, groups))
    return tuple(out)


def _external(source: TomlSource, ev: TableReader, base: str) -> dict[str, ExternalSpec]:
    """``[evaluation.external.NAME]``: ``file`` (CSV or JSON) and an optional score ``column``."""
    out = {}
    for name, table in ev.get("external", dict, {}).items():
        r = TableReader(source, ("evaluation", "external", name), table, EXTERNAL_KEYS)
        path = r.file("file", base)
        assert path is not None
        out[name] = ExternalSpec(name, path, r.get("column", str))
    return out


def _subsample(source: TomlSource, ev: TableReader) -> Optional[SubsampleSpec]:
    """``subsample = { samples = N, queries = M, seed = S }``."""
    table = ev.get("subsample", dict)
    if table is None:
        return None
    r = TableReader(source, ("evaluation", "subsample"), table, SUBSAMPLE_KEYS)
    samples, queries = r.positive("samples", 30), r.get("queries", int, required=True)
    if isinstance(queries, bool) or queries < 1:
        raise r.error("queries", f"must be > 0, got {queries!r}")
    return SubsampleSpec(samples, queries, r.positive("seed", 0, allow_zero=True))


def read_posir(source: TomlSource, base: str) -> Optional[PosirSpec]:
    """The optional ``[posir]`` report: span qrels, corpus, measure and position bins."""
    if "posir" not in source.data:
        return None
    p = TableReader(source, ("posir",), source.data["posir"], POSIR_KEYS)
    measure = p.get("measure", str, "nDCG@10")
    check_measures(source, ("posir", "measure"), (measure,))
    edges = p.get("edges", list, [0, 512, 1024, 1536, 2048])
    if not all(isinstance(e, int) and not isinstance(e, bool) for e in edges):
        raise p.error("edges", "must be a list of integers")
    tokenizer = p.get("tokenizer", str)
    length_unit = p.choice("length_unit", LENGTH_UNITS, "tokens")
    if length_unit == "tokens" and tokenizer is None:
        raise p.error(
            "length_unit",
            'token length buckets need tokenizer = "PATH/tokenizer.json"; '
            'for buckets in characters say length_unit = "chars"',
        )
    return PosirSpec(
        p.file("spans", base),  # type: ignore[arg-type]
        p.file("corpus", base),  # type: ignore[arg-type]
        None if tokenizer is None else p.path_value("tokenizer", tokenizer, base),
        measure,
        p.positive("bins", 20),
        tuple(edges),
        p.positive("min_queries", 1),
        p.get("plot", bool, True),
        length_unit,
    )
