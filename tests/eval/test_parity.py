"""Parity with pytrec_eval (pytrec-eval-terrier, i.e. trec_eval 9) on random runs full of score ties,
against real graded qrels: every measure, per query and averaged, within 1e-6."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from clirkit import evaluation
from clirkit.runs import read_qrels
from conftest import shared_path

pytrec_eval = pytest.importorskip("pytrec_eval")

MEASURES = {
    "map",
    "map_cut.5,10,1000,5000",
    "P.1,5,10,100,5000",
    "recall.5,10,100,5000",
    "ndcg",
    "ndcg_cut.1,5,10,20,5000",
    "recip_rank",
    "Rprec",
    "bpref",
    "success.1,5,10,5000",
    "num_ret",
    "num_rel",
    "num_rel_ret",
}
COUNTS = {"num_ret", "num_rel", "num_rel_ret"}


def random_run(
    qrels: dict[str, dict[str, int]], seed: int, max_docs: int = 60
) -> dict[str, dict[str, float]]:
    """Runs that stress ranking rules: coarse scores (many exact ties), near-ties that differ only
    beyond single precision, judged and unjudged documents, empty rankings, queries without qrels,
    and judged queries left out."""
    rng = random.Random(seed)
    all_docs = sorted({d for docs in qrels.values() for d in docs})
    run: dict[str, dict[str, float]] = {}
    qids = sorted(qrels)
    for i, qid in enumerate(qids):
        if i % 11 == 3:
            continue  # judged query missing from the run
        if i % 13 == 5:
            run[qid] = {}  # empty ranking
            continue
        judged = list(qrels[qid])
        n = rng.randint(1, max_docs)
        docs = set(rng.sample(judged, min(len(judged), rng.randint(0, len(judged)))))
        docs.update(rng.sample(all_docs, min(len(all_docs), n)))
        docs.update(f"unjudged-{rng.randint(0, 500)}" for _ in range(rng.randint(0, 5)))
        scores = {}
        for d in docs:
            r = rng.random()
            if r < 0.5:
                scores[d] = float(rng.randint(0, 5))  # exact ties
            elif r < 0.7:
                scores[d] = 3.0 + rng.choice([0.0, 1e-9, 2e-9, 1e-6])  # near-ties at single precision
            else:
                scores[d] = rng.uniform(-10, 10)
        run[qid] = scores
    for j in range(5):
        run[f"no-such-query-{j}"] = {all_docs[j]: 1.0}
    return run


def assert_parity(qrels, run, measures=MEASURES, **flags) -> None:
    ours = evaluation.RelevanceEvaluator(qrels, measures, **flags).evaluate(run)
    theirs = pytrec_eval.RelevanceEvaluator(qrels, measures, **flags).evaluate(run)
    assert ours.keys() == theirs.keys()
    for qid, values in theirs.items():
        assert ours[qid].keys() == values.keys(), qid
        for key, value in values.items():
            assert ours[qid][key] == pytest.approx(value, abs=1e-6), (qid, key, ours[qid][key], value)
    keys = next(iter(theirs.values())).keys()
    ours_all = evaluation.evaluate(
        qrels,
        run,
        measures,
        relevance_level=flags.get("relevance_level", 1),
        judged_docs_only=flags.get("judged_docs_only_flag", False),
    )
    for key in keys:
        want = pytrec_eval.compute_aggregated_measure(key, [v[key] for v in theirs.values()])
        assert ours_all[key] == pytest.approx(want, abs=1e-6), key


def cranfield() -> dict[str, dict[str, int]]:
    return read_qrels(shared_path("data", "cranfield", "qrels", "test.trec"))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_cranfield_graded_random_runs(seed):
    qrels = cranfield()
    assert_parity(qrels, random_run(qrels, seed))


@pytest.mark.parametrize("level", [2, 3, 4])
def test_relevance_level(level):
    qrels = cranfield()
    assert_parity(qrels, random_run(qrels, 10 + level), relevance_level=level)


def test_judged_docs_only():
    qrels = cranfield()
    assert_parity(qrels, random_run(qrels, 21), judged_docs_only_flag=True)


def test_negative_labels_and_queries_without_relevant_docs():
    rng = random.Random(5)
    qrels = {
        f"q{i}": {f"d{j}": rng.choice([-1, 0, 0, 1, 2, 3]) for j in range(rng.randint(1, 30))}
        for i in range(60)
    }
    qrels["only-zero"] = {"d1": 0, "d2": 0}
    assert_parity(qrels, random_run(qrels, 6))
    assert_parity(qrels, random_run(qrels, 7), relevance_level=2, judged_docs_only_flag=True)


def test_query_with_only_negative_labels_scores_zero():
    """trec_eval (and pytrec_eval) read out of bounds on such a query (no non-negative label: its
    label-count array is empty) and crash or hang; clirkit scores it 0 with nothing relevant."""
    result = evaluation.evaluate({"q": {"d1": -1}}, {"q": {"d1": 1.0, "d2": 0.5}}, MEASURES, per_query=True)
    assert result["q"]["num_ret"] == 2
    assert all(v == 0 for k, v in result["q"].items() if k not in ("num_ret", "judged_1"))


@pytest.mark.parametrize(
    "name,path",
    [("scifact", ("beir-scifact", "qrels", "test.tsv")), ("xquad-mono", ("xquad-r", "qrels", "mono.tsv"))],
)
def test_other_real_qrels(name, path):
    qrels = read_qrels(shared_path("data", *path))
    if len(qrels) > 2000:
        qrels = {q: qrels[q] for q in sorted(qrels)[:2000]}
    assert_parity(qrels, random_run(qrels, 31, max_docs=20))


def test_files_equal_dicts(tmp_path: Path):
    """The fast file reader and the dict path rank identically (scores written exactly)."""
    qrels = cranfield()
    run = random_run(qrels, 41)
    path = tmp_path / "run.trec"
    with path.open("w") as f:
        for qid, docs in run.items():
            for rank, (doc, score) in enumerate(docs.items()):
                f.write(f"{qid} Q0 {doc} {rank + 1} {score!r} test\n")
    qrels_path = shared_path("data", "cranfield", "qrels", "test.trec")
    run_no_empty = {q: d for q, d in run.items() if d}  # a file cannot hold an empty ranking
    from_file = evaluation.evaluate(qrels_path, path, MEASURES, per_query=True)
    from_dict = evaluation.evaluate(qrels, run_no_empty, MEASURES, per_query=True)
    assert from_file == from_dict
    theirs = pytrec_eval.RelevanceEvaluator(qrels, MEASURES).evaluate(run_no_empty)
    for qid, values in theirs.items():
        for key, value in values.items():
            assert from_file[qid][key] == pytest.approx(value, abs=1e-6)


def test_complete_counts_missing_queries_as_zero():
    qrels = cranfield()
    run = random_run(qrels, 51)
    measures = ["map", "ndcg_cut.10", "num_rel", "P.5"]
    plain = evaluation.evaluate(qrels, run, measures, per_query=True)
    full = evaluation.evaluate(qrels, run, measures, per_query=True, complete=True)
    evaluated = [q for q in plain if q != "all"]
    assert len(full) - 1 == len(qrels) > len(evaluated)
    for key in ("map", "ndcg_cut_10", "P_5"):
        assert full["all"][key] == pytest.approx(plain["all"][key] * len(evaluated) / len(qrels))
    missing = sorted(set(qrels) - set(run))
    assert full[missing[0]]["map"] == 0.0 and full[missing[0]]["num_rel"] > 0
    assert full["all"]["num_rel"] == sum(full[q]["num_rel"] for q in qrels)
