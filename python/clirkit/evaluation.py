"""trec_eval's measures at Rust speed, with pytrec_eval's interface.

Numbers equal trec_eval's (and pytrec_eval's): documents are ranked by score descending (compared at
single precision, as trec_eval stores scores as C floats), ties broken by doc id descending; a label
>= ``relevance_level`` is relevant; unjudged documents are non-relevant; nDCG's gains are the labels;
queries of the run without judgements are skipped, and judged queries missing from the run are skipped
too unless ``complete=True`` (trec_eval ``-c``: they score 0 and count in the average).

Measures: ``map``, ``map_cut.k``, ``P.k``, ``recall.k``, ``ndcg``, ``ndcg_cut.k``, ``recip_rank``,
``Rprec``, ``bpref``, ``success.k``, ``num_ret``, ``num_rel``, ``num_rel_ret``, ``judged.k`` (fraction
of the top min(k, retrieved) with any label, ir_measures' ``Judged@k``). A family name alone expands to
trec_eval's default cutoffs; aliases such as ``nDCG@10``, ``R@100``, ``P@5``, ``MAP``, ``MRR``,
``Judged@20`` work too. Output keys are trec_eval's: ``ndcg_cut_10``, ``P_5``, ``map``, ``judged_20``.

Measures trec_eval lacks, named and computed as ir_measures does: ``RBP(rel=1)`` and
``RBP(rel=1,p=0.9)`` (rank-biased precision, binary gain at label >= rel, p = 0.8 by default, cwl_eval's
numbers), ``alpha_nDCG@20`` and ``alpha_nDCG(alpha=0.7,rel=2)@20`` (TREC ndeval's α-nDCG over each
document's aspects: the subtopics of ndeval's qrels ``qid subtopic docid rel``, or, given
``doc_languages``, the documents' languages). Their output keys are those names. The preset
``neuclir`` is NeuCLIR's official set: ``nDCG@20 MAP RBP(rel=1) R@100 R@1000 Judged@20``, plus
``alpha_nDCG@20`` when ``doc_languages`` is given (a multilingual task).

Switching from pytrec_eval is one import::

    from clirkit.evaluation import RelevanceEvaluator
    evaluator = RelevanceEvaluator(qrels, {"map", "ndcg_cut.10"})
    per_query = evaluator.evaluate(run)
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Union

from clirkit import _native
from clirkit._native import InvalidInputError
from clirkit._types import QrelsInput, RunInput
from clirkit.sources import local_path

MeasureSpec = Union[str, Iterable[str]]
#: Documents' languages: a TSV path (``docid<TAB>lang``) or ``{docid: lang}``.
DocLanguages = Union[str, "os.PathLike[str]", Mapping[str, str]]

#: Measure families (trec_eval names), like ``pytrec_eval.supported_measures``.
supported_measures = frozenset(
    {
        "map",
        "map_cut",
        "P",
        "recall",
        "ndcg",
        "ndcg_cut",
        "recip_rank",
        "Rprec",
        "bpref",
        "success",
        "num_ret",
        "num_rel",
        "num_rel_ret",
        "judged",
    }
)

DEFAULT_MEASURES = ("map", "ndcg_cut.10", "P.10", "recall.100", "recip_rank")
_COUNTS = ("num_ret", "num_rel", "num_rel_ret")


class EvaluationWarning(UserWarning):
    """Suspicious evaluation input, such as a run sharing no query with the qrels."""


def _measure_list(measures: MeasureSpec) -> list[str]:
    if isinstance(measures, str):
        return [measures]
    # Sort sets so keys come out in a reproducible order.
    return sorted(measures) if isinstance(measures, (set, frozenset)) else list(measures)


def measure_keys(measures: MeasureSpec, mlir: bool = False) -> list[str]:
    """Output keys for measure specs, e.g. ``["nDCG@10", "P"]`` -> ``["ndcg_cut_10", "P_5", ...]``;
    ``mlir``: for a multilingual task (the ``neuclir`` preset adds ``alpha_nDCG@20``).

    Raises ``InvalidInputError`` (a ``ClirkitError``) naming the known measures for unknown names."""
    return _native.measure_keys(_measure_list(measures), mlir)


def _languages(doc_languages: DocLanguages | None) -> str | dict[str, str] | None:
    if doc_languages is None:
        return None
    return os.fspath(doc_languages) if is_path(doc_languages) else dict(doc_languages)


def is_path(x: Any) -> bool:
    return isinstance(x, (str, os.PathLike))


def warn_no_overlap(run_queries: int, matched: int, stacklevel: int = 3) -> None:
    if run_queries == 0:
        warnings.warn(
            "the run has no queries: every measure is computed over zero queries (0)",
            EvaluationWarning,
            stacklevel=stacklevel,
        )
    elif matched == 0:
        warnings.warn(
            f"none of the run's {run_queries} query ids appears in the qrels: wrong qrels file or query-id "
            "scheme? Every measure is computed over zero queries.",
            EvaluationWarning,
            stacklevel=stacklevel,
        )


def _rows(
    raw: tuple[list[str], list[tuple[str, list[float]]], list[float], int, int],
) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    keys, per_query, aggregate, _, _ = raw
    return {qid: dict(zip(keys, values)) for qid, values in per_query}, dict(zip(keys, aggregate))


class RelevanceEvaluator:
    """Drop-in replacement for ``pytrec_eval.RelevanceEvaluator``.

    ``query_relevance`` is ``dict[qid, dict[docid, label]]`` or a qrels file path; ``measures`` takes
    pytrec_eval's specs (``{"map", "ndcg_cut.10", "P"}``) and clirkit's aliases. ``evaluate(run)``
    returns ``dict[qid, dict[measure_key, value]]`` for the run's queries that have judgements.
    ``doc_languages`` (a ``docid<TAB>lang`` TSV path or ``{docid: lang}``) makes the documents'
    languages α-nDCG's aspects (a multilingual task).
    """

    def __init__(
        self,
        query_relevance: QrelsInput,
        measures: MeasureSpec,
        relevance_level: int = 1,
        judged_docs_only_flag: bool = False,
        doc_languages: DocLanguages | None = None,
    ) -> None:
        qrels = os.fspath(query_relevance) if is_path(query_relevance) else dict(query_relevance)
        self._native = _native.Evaluator(
            qrels,
            _measure_list(measures),
            relevance_level,
            judged_docs_only_flag,
            False,
            _languages(doc_languages),
        )

    def evaluate(self, scores: RunInput) -> dict[str, dict[str, float]]:
        """Per-query values for a run (dict or TREC run file path)."""
        if is_path(scores):
            raw = self._native.evaluate_file(os.fspath(scores))
        else:
            raw = self._native.evaluate_dict({q: dict(d) for q, d in scores.items()})
        warn_no_overlap(raw[3], raw[4])
        return _rows(raw)[0]


def compute_aggregated_measure(measure: str, values: Iterable[float]) -> float:
    """Aggregate per-query values as trec_eval does: counts are summed, the rest averaged
    (pytrec_eval's function of the same name)."""
    vals = list(values)
    if measure in _COUNTS:
        return float(sum(vals))
    return sum(vals) / len(vals) if vals else 0.0


def evaluate(
    qrels: QrelsInput,
    run: RunInput,
    measures: MeasureSpec = DEFAULT_MEASURES,
    per_query: bool = False,
    judged_docs_only: bool = False,
    complete: bool = False,
    relevance_level: int = 1,
    doc_languages: DocLanguages | None = None,
) -> dict[str, Any]:
    """Evaluate a run (path or dict) against qrels (path, dict, or a collection name ``irds:...``/``hf:...``).

    Returns ``{measure_key: value}`` averaged over the evaluated queries (counts summed). With
    ``per_query=True``: ``{qid: {measure_key: value}, ..., "all": {measure_key: value}}`` (queries in
    byte order of their ids, ``"all"`` last, as trec_eval -q prints them).
    ``judged_docs_only`` is trec_eval's -J, ``complete`` its -c, ``relevance_level`` its -l.
    ``doc_languages`` (a ``docid<TAB>lang`` TSV path or ``{docid: lang}``) makes the task multilingual:
    the documents' languages are α-nDCG's aspects.
    """
    specs = _measure_list(measures)
    qrels = local_path(qrels, "qrels")
    langs = _languages(doc_languages)
    if is_path(qrels) and is_path(run) and langs is None:
        raw = _native.evaluate_files(
            os.fspath(qrels), os.fspath(run), specs, relevance_level, judged_docs_only, complete
        )
    else:
        q = os.fspath(qrels) if is_path(qrels) else {k: dict(v) for k, v in qrels.items()}
        evaluator = _native.Evaluator(q, specs, relevance_level, judged_docs_only, complete, langs)
        if is_path(run):
            raw = evaluator.evaluate_file(os.fspath(run))
        else:
            raw = evaluator.evaluate_dict({k: dict(v) for k, v in run.items()})
    warn_no_overlap(raw[3], raw[4])
    if not per_query:
        return dict(zip(raw[0], raw[2]))
    rows, aggregate = _rows(raw)
    rows["all"] = aggregate
    return rows


def to_records(results: Mapping[str, Any], qid_column: str = "qid") -> list[dict[str, Any]]:
    """A result of :func:`evaluate` (or ``RelevanceEvaluator.evaluate``) as a list of flat records,
    one per query (``{"qid": ..., "map": ..., ...}``); an aggregate-only result gives one record with
    qid ``"all"``."""
    if results and all(not isinstance(v, Mapping) for v in results.values()):
        return [{qid_column: "all", **results}]
    return [{qid_column: qid, **values} for qid, values in results.items()]


def to_dataframe(results: Mapping[str, Any], qid_column: str = "qid") -> Any:
    """The records of :func:`to_records` as a ``pandas.DataFrame`` (pandas is imported only here)."""
    try:
        import pandas as pd
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("to_dataframe needs pandas: pip install pandas") from err
    return pd.DataFrame.from_records(to_records(results, qid_column))


def evaluate_pairs(
    pairs: Sequence[tuple[str, QrelsInput, RunInput]],
    measures: MeasureSpec = ("ndcg_cut.20", "judged.20"),
    judged_docs_only: bool = False,
    complete: bool = False,
    relevance_level: int = 1,
) -> dict[str, dict[str, float]]:
    """Evaluate several labelled (qrels, run) pairs, e.g. one per language, NeuCLIRBench style.

    Returns ``{label: {measure_key: value}, ..., "average": {measure_key: mean over labels}}``."""
    if not pairs:
        raise InvalidInputError("evaluate_pairs needs at least one (label, qrels, run) pair")
    labels = [label for label, _, _ in pairs]
    duplicated = sorted({label for label in labels if labels.count(label) > 1})
    if duplicated or "average" in labels:
        raise InvalidInputError(f"pair labels must be unique and not 'average': {duplicated or ['average']}")
    table: dict[str, dict[str, float]] = {}
    for label, qrels, run in pairs:
        table[label] = evaluate(qrels, run, measures, False, judged_docs_only, complete, relevance_level)
    keys = list(next(iter(table.values())).keys())
    table["average"] = {k: sum(table[label][k] for label in labels) / len(labels) for k in keys}
    return table


def format_trec_eval(results: Mapping[str, Any]) -> str:
    """trec_eval's text output (``measure<TAB>qid|all<TAB>value``) for a result of :func:`evaluate`."""
    rows = results.items() if all(isinstance(v, Mapping) for v in results.values()) else [("all", results)]
    lines = []
    for qid, values in rows:
        for key, value in values.items():
            # `+ 0.0` turns -0.0 into 0.0: trec_eval prints a zero score as 0.0000.
            shown = f"{int(value)}" if key in _COUNTS else f"{value + 0.0:.4f}"
            lines.append(f"{key:<22}\t{qid}\t{shown}")
    return "\n".join(lines) + ("\n" if lines else "")


def print_warning(message: str) -> None:
    """A warning line on stderr, the CLI's way."""
    print(f"clirkit: warning: {message}", file=sys.stderr)


__all__ = [
    "DEFAULT_MEASURES",
    "EvaluationWarning",
    "RelevanceEvaluator",
    "compute_aggregated_measure",
    "evaluate",
    "evaluate_pairs",
    "format_trec_eval",
    "measure_keys",
    "supported_measures",
    "to_dataframe",
    "to_records",
]
