"""``[evaluation]`` (measures, baseline, significance, averages, correlations) and the optional
``[posir]`` report."""

from __future__ import annotations

from typing import Optional

from clirkit.experiment.config.model import AVERAGES, CORRECTIONS, Collection, EvaluationSpec, PosirSpec
from clirkit.experiment.config.reader import NUMBER, TableReader, check_measures
from clirkit.experiment.toml_source import TomlSource


def read_evaluation(
    source: TomlSource, top: TableReader, collections: dict[str, Collection], names_seen: dict[str, str]
) -> EvaluationSpec:
    """``[evaluation]``, its measures and every collection's own measures checked; the baseline must
    name a node."""
    ev = TableReader(
        source,
        ("evaluation",),
        top.get("evaluation", dict, {}),
        ("measures", "baseline", "test", "correction", "alpha", "averages", "correlations"),
    )
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
            raise source.error(("evaluation", "correlations", i), "must be a pair of task labels")
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
    )


def read_posir(source: TomlSource, base: str) -> Optional[PosirSpec]:
    """The optional ``[posir]`` report: span qrels, corpus, measure and position bins."""
    if "posir" not in source.data:
        return None
    p = TableReader(
        source,
        ("posir",),
        source.data["posir"],
        ("spans", "corpus", "tokenizer", "measure", "bins", "edges", "min_queries", "plot"),
    )
    measure = p.get("measure", str, "nDCG@10")
    check_measures(source, ("posir", "measure"), (measure,))
    edges = p.get("edges", list, [0, 512, 1024, 1536, 2048])
    if not all(isinstance(e, int) and not isinstance(e, bool) for e in edges):
        raise p.error("edges", "must be a list of integers")
    tokenizer = p.get("tokenizer", str)
    return PosirSpec(
        p.file("spans", base),  # type: ignore[arg-type]
        p.file("corpus", base),  # type: ignore[arg-type]
        None if tokenizer is None else p.path_value("tokenizer", tokenizer, base),
        measure,
        p.positive("bins", 20),
        tuple(edges),
        p.positive("min_queries", 1),
        p.get("plot", bool, True),
    )
