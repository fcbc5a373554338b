"""`clirkit eval`: trec_eval-compatible evaluation, labelled pair tables, position bias and
significance tests.

    clirkit eval --qrels QRELS --run RUN [-m MEASURE ...] [--per-query] [--json] [-c] [-l LEVEL] [-J]
                 [--doc-lang DOCLANG.tsv]
    clirkit eval --pair zh=qrels.zh,run.zh --pair fa=qrels.fa,run.fa [-m ...] [--json]
    clirkit eval position --qrels positions.tsv --run RUN [--run LABEL=RUN2 ...] [--plot out.png]
    clirkit eval compare --qrels QRELS --run A --run B [...] -m MEASURE [--test t|perm]
                         [--correction holm|bonferroni|none]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings

from clirkit import evaluation, position, significance
from clirkit._native import InvalidInputError
from clirkit.commands.common import label_int, non_negative_int, positive_int, seed_int

EPILOG = (
    "measures: trec_eval names (map, map_cut.k, P.k, recall.k, ndcg, ndcg_cut.k, recip_rank, Rprec, bpref, "
    "success.k, num_ret, num_rel, num_rel_ret) plus judged.k; a family alone (e.g. P) expands to trec_eval's "
    "default cutoffs; aliases nDCG@10, R@100, P@5, MAP, MRR, Judged@20; ir_measures' RBP(rel=1), "
    "RBP(rel=1,p=0.9), alpha_nDCG@20 (aspects: the subtopics of ndeval qrels 'qid subtopic docid rel', or the "
    "languages of --doc-lang); the preset neuclir (nDCG@20 MAP RBP(rel=1) R@100 R@1000 Judged@20, plus "
    "alpha_nDCG@20 with --doc-lang)."
)


def register(top, groups) -> None:
    p = top.add_parser(
        "eval",
        help="evaluate runs (trec_eval numbers), pair tables, position bias, significance",
        description="Evaluate a run against qrels with trec_eval's numbers and output format.",
        epilog=EPILOG,
    )
    _add_eval_options(p)
    p.set_defaults(func=_eval)
    sub = p.add_subparsers(dest="eval_command", metavar="{position,compare}")

    pos = sub.add_parser(
        "position",
        help="nDCG@10 by relative answer position and PSI (position-aware qrels)",
        description=position.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    pos.add_argument("--qrels", required=True, help="position-aware qrels TSV (e.g. xquad-pos positions.tsv)")
    pos.add_argument("--run", action="append", required=True, metavar="[LABEL=]RUN", help="run file (repeat)")
    pos.add_argument("-m", "--measure", default="ndcg_cut.10", help="per-query measure (default ndcg_cut.10)")
    pos.add_argument("--bins", type=positive_int, default=20, help="relative-position bins (default 20)")
    pos.add_argument(
        "--edges",
        type=lambda s: [int(x) for x in s.split(",")],
        default=list(position.DEFAULT_EDGES),
        help="length bucket edges; buckets are closed at their upper edge and the last also holds longer "
        "documents (default 0,512,1024,1536,2048: <=512, 513-1024, 1025-1536, >1536)",
    )
    pos.add_argument(
        "--min-queries",
        type=non_negative_int,
        default=1,
        help="bins with fewer queries are left out of PSI (default 1)",
    )
    pos.add_argument("--corpus", help="corpus.jsonl, to measure document length in tokens with --tokenizer")
    pos.add_argument("--tokenizer", help="tokenizer.json (Hugging Face) for token lengths")
    pos.add_argument("-c", "--complete", action="store_true", help="queries missing from a run score 0")
    pos.add_argument("--plot", help="write a PNG plot here (needs matplotlib)")
    pos.add_argument("--json", action="store_true", help="print JSON records instead of text")
    pos.set_defaults(func=_position)

    cmp = sub.add_parser(
        "compare",
        help="paired significance tests of runs against the first (baseline)",
        description=significance.__doc__,
    )
    cmp.add_argument("--qrels", required=True, help="qrels (TREC or BEIR TSV)")
    cmp.add_argument("--run", action="append", required=True, metavar="[LABEL=]RUN", help="run file (repeat)")
    cmp.add_argument("-m", "--measure", action="append", required=True, help="measure (repeat for several)")
    cmp.add_argument("--test", choices=significance.TESTS, default="t", help="t-test or randomization test")
    cmp.add_argument("--correction", choices=significance.CORRECTIONS, default="holm")
    cmp.add_argument(
        "--permutations", type=positive_int, default=10000, help="randomization test permutations"
    )
    cmp.add_argument("--seed", type=seed_int, default=0, help="randomization test seed")
    cmp.add_argument("-l", "--level", type=label_int, default=1, help="minimum relevant label (trec_eval -l)")
    cmp.add_argument("--json", action="store_true", help="print JSON instead of text")
    cmp.set_defaults(func=_compare)


def _add_eval_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--qrels", help="qrels: TREC 'qid 0 docid rel' or BEIR TSV with header")
    p.add_argument("--run", help="TREC run 'qid Q0 docid rank score tag'")
    p.add_argument(
        "--pair",
        action="append",
        metavar="LABEL=QRELS,RUN",
        help="labelled qrels/run pair (repeat): one column per label plus their average",
    )
    p.add_argument("-m", "--measure", action="append", help="measure (repeat); default: map ndcg_cut.10 ...")
    p.add_argument("-q", "--per-query", action="store_true", help="per-query lines too (trec_eval -q)")
    p.add_argument("--json", action="store_true", help="print JSON instead of trec_eval's text")
    p.add_argument(
        "-c", "--complete", action="store_true", help="average over all qrels queries (trec_eval -c)"
    )
    p.add_argument("-l", "--level", type=label_int, default=1, help="minimum relevant label (trec_eval -l)")
    p.add_argument(
        "-J", "--judged-only", action="store_true", help="rank judged documents only (trec_eval -J)"
    )
    p.add_argument(
        "--doc-lang",
        metavar="FILE",
        help="TSV 'docid<TAB>lang': a multilingual task, the languages are alpha_nDCG's aspects",
    )


def _labelled(specs: list[str]) -> dict[str, str]:
    """'LABEL=PATH' or 'PATH' (labelled by file name) -> {label: path}."""
    out: dict[str, str] = {}
    for spec in specs:
        label, sep, path = spec.partition("=")
        if not sep or not label:
            label, path = os.path.basename(spec), spec
        if label in out:
            raise InvalidInputError(f"run label '{label}' given twice; use LABEL=RUN to tell them apart")
        out[label] = path
    return out


def _evaluate_loudly(fn, *args, **kwargs):
    """Call an evaluation, turning its no-overlap warning into a loud stderr line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", evaluation.EvaluationWarning)
        result = fn(*args, **kwargs)
    for w in caught:
        evaluation.print_warning(str(w.message))
    return result


