"""RM3 (Anserini's Rm3Reranker): expansion weights worked out independently from the BM25 scores and
the documents' analyzed terms, the CLI, and bad input."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import clirkit
import numpy as np
import pytest
from clirkit import BM25Index
from clirkit.bm25 import RM3
from clirkit.cli import main as cli

F32 = np.float32


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


DOCS = {
    "d0": "rain clouds rain storms",
    "d1": "rain falls on the plains of spain",
    "d2": "storms and thunder and lightning",
    "d3": "dry desert sand",
    **{f"f{i}": f"filler{i} words{i % 3}" for i in range(16)},
}


@pytest.fixture()
def corpus(tmp_path) -> Path:
    return write_jsonl(tmp_path / "c.jsonl", [{"_id": d, "text": t} for d, t in DOCS.items()])


def expected_rm3(index: BM25Index, query: str, rm3: RM3) -> dict[str, float]:
    """RM3 in Anserini's arithmetic (f32 weights, f64 norms), from the index's BM25 scores."""
    vectors = {d: Counter(clirkit.analyze(t, "en")) for d, t in DOCS.items()}
    df = Counter(t for v in vectors.values() for t in v)
    n = sum(1 for v in vectors.values() if v)
    # Lucene's order: score descending, ties by doc id ascending.
    hits = sorted(index.search(query, k=len(DOCS)), key=lambda h: (-F32(h[1]), h[0]))[: rm3.fb_docs]

    def top(features: dict, k: int) -> dict:
        return dict(sorted(features.items(), key=lambda kv: (-kv[1], kv[0]))[:k])

    feedback = []
    for doc, score in hits:
        v = {
            t: F32(c)
            for t, c in vectors[doc].items()
            if 2 <= len(t) <= 20 and t.isascii() and t.isalnum() and not F32(df[t]) / F32(n) > F32(0.1)
        }
        v = top(v, rm3.fb_terms)
        feedback.append((v, F32(sum(float(x) for x in v.values())), F32(score)))
    model = {}
    for term in {t for v, _, _ in feedback for t in v}:
        w = F32(0)
        for v, norm, score in feedback:
            if norm > F32(0.001):
                w = F32(w + F32(F32(v.get(term, F32(0)) / norm) * score))
        model[term] = w
    model = top(model, rm3.fb_terms)
    z = sum(float(x) for x in model.values())
    model = {t: F32(float(x) / z) for t, x in model.items()}
    tokens = Counter(clirkit.analyze(query, "en"))
    original = {t: F32(c / sum(tokens.values())) for t, c in tokens.items()}
    w = F32(rm3.original_weight)
    return {
        t: float(F32(float(w * original.get(t, F32(0))) + (1.0 - float(w)) * float(model.get(t, F32(0)))))
        for t in set(original) | set(model)
    }


@pytest.mark.parametrize("rm3", [RM3(), RM3(fb_docs=2, fb_terms=3, original_weight=0.3)])
def test_expansion_matches_anserinis_arithmetic(tmp_path, corpus, rm3):
    index = BM25Index.build(corpus, tmp_path / "idx", lang="en", quiet=True, store_docvectors=True)
    assert index.has_docvectors and index.manifest["docvectors"] is True
    for query in ("rain storms", "rain rain spain", "desert"):
        got = index.rm3_expansion(query, rm3)
        assert dict(got) == pytest.approx(expected_rm3(index, query, rm3), abs=1e-7), query
        assert [w for _, w in got] == sorted((w for _, w in got), reverse=True)
        hits = index.search(query, k=5, rm3=rm3)
        batch = index.batch_search({"q": query}, k=5, rm3=rm3, threads=2)
        assert batch["q"] == hits and batch.expansion("q") == got
    assert index.batch_search({"q": "rain"}, k=5).expansion("q") is None


def test_without_docvectors_rm3_is_a_clear_error(tmp_path, corpus):
    index = BM25Index.build(corpus, tmp_path / "idx", lang="en", quiet=True)
    assert not index.has_docvectors and "docvectors" not in index.manifest
    assert not (tmp_path / "idx" / "docvectors.bin").exists()
    with pytest.raises(clirkit.ClirkitError, match="--store-docvectors"):
        index.search("rain", rm3=True)
    with pytest.raises(clirkit.ClirkitError, match="--store-docvectors"):
        index.batch_search({"q": "rain"}, rm3=RM3())


def test_bad_rm3_parameters(tmp_path, corpus):
    index = BM25Index.build(corpus, tmp_path / "idx", lang="en", quiet=True, store_docvectors=True)
    with pytest.raises(clirkit.ClirkitError, match="fb_docs"):
        index.search("rain", rm3=RM3(fb_docs=0))
    with pytest.raises(clirkit.ClirkitError, match="original query weight"):
        index.search("rain", rm3=RM3(original_weight=1.5))
    with pytest.raises(clirkit.ClirkitError, match="rm3 must be"):
        index.search("rain", rm3="yes")  # type: ignore[arg-type]


def test_cli_rm3_with_expansions(tmp_path, corpus, capsys):
    idx = tmp_path / "idx"
    assert (
        cli(["index", "bm25", "--corpus", str(corpus), "--index", str(idx), "--store-docvectors", "--quiet"])
        == 0
    )
    queries = write_jsonl(
        tmp_path / "q.jsonl", [{"_id": "q1", "text": "rain storms"}, {"_id": "q2", "text": "zzz"}]
    )
    run, expansions = tmp_path / "run.trec", tmp_path / "exp.jsonl"
    base = ["search", "bm25", "--index", str(idx), "--queries", str(queries), "--output", str(run), "--quiet"]
    assert (
        cli(base + ["--rm3", "--fb-docs", "3", "--fb-terms", "4", "--print-expansions", str(expansions)]) == 0
    )
    lines = [json.loads(x) for x in expansions.read_text().splitlines()]
    assert [x["id"] for x in lines] == ["q1", "q2"]
    index = BM25Index.open(idx)
    assert [tuple(t) for t in lines[0]["terms"]] == index.rm3_expansion("rain storms", RM3(3, 4))
    assert lines[1]["terms"] == [["zzz", 0.5]]
    assert run.read_text().split("\n")[0].split()[:2] == ["q1", "Q0"]
    # RM3 options without --rm3, and --rm3 on an index without document vectors.
    assert cli(["index", "bm25", "--corpus", str(corpus), "--index", str(tmp_path / "plain"), "--quiet"]) == 0
    assert cli(base + ["--fb-docs", "5"]) == 2  # a usage error (F23: it exited 1)
    assert "--fb-docs need --rm3" in capsys.readouterr().err
    plain = ["search", "bm25", "--index", str(tmp_path / "plain"), "--queries", str(queries)]
    assert cli(plain + ["--output", str(run), "--rm3", "--quiet"]) == 2
    assert "--store-docvectors" in capsys.readouterr().err


def test_scifact_matches_pyserini(tmp_path, shared):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    data = shared("data", "beir-scifact")
    index = BM25Index.build(
        data / "corpus.jsonl", tmp_path / "idx", lang="en", quiet=True, store_docvectors=True
    )
    qrels = clirkit.read_qrels(data / "qrels" / "test.tsv")
    results = index.search_file(data / "queries.jsonl", k=1000, quiet=True, rm3=True)
    run = {q: docs for q, docs in results.to_dict().items() if q in qrels}
    per_query = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10", "recall_100"}).evaluate(run)
    mean = {m: sum(v[m] for v in per_query.values()) / len(qrels) for m in ("ndcg_cut_10", "recall_100")}
    # Pyserini 1.6.0 (--bm25 --k1 0.9 --b 0.4 --rm3, -storeDocvectors): nDCG@10 .6457, R@100 .9147.
    assert mean["ndcg_cut_10"] == pytest.approx(0.6457, abs=0.005), mean
    assert mean["recall_100"] == pytest.approx(0.9147, abs=0.005), mean
