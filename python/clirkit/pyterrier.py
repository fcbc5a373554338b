"""clirkit's retrievers, fusion and rerankers as PyTerrier transformers (extra ``clirkit[pyterrier]``,
PyTerrier 1.x, no Java).

>>> import pyterrier as pt                                      # doctest: +SKIP
>>> from clirkit import BM25Index, pyterrier as ck
>>> bm25 = ck.BM25(BM25Index.open("scifact-idx"))
>>> rrf = ck.RRF(bm25, ck.BM25(BM25Index.open("scifact-idx"), k1=1.2, b=0.75))
>>> pt.Experiment([bm25, bm25 >> ck.Rerank(backend, corpus), rrf], topics, qrels, ["ndcg_cut_10"])

Retrievers take topics (``qid``, ``query``) and return PyTerrier's result frame: ``qid``, ``query``,
``docno``, ``score``, ``rank`` (from 0), each query's hits in clirkit's canonical order (score descending,
then document id descending, trec_eval's order), so ``pt.Experiment`` measures exactly what
``clirkit eval`` measures on the same run. :class:`Rerank` and :class:`RRF` run clirkit's own reranking
driver and fusion on those frames.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional, Union

import numpy as np

from clirkit._extras import require
from clirkit._native import InvalidInputError
from clirkit._types import PathLike, RunDict

pt = require("pyterrier", "pyterrier", "clirkit.pyterrier")
pd = require("pandas", "pyterrier", "clirkit.pyterrier")

RESULT_COLUMNS = ["qid", "query", "docno", "score", "rank"]


def _topics(frame: Any, what: str) -> dict[str, str]:
    """``{qid: query}`` of a topics or results frame, in first-appearance order."""
    missing = [c for c in ("qid", "query") if c not in frame.columns]
    if missing:
        raise InvalidInputError(
            f"{what}: the input frame lacks column {', '.join(missing)} (has {', '.join(frame.columns)})"
        )
    out: dict[str, str] = {}
    for qid, query in zip(frame["qid"], frame["query"]):
        out.setdefault(str(qid), str(query))
    return out


def results_frame(run: Mapping[str, Mapping[str, float]], queries: Mapping[str, str]) -> Any:
    """A run (``{qid: {docno: score}}``, each query's dict in canonical order) as PyTerrier's result frame;
    queries of ``queries`` with no hit are left out, as PyTerrier's retrievers leave them."""
    rows: dict[str, list[Any]] = {c: [] for c in RESULT_COLUMNS}
    for qid, query in queries.items():
        for rank, (docno, score) in enumerate(run.get(qid, {}).items()):
            rows["qid"].append(qid)
            rows["query"].append(query)
            rows["docno"].append(docno)
            rows["score"].append(float(score))
            rows["rank"].append(rank)
    frame = pd.DataFrame(rows, columns=RESULT_COLUMNS)
    return frame.astype({"qid": object, "docno": object, "score": "float64", "rank": "int64"})


def run_of(frame: Any, what: str) -> RunDict:
    """``{qid: {docno: score}}`` of a result frame (scores as given: clirkit puts them in canonical order)."""
    missing = [c for c in ("qid", "docno", "score") if c not in frame.columns]
    if missing:
        raise InvalidInputError(f"{what}: the input frame lacks column {', '.join(missing)}")
    run: RunDict = {}
    for qid, docno, score in zip(frame["qid"], frame["docno"], frame["score"]):
        run.setdefault(str(qid), {})[str(docno)] = float(score)
    return run


class _Retriever(pt.Transformer):
    """A first stage: topics in, results out (``search(queries) -> run`` in subclasses)."""

    def __init__(self, k: int) -> None:
        if k < 1:
            raise InvalidInputError(f"k must be at least 1, got {k}")
        self.k = k

    def search(self, queries: dict[str, str]) -> RunDict:  # pragma: no cover - abstract
        raise NotImplementedError

    def transform(self, topics: Any) -> Any:
        queries = _topics(topics, type(self).__name__)
        if not queries:
            return pd.DataFrame(columns=RESULT_COLUMNS)
        return results_frame(self._canonical(self.search(queries)), queries)

    @staticmethod
    def _canonical(run: RunDict) -> RunDict:
        from clirkit.fusion import load_run

        return {qid: dict(docs) for qid, docs in load_run(run).to_list()} if run else {}


class BM25(_Retriever):
    """BM25 over a :class:`clirkit.BM25Index` (options as :meth:`BM25Index.batch_search`)."""

    def __init__(self, index: Any, k: int = 1000, **options: Any) -> None:
        super().__init__(k)
        self.index, self.options = index, options

    def search(self, queries: dict[str, str]) -> RunDict:
        return self.index.batch_search(queries, self.k, quiet=True, **self.options).to_dict()


class Impact(_Retriever):
    """Learned-sparse search over a :class:`clirkit.ImpactIndex`; query vectors from ``encoder``
    (a :class:`~clirkit.encoders.SparseEncoder`) or from a ``query_toks`` column (``{term: weight}``)."""

    def __init__(self, index: Any, encoder: Any = None, k: int = 1000, **options: Any) -> None:
        super().__init__(k)
        self.index, self.encoder, self.options = index, encoder, options

    def transform(self, topics: Any) -> Any:
        if "query_toks" in topics.columns:
            vectors = {str(q): dict(v) for q, v in zip(topics["qid"], topics["query_toks"])}
            queries = _topics(topics, "Impact") if "query" in topics.columns else dict.fromkeys(vectors, "")
            return results_frame(self._canonical(self._search_vectors(vectors)), queries)
        return super().transform(topics)

    def search(self, queries: dict[str, str]) -> RunDict:
        if self.encoder is None:
            raise InvalidInputError("Impact: give an encoder, or topics with a query_toks column")
        vectors = dict(zip(queries, self.encoder.encode_queries(list(queries.values()))))
        return self._search_vectors(vectors)

    def _search_vectors(self, vectors: dict[str, dict[str, float]]) -> RunDict:
        return self.index.batch_search(vectors, self.k, quiet=True, **self.options).to_dict()


class Dense(_Retriever):
    """Dense search over a :class:`clirkit.DenseIndex`, queries encoded by ``encoder`` (an
    :class:`~clirkit.encoders.OnnxEncoder`); options as :meth:`DenseIndex.search_run`."""

    def __init__(self, index: Any, encoder: Any, k: int = 1000, **options: Any) -> None:
        super().__init__(k)
        self.index, self.encoder, self.options = index, encoder, options

    def search(self, queries: dict[str, str]) -> RunDict:
        vectors = self.encoder.encode_queries(list(queries.values()))
        return self.index.search_run(vectors, list(queries), self.k, **self.options)


class MultiVector(_Retriever):
    """Late-interaction search over a :class:`clirkit.MultiVectorIndex`, query tokens from ``encoder``
    (a :class:`~clirkit.encoders.tokens.TokenEncoder`); options as :meth:`MultiVectorIndex.search_run`."""

    def __init__(self, index: Any, encoder: Any, k: int = 1000, **options: Any) -> None:
        super().__init__(k)
        self.index, self.encoder, self.options = index, encoder, options

    def search(self, queries: dict[str, str]) -> RunDict:
        matrices = self.encoder.encode_queries(list(queries.values()))
        offsets = np.concatenate([[0], np.cumsum([len(m) for m in matrices])]).astype(np.uint64)
        tokens = np.concatenate(matrices) if len(matrices) else np.zeros((0, 1), dtype=np.float32)
        return self.index.search_run(tokens, offsets, list(queries), self.k, **self.options)


class Fuse(pt.Transformer):
    """Runs ``transformers`` on the same topics and fuses their results with :func:`clirkit.fuse`
    (``method``: ``rrf``, ``combsum``, ``combmnz``, ``interpolate``; other options as there)."""

    def __init__(self, *transformers: Any, method: str = "rrf", **options: Any) -> None:
        if len(transformers) < 2:
            raise InvalidInputError("fusion needs at least two transformers")
        self.transformers, self.method, self.options = transformers, method, options

    def transform(self, topics: Any) -> Any:
        from clirkit.fusion import fuse

        queries = _topics(topics, type(self).__name__)
        runs = [run_of(t.transform(topics), type(self).__name__) for t in self.transformers]
        fused = fuse(runs, method=self.method, **self.options)
        assert fused is not None  # no output file was given
        return results_frame(fused, queries)


class RRF(Fuse):
    """Reciprocal rank fusion of ``transformers`` (``k`` the RRF constant, ``depth``, ``weights``, ``top``)."""

    def __init__(self, *transformers: Any, k: float = 60.0, **options: Any) -> None:
        super().__init__(*transformers, method="rrf", k=k, **options)


class Rerank(pt.Transformer):
    """clirkit's reranking driver on a result frame: a listwise or pointwise ``backend`` (a
    :class:`~clirkit.rerank.backends.Backend`, e.g. :class:`~clirkit.rerank.PointwiseBackend`, or a
    callable) over the top ``depth`` of each query, ``window``/``stride`` as :func:`clirkit.rerank.rerank`.
    Document texts come from ``corpus`` (a JSONL path, a collection name or ``{docno: text}``), else from
    the frame's ``text`` column."""

    def __init__(
        self,
        backend: Union[Any, Callable],
        corpus: Union[None, PathLike, Mapping[str, str]] = None,
        depth: int = 100,
        window: int = 20,
        stride: int = 10,
        cache: Optional[PathLike] = None,
    ) -> None:
        self.backend, self.corpus, self.cache = backend, corpus, cache
        self.depth, self.window, self.stride = depth, window, stride

    def transform(self, results: Any) -> Any:
        from clirkit.rerank import rerank
        from clirkit.sources import local_path

        queries = _topics(results, "Rerank")
        run = self._canonical(run_of(results, "Rerank"))
        corpus: Any = self.corpus
        if corpus is None:
            if "text" not in results.columns:
                raise InvalidInputError("Rerank: give a corpus, or results with a text column")
            corpus = {str(d): str(t) for d, t in zip(results["docno"], results["text"])}
        elif not isinstance(corpus, Mapping):
            corpus = local_path(corpus, "corpus")
        reranked, _ = rerank(
            run,
            queries,
            corpus,
            self.backend,
            self.depth,
            self.window,
            self.stride,
            cache=self.cache,
            progress=False,
        )
        return results_frame(reranked, queries)

    _canonical = staticmethod(_Retriever._canonical)


def topics_frame(queries: Union[PathLike, Mapping[str, str], Sequence[tuple[str, str]]]) -> Any:
    """PyTerrier topics (``qid``, ``query``) from a queries file (JSONL or TSV, or a collection name) or
    ``{qid: text}``."""
    if isinstance(queries, Mapping):
        pairs = [(str(q), str(t)) for q, t in queries.items()]
    elif isinstance(queries, (list, tuple)):
        pairs = [(str(q), str(t)) for q, t in queries]
    else:
        from clirkit.datasets import QUERY_FIELDS, QUERY_ID_FIELDS, iter_jsonl
        from clirkit.sources import local_path

        path = local_path(queries, "queries")
        pairs = [(r.id, r.text) for r in iter_jsonl(path, QUERY_FIELDS, QUERY_ID_FIELDS, text_rule="first")]
    return pd.DataFrame(pairs, columns=["qid", "query"])


def qrels_frame(qrels: Union[PathLike, Mapping[str, Mapping[str, int]]]) -> Any:
    """PyTerrier qrels (``qid``, ``docno``, ``label``) from a qrels file (TREC or BEIR TSV, or a
    collection name) or ``{qid: {docno: label}}``."""
    from clirkit.runs import read_qrels

    judged = qrels if isinstance(qrels, Mapping) else read_qrels(qrels)
    rows = [(str(q), str(d), int(label)) for q, docs in judged.items() for d, label in docs.items()]
    return pd.DataFrame(rows, columns=["qid", "docno", "label"])
