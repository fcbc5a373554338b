"""Parity of the measures trec_eval lacks with their references: Judged@k and RBP with ir_measures
(0.4: its judged provider, and cwl_eval for RBP), alpha_nDCG@k with TREC's ndeval (pyndeval), on
random NeuCLIR-style graded qrels (labels 0-3) and runs that are shorter than k, empty or absent.

Scores are distinct and exact in single precision: the references break score ties differently
(ir_measures' judged provider and ndeval by doc id ascending, cwl_eval by input order; clirkit, as
trec_eval, by doc id descending), so ties are left out of the comparison on purpose."""

from __future__ import annotations

import json
import random
import warnings

import pytest
from clirkit import evaluation

ir_measures = pytest.importorskip("ir_measures")
pyndeval = pytest.importorskip("pyndeval")
pytest.importorskip("cwl")

TOL = 1e-9
LANGS = ("zh", "fa", "ru")


def graded_qrels(rng: random.Random, queries: int = 30, pool: int = 120) -> dict[str, dict[str, int]]:
    qrels = {}
    for q in range(queries):
        docs = rng.sample(range(pool), rng.randint(5, 60))
        qrels[f"q{q}"] = {f"d{d}": rng.choices((0, 1, 2, 3), (6, 2, 1, 1))[0] for d in docs}
    return qrels


def random_run(rng: random.Random, qrels, pool: int = 200, lengths=(0, 1, 3, 7, 19, 20, 21, 60, 150)):
    """A run over the qrels' queries (some absent, some empty) plus one query the qrels lack; scores
    are distinct integers (no ties, exact at single precision)."""
    run: dict[str, dict[str, float]] = {}
    for qid in [*sorted(qrels), "unjudged-query"]:
        if rng.random() < 0.1:
            continue  # absent from the run
        docs = rng.sample(range(pool), rng.choice(lengths))
        scores = rng.sample(range(1, 10 * pool), len(docs))
        run[qid] = {f"d{d}": float(s) for d, s in zip(docs, scores)}
    return run


def irm_per_query(measures, qrels, run) -> dict[tuple[str, str], float]:
    # A TREC run cannot hold an empty query (and ir_measures' judged provider divides by zero on one):
    # an empty ranking is an absent query there.
    nonempty = {q: d for q, d in run.items() if d}
    return {
        (str(m.measure), m.query_id): float(m.value) for m in ir_measures.iter_calc(measures, qrels, nonempty)
    }


def clirkit_per_query(qrels, run, names, complete=True, **kwargs) -> dict[tuple[str, str], float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", evaluation.EvaluationWarning)
        result = evaluation.evaluate(qrels, run, names, per_query=True, complete=complete, **kwargs)
    result.pop("all")
    return {(name, qid): values[key] for qid, values in result.items() for name, key in zip(names, values)}


JUDGED_RBP = [
    "Judged@5",
    "Judged@10",
    "Judged@20",
    "Judged@100",
    "RBP(rel=1)",
    "RBP(rel=2)",
    "RBP(rel=1,p=0.9)",
    "RBP(rel=3,p=0.95)",
]


@pytest.mark.parametrize("seed", range(4))
def test_judged_and_rbp_equal_ir_measures(seed):
    rng = random.Random(seed)
    qrels = graded_qrels(rng)
    run = random_run(rng, qrels)
    measures = [ir_measures.parse_measure(m) for m in JUDGED_RBP]
    expected = irm_per_query(measures, qrels, run)
    # clirkit's keys for these are ir_measures' names, but Judged@k's is trec_eval-style judged_k
    assert evaluation.measure_keys(JUDGED_RBP)[4:] == [str(m) for m in measures[4:]]
    got = clirkit_per_query(qrels, run, [str(m) for m in measures])
    # with complete (trec_eval -c) clirkit measures exactly ir_measures' queries: every judged one
    assert set(got) == set(expected)
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=TOL), key
    # the aggregate is ir_measures' mean over the judged queries
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", evaluation.EvaluationWarning)
        agg = evaluation.evaluate(qrels, run, JUDGED_RBP, complete=True)
    irm_agg = ir_measures.calc_aggregate(measures, qrels, {q: d for q, d in run.items() if d})
    for name, key in zip(JUDGED_RBP, evaluation.measure_keys(JUDGED_RBP)):
        assert agg[key] == pytest.approx(float(irm_agg[ir_measures.parse_measure(name)]), abs=TOL), name
    # without complete, the run's judged queries only, with the same values
    partial = clirkit_per_query(qrels, run, [str(m) for m in measures], complete=False)
    assert {q for _, q in partial} == {q for q in run if q in qrels}
    for key, value in partial.items():
        assert value == pytest.approx(expected[key], abs=TOL), key


