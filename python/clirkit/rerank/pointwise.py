"""A pointwise reranking backend: each window ordered by a score function, e.g. an encoder's cosine
similarity, so reranking runs offline."""

from __future__ import annotations

from typing import Callable, Dict, Iterator, List, Sequence, Tuple

from clirkit.rerank.backends import Backend, WindowRequest, WindowResult

__all__ = ["PointwiseBackend"]


class PointwiseBackend(Backend):
    """Rank each window by ``score_fn(query, passages) -> scores`` (higher is better; ties keep
    the current order)."""

    def __init__(self, score_fn: Callable[[str, List[str]], Sequence[float]], name: str) -> None:
        self.score_fn = score_fn
        self.identity = f"pointwise:{name}"

    @classmethod
    def from_encoder(cls, encoder, name: str, memo_size: int = 100_000) -> "PointwiseBackend":
        """Cosine similarity from an encoder with ``encode_queries(texts)`` and
        ``encode_passages(texts)`` returning L2-normalized row vectors (e.g.
        ``clirkit.encoders.OnnxEncoder``). Embeddings are memoized, since windows overlap."""
        memo: Dict[Tuple[str, str], object] = {}

        def embed(kind: str, texts: List[str]) -> List[object]:
            missing = [t for t in dict.fromkeys(texts) if (kind, t) not in memo]
            if missing:
                if len(memo) + len(missing) > memo_size:
                    memo.clear()
                encode = encoder.encode_queries if kind == "q" else encoder.encode_passages
                for text, vector in zip(missing, encode(missing)):
                    memo[(kind, text)] = vector
            return [memo[(kind, t)] for t in texts]

        def cosine(query: str, passages: List[str]) -> List[float]:
            import numpy  # only with an encoder, so the CLI starts without it

            (q,) = embed("q", [query])
            return [float(numpy.dot(q, p)) for p in embed("p", passages)]

        return cls(cosine, name)

    def rank(self, requests: Sequence[WindowRequest]) -> Iterator[Tuple[int, WindowResult]]:
        for i, req in enumerate(requests):
            try:
                scores = [float(s) for s in self.score_fn(req.query, req.passages)]
                if len(scores) != len(req.passages):
                    raise ValueError(f"{len(scores)} scores for {len(req.passages)} passages")
            except Exception as err:  # noqa: BLE001 - a scoring error fails this window only
                yield i, WindowResult(None, error=f"scorer error: {err!r}")
                continue
            order = sorted(range(len(scores)), key=lambda j: (-scores[j], j))
            yield i, WindowResult([j + 1 for j in order])
