"""clirkit.pyterrier: clirkit's retrievers, fusion and reranking as PyTerrier transformers; pt.Experiment
over them gives clirkit eval's numbers on the same runs."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import shared_path

pt = pytest.importorskip("pyterrier")
pytest.importorskip("pandas")

from clirkit import BM25Index, DenseIndex, ImpactIndex, InvalidInputError, evaluate, write_run  # noqa: E402
from clirkit import pyterrier as ck  # noqa: E402
from clirkit.multivector import MultiVectorIndex  # noqa: E402
from clirkit.rerank import PointwiseBackend  # noqa: E402


class FixedEncoder:
    """Query encodings from a table (what an ONNX encoder would compute); ``stack`` for one matrix."""

    def __init__(self, table, stack=False):
        self.table, self.stack = table, stack

    def encode_queries(self, texts):
        found = [self.table[t] for t in texts]
        return np.stack(found) if self.stack else found


TOPICS = {"q1": "a", "q2": "b"}


def test_result_frames_have_pyterrier_columns_in_canonical_order():
    frame = ck.results_frame({"q1": {"d2": 2.0, "d1": 2.0, "d0": 1.0}}, {"q1": "x", "q2": "y"})
    assert list(frame.columns) == ["qid", "query", "docno", "score", "rank"]
    assert frame["docno"].tolist() == ["d2", "d1", "d0"] and frame["rank"].tolist() == [0, 1, 2]
    with pytest.raises(InvalidInputError, match="lacks column query"):
        ck.BM25(None).transform(pt.new.queries(["x"]).drop(columns=["query"]))


def test_dense_multivector_and_impact_retrievers_return_the_indexes_runs(tmp_path):
    rng = np.random.default_rng(4)
    docs = rng.standard_normal((30, 8)).astype(np.float32)
    ids = [f"d{i}" for i in range(30)]
    queries = {"a": rng.standard_normal(8).astype(np.float32), "b": rng.standard_normal(8).astype(np.float32)}
    topics = ck.topics_frame(TOPICS)

    dense = DenseIndex.build(docs, ids)
    frame = ck.Dense(dense, FixedEncoder(queries, stack=True), k=5).transform(topics)
    want = dense.search_run(np.stack([queries["a"], queries["b"]]), ["q1", "q2"], 5)
    assert ck.run_of(frame, "t") == want and len(frame) == 10

    offsets = np.arange(0, 31 * 3, 3, dtype=np.uint64)[:31]
    tokens = rng.standard_normal((90, 8)).astype(np.float32)
    tokens /= np.linalg.norm(tokens, axis=1, keepdims=True)
    mv = MultiVectorIndex.build(tokens, offsets, ids, tmp_path / "mv", centroids=4, threads=1)
    query_tokens = {t: rng.standard_normal((2, 8)).astype(np.float32) for t in ("a", "b")}
    frame = ck.MultiVector(mv, FixedEncoder(query_tokens), k=4).transform(topics)
    want = mv.search_run(np.concatenate([query_tokens["a"], query_tokens["b"]]), [0, 2, 4], ["q1", "q2"], 4)
    assert ck.run_of(frame, "t") == want

    vectors = tmp_path / "vectors.jsonl"
    vectors.write_text(
        '{"id": "d1", "vector": {"cat": 2.0, "purr": 1.0}}\n{"id": "d2", "vector": {"dog": 3.0}}\n'
        '{"id": "d3", "vector": {"cat": 1.0, "dog": 1.0}}\n'
    )
    impact = ImpactIndex.build(vectors, tmp_path / "imp")
    sparse = {"a": {"cat": 1.0}, "b": {"dog": 1.0, "purr": 0.5}}
    frame = ck.Impact(impact, FixedEncoder(sparse), k=10).transform(topics)
    assert ck.run_of(frame, "t") == impact.batch_search({"q1": sparse["a"], "q2": sparse["b"]}, 10).to_dict()
    toks = topics.assign(query_toks=[sparse["a"], sparse["b"]])
    assert ck.run_of(ck.Impact(impact, k=10).transform(toks), "t") == ck.run_of(frame, "t")


def _overlap(query: str, passages: list[str]) -> list[float]:
    words = set(query.lower().split())
    return [len(words & set(p.lower().split())) / (1 + len(p.split()) ** 0.5) for p in passages]


@pytest.mark.shared
def test_experiment_over_clirkit_transformers_equals_clirkit_eval(tmp_path):
    beir = shared_path("data", "beir-scifact")
    index = BM25Index.build(beir / "corpus.jsonl", tmp_path / "idx", quiet=True)
    qrels_path = beir / "qrels" / "test.tsv"
    qrels = ck.qrels_frame(qrels_path)
    topics = ck.topics_frame(beir / "queries.jsonl")
    topics = topics[topics["qid"].isin(set(qrels["qid"]))]
    bm25 = ck.BM25(index, k=100)
    rerank = ck.Rerank(PointwiseBackend(_overlap, name="overlap"), corpus=beir / "corpus.jsonl", depth=20)
    rrf = ck.RRF(bm25, ck.BM25(index, k=100, k1=1.2, b=0.75))
    pipelines = {"bm25": bm25, "rerank": bm25 >> rerank, "rrf": rrf}
    table = pt.Experiment(
        list(pipelines.values()),
        topics,
        qrels,
        eval_metrics=["ndcg_cut_10", "recall_100"],
        names=list(pipelines),
    ).set_index("name")
    for name, pipeline in pipelines.items():
        frame = pipeline.transform(topics)
        assert list(frame.columns) == ["qid", "query", "docno", "score", "rank"]
        write_run(tmp_path / f"{name}.trec", ck.run_of(frame, name))
        ours = evaluate(str(qrels_path), str(tmp_path / f"{name}.trec"), ["ndcg_cut.10", "recall.100"])
        assert table.loc[name, "ndcg_cut_10"] == pytest.approx(ours["ndcg_cut_10"], abs=1e-12)
        assert table.loc[name, "recall_100"] == pytest.approx(ours["recall_100"], abs=1e-12)
    assert round(table.loc["bm25", "ndcg_cut_10"], 4) == 0.6789
    assert table.loc["rerank", "ndcg_cut_10"] != table.loc["bm25", "ndcg_cut_10"]


def test_missing_pyterrier_is_one_line(monkeypatch):
    import importlib
    import sys

    from clirkit._extras import MissingExtraError

    monkeypatch.setitem(sys.modules, "pyterrier", None)
    monkeypatch.delitem(sys.modules, "clirkit.pyterrier")
    with pytest.raises(
        MissingExtraError, match=r'^clirkit.pyterrier needs pyterrier .*pip install "clirkit\[pyterrier\]"$'
    ):
        importlib.import_module("clirkit.pyterrier")