def test_runs_shorter_than_k_and_empty_runs():
    rng = random.Random(7)
    qrels = graded_qrels(rng, queries=10)
    measures = [ir_measures.parse_measure(m) for m in ("Judged@20", "RBP(rel=1)", "RBP(rel=1,p=0.9)")]
    names = [str(m) for m in measures]
    # every query retrieves 3 documents, 2 of them judged: Judged@20 = 2/3, not 2/20
    short = {}
    for qid, judged in qrels.items():
        docs = sorted(judged)[:2] + ["not-judged"]
        short[qid] = {d: float(10 - i) for i, d in enumerate(docs)}
    expected = irm_per_query(measures, qrels, short)
    got = clirkit_per_query(qrels, short, names)
    assert all(got[("Judged@20", q)] == pytest.approx(2 / 3, abs=TOL) for q in qrels)
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=TOL), key
    # an empty run: ir_measures gives every judged query its default, 0; so does clirkit with -c
    empty = clirkit_per_query(qrels, {}, names)
    assert empty == pytest.approx(irm_per_query(measures, qrels, {}), abs=TOL)
    assert set(empty.values()) == {0.0}
    # a query present with no documents is an empty ranking: 0, not a division by zero
    got = clirkit_per_query(qrels, {q: {} for q in qrels}, names, complete=False)
    assert set(got.values()) == {0.0} and len(got) == len(names) * len(qrels)


def subtopic_qrels(rng: random.Random, queries: int = 25, pool: int = 80):
    """ndeval's qrels: (qid, subtopic, docid, rel), 1-6 subtopics per query, graded 0-3."""
    rows = []
    for q in range(queries):
        for s in range(rng.randint(1, 6)):
            for d in rng.sample(range(pool), rng.randint(0, 25)):
                rows.append((f"q{q}", str(s + 1), f"d{d}", rng.choices((0, 1, 2, 3), (5, 3, 1, 1))[0]))
    return rows


def ndeval_per_query(rows, run, cutoffs, rel=1, alpha=0.5):
    tuples = [(q, d, s) for q, docs in run.items() for d, s in docs.items()]
    ev = pyndeval.RelevanceEvaluator(
        rows, [f"alpha-nDCG@{k}" for k in cutoffs], relevance_level=rel, alpha=alpha
    )
    return {
        (k, qid): values[f"alpha-nDCG@{k}"] for qid, values in ev.evaluate(tuples).items() for k in cutoffs
    }


def clirkit_alpha(qrels, run, cutoffs, spec="alpha_nDCG@{k}", **kwargs):
    names = [spec.format(k=k) for k in cutoffs]
    got = clirkit_per_query(qrels, run, names, complete=False, **kwargs)
    return {(k, qid): got[(spec.format(k=k), qid)] for k in cutoffs for qid in {q for _, q in got}}


@pytest.mark.parametrize("seed", range(3))
def test_alpha_ndcg_equals_ndeval_on_subtopic_qrels(seed, tmp_path):
    rng = random.Random(100 + seed)
    rows = subtopic_qrels(rng)
    qrels_path = tmp_path / "subtopics.qrels"
    qrels_path.write_text("".join(f"{q} {s} {d} {r}\n" for q, s, d, r in rows))
    run = random_run(rng, {q for q, *_ in rows}, pool=100, lengths=(0, 1, 4, 12, 20, 30, 90))
    run = {q: d for q, d in run.items() if d}
    cutoffs = (5, 10, 20)
    expected = ndeval_per_query(rows, run, cutoffs)
    got = clirkit_alpha(str(qrels_path), run, cutoffs)
    assert set(got) == set(expected)
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=TOL), key
    # other relevance levels and alphas, named as ir_measures names them
    for rel, alpha in ((2, 0.5), (1, 0.7), (3, 0.2)):
        expected = ndeval_per_query(rows, run, (20,), rel=rel, alpha=alpha)
        spec = str(ir_measures.parse_measure(f"alpha_nDCG(rel={rel},alpha={alpha})@20"))
        got = clirkit_alpha(str(qrels_path), run, (20,), spec=spec.replace("@20", "@{k}"))
        for key, value in expected.items():
            assert got[key] == pytest.approx(value, abs=TOL), (rel, alpha, key)
    # and through ir_measures itself (its pyndeval provider reads the subtopic as the iteration)
    irm_qrels = list(ir_measures.read_trec_qrels(str(qrels_path)))
    irm = irm_per_query([ir_measures.parse_measure("alpha_nDCG@20")], irm_qrels, run)
    got = clirkit_alpha(str(qrels_path), run, (20,))
    for (_, qid), value in irm.items():
        if qid in run:
            assert got[(20, qid)] == pytest.approx(value, abs=TOL), qid


