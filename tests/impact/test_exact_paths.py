"""Impact search's default exact path (MaxScore, block-max pruning over document blocks, or integer
exhaustive scoring, picked per query by its shape) returns exactly what the generic algorithms return:
the same documents, scores and tie order, on an index past the small-collection size (16,384 documents,
searched exhaustively), for queries of one rare term (MaxScore) up to long ones (exhaustive), at a few
hits (block-max for short queries over many postings) and many."""

from __future__ import annotations

import json
import random
from pathlib import Path

from clirkit import ImpactIndex


def collection(path: Path, num_docs: int, vocab: int, seed: int) -> dict[str, dict[str, int]]:
    rng = random.Random(seed)
    docs = {}
    for i in range(num_docs):
        length = rng.randint(1, 30)
        # Zipf-like terms and few distinct weights: long and short postings, many exact ties.
        docs[f"d{(i * 7919) % 100_003}"] = {
            f"t{int(vocab ** rng.random())}": rng.randint(1, 4) for _ in range(length)
        }
    lines = [json.dumps({"id": d, "contents": "", "vector": v}) for d, v in docs.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return docs


def exact(docs: dict[str, dict[str, int]], query: dict[str, int], k: int) -> list[tuple[str, float]]:
    scored = [(d, float(sum(w * query.get(t, 0) for t, w in v.items()))) for d, v in docs.items()]
    scored = [(d, s) for d, s in scored if s > 0]
    scored.sort(key=lambda ds: (ds[1], ds[0]), reverse=True)  # score, then doc id descending
    return scored[:k]


def test_default_exact_path_equals_the_generic_algorithms_and_the_dot_product(tmp_path: Path) -> None:
    docs = collection(tmp_path / "docs.jsonl", 17_000, 3000, seed=33)
    index = ImpactIndex.build(tmp_path / "docs.jsonl", tmp_path / "idx", quantize=1, threads=2, quiet=True)
    rng = random.Random(34)
    queries = [
        {f"t{int(3000 ** rng.random())}": rng.randint(1, 3) for _ in range(n)}
        for n in (1, 1, 2, 3, 8, 40) * 6
    ]
    queries += [{f"t{rng.randint(1000, 2999)}": 2} for _ in range(10)]  # rare terms: pruning is picked
    for query in queries:
        ranked = exact(docs, query, len(docs))
        for k in (1, 10, 100, 1000):
            default = index.search(query, k)
            assert default == ranked[:k]
            for strategy in ("maxscore", "bmw", "exhaustive"):
                assert index.search(query, k, strategy=strategy) == default, (query, k, strategy)
    batch = index.batch_search([(str(i), q) for i, q in enumerate(queries)], k=10, threads=2, quiet=True)
    assert [batch[str(i)] for i in range(len(queries))] == [exact(docs, q, 10) for q in queries]