def _eval(args: argparse.Namespace) -> int:
    measures = args.measure or list(evaluation.DEFAULT_MEASURES)
    options = {"judged_docs_only": args.judged_only, "complete": args.complete, "relevance_level": args.level}
    if args.pair:
        if args.qrels or args.run:
            raise InvalidInputError("use either --qrels/--run or --pair, not both")
        if args.doc_lang:
            raise InvalidInputError("--doc-lang goes with --qrels/--run, not --pair")
        pairs = []
        for spec in args.pair:
            label, sep, rest = spec.partition("=")
            qrels, comma, run = rest.partition(",")
            if not (sep and comma and label and qrels and run):
                raise InvalidInputError(f"--pair '{spec}': expected LABEL=QRELS,RUN")
            pairs.append((label, qrels, run))
        table = _evaluate_loudly(evaluation.evaluate_pairs, pairs, measures, **options)
        sys.stdout.write(json.dumps(table, indent=2) + "\n" if args.json else _format_pairs(table))
        return 0
    if not (args.qrels and args.run):
        raise InvalidInputError("clirkit eval needs --qrels and --run (or --pair LABEL=QRELS,RUN)")
    result = _evaluate_loudly(
        evaluation.evaluate,
        args.qrels,
        args.run,
        measures,
        per_query=args.per_query,
        doc_languages=args.doc_lang,
        **options,
    )
    sys.stdout.write(
        json.dumps(result, indent=2) + "\n" if args.json else evaluation.format_trec_eval(result)
    )
    return 0


def _format_pairs(table: dict[str, dict[str, float]]) -> str:
    labels = list(table)
    keys = list(table[labels[0]])
    width = max(12, *(len(k) + 2 for k in keys))
    lines = [f"{'measure':<{width}}" + "".join(f"{label:>12}" for label in labels)]
    for key in keys:
        lines.append(f"{key:<{width}}" + "".join(f"{table[label][key]:>12.4f}" for label in labels))
    return "\n".join(lines) + "\n"


def _position(args: argparse.Namespace) -> int:
    runs = _labelled(args.run)
    doc_tokens = None
    if args.corpus or args.tokenizer:
        if not (args.corpus and args.tokenizer):
            raise InvalidInputError("--corpus and --tokenizer go together (token lengths of the documents)")
        doc_tokens = position.token_lengths(args.corpus, args.tokenizer)
    tables = _evaluate_loudly(
        position.position_bias,
        args.qrels,
        runs,
        args.measure,
        args.bins,
        args.edges,
        args.complete,
        doc_tokens,
        args.min_queries,
    )
    if args.json:
        records = [r for t in tables for r in t.to_records()]
        psi = {t.system: {b.label: b.psi for b in [t.overall, *t.buckets]} for t in tables}
        sys.stdout.write(json.dumps({"bins": records, "psi": psi}, indent=2) + "\n")
    else:
        sys.stdout.write(position.format_tables(tables))
    if args.plot:
        position.plot(tables, args.plot)
        print(f"clirkit: wrote {args.plot}", file=sys.stderr)
    return 0


def _compare(args: argparse.Namespace) -> int:
    runs = _labelled(args.run)
    comparisons = []
    for measure in args.measure:
        comparisons += _evaluate_loudly(
            significance.compare_runs,
            args.qrels,
            runs,
            measure,
            args.test,
            args.correction,
            args.permutations,
            args.seed,
            args.level,
        )
    if args.json:
        out = [
            {
                "system": c.system,
                "baseline": c.baseline,
                "measure": c.measure,
                "mean": c.system_mean,
                "baseline_mean": c.baseline_mean,
                "difference": c.result.mean_difference,
                "statistic": c.result.statistic,
                "p": c.result.p_value,
                "p_adjusted": c.adjusted_p,
                "queries": c.result.queries,
                "test": args.test,
                "correction": args.correction,
            }
            for c in comparisons
        ]
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    else:
        sys.stdout.write(significance.format_comparisons(comparisons, f"{args.test}, {args.correction}"))
    return 0