@pytest.mark.parametrize("seed", range(3))
def test_alpha_ndcg_with_languages_as_aspects_equals_ndeval(seed, tmp_path):
    """MLIR: each document's language is its aspect (NeuCLIR's language fairness)."""
    rng = random.Random(200 + seed)
    qrels = graded_qrels(rng, queries=25, pool=150)
    doc_lang = {f"d{d}": rng.choice(LANGS) for d in range(200)}
    rows = [(q, doc_lang[d], d, label) for q, judged in qrels.items() for d, label in judged.items()]
    run = {q: d for q, d in random_run(rng, qrels).items() if d}
    cutoffs = (5, 10, 20)
    expected = ndeval_per_query(rows, run, cutoffs)
    got = clirkit_alpha(qrels, run, cutoffs, doc_languages=doc_lang)
    assert set(got) == set(expected)
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=TOL), key
    # the same from a docid<TAB>lang file, and with rel=2
    lang_path = tmp_path / "doc_lang.tsv"
    lang_path.write_text("".join(f"{d}\t{lang}\n" for d, lang in doc_lang.items()))
    expected = ndeval_per_query(rows, run, (20,), rel=2)
    got = clirkit_alpha(qrels, run, (20,), spec="alpha_nDCG(rel=2)@{k}", doc_languages=str(lang_path))
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=TOL), key


def test_cli_reads_subtopic_qrels_and_doc_languages(tmp_path, capsys):
    """`clirkit eval`: ndeval's subtopic qrels by hand, then the neuclir preset with --doc-lang."""
    from math import log

    from clirkit.cli import main

    qrels = tmp_path / "sub.qrels"
    qrels.write_text("q 1 d1 1\nq 2 d1 1\nq 1 d2 1\nq 2 d3 1\nq 1 d4 0\n")
    run = tmp_path / "run.trec"
    run.write_text("q Q0 d2 1 4 t\nq Q0 d1 2 3 t\nq Q0 x 3 2 t\nq Q0 d3 4 1 t\n")

    def disc(i):
        return log(2) / log(i + 2)

    # run gains 1, 0.5 + 1, -, 0.5; greedy ideal d1 (2), d3 (0.5, the larger id of a tie), d2 (0.5)
    expected = (1 + 1.5 * disc(1) + 0.5 * disc(3)) / (2 + 0.5 * disc(1) + 0.5 * disc(2))
    assert (
        main(["eval", "--qrels", str(qrels), "--run", str(run), "-m", "alpha_nDCG@20", "-m", "MAP", "--json"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["alpha_nDCG@20"] == pytest.approx(expected, abs=1e-12)
    # for the other measures a document is relevant when it is for any subtopic: d1, d2, d3
    assert out["map"] == pytest.approx((1 + 1 + 3 / 4) / 3)

    graded = tmp_path / "graded.qrels"
    graded.write_text("q 0 d1 2\nq 0 d2 1\nq 0 d3 0\n")
    langs = tmp_path / "langs.tsv"
    langs.write_text("d1\tzh\nd2\tfa\nd3\tzh\n")
    args = ["eval", "--qrels", str(graded), "--run", str(run), "-m", "neuclir", "--json"]
    assert main(args) == 0
    plain = json.loads(capsys.readouterr().out)
    assert list(plain) == ["ndcg_cut_20", "map", "RBP(rel=1)", "recall_100", "recall_1000", "judged_20"]
    assert main([*args, "--doc-lang", str(langs)]) == 0
    mlir = json.loads(capsys.readouterr().out)
    assert list(mlir) == [*plain, "alpha_nDCG@20"]
    # the run's d2 (fa) and d1 (zh) each gain 1, the ideal's two documents too: 1
    assert mlir["alpha_nDCG@20"] == pytest.approx(1.0)
    langs.write_text("d1\tzh\n")
    assert main([*args, "--doc-lang", str(langs)]) == 2
    assert "relevant document 'd2' of query 'q' has no language" in capsys.readouterr().err
