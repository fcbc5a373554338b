"""benches/impact/vs_bmp_seismic.py's clirkit approximate rows: the sweep's settings reach
``ImpactIndex.approximate``, the structure is built once per ``postings_per_term`` (outside the timed
passes), and keeping everything gives the exact row's hits."""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path

from clirkit import ImpactIndex

BENCH = Path(__file__).resolve().parents[2] / "benches" / "impact" / "vs_bmp_seismic.py"


def _bench():
    spec = importlib.util.spec_from_file_location("vs_bmp_seismic", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_clirkit_approximate_rows(tmp_path):
    bench = _bench()
    rows = bench.clirkit_sweep()
    assert rows[0] == {}
    assert all(set(r) == {"postings_per_term", "query_terms", "candidates"} for r in rows[1:])
    rng = random.Random(2)
    vocab = [f"t{n}" for n in range(60)]
    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        "".join(
            json.dumps({"id": f"d{i}", "vector": {t: rng.randint(1, 255) for t in rng.sample(vocab, 8)}})
            + "\n"
            for i in range(400)
        )
    )
    ImpactIndex.build(docs, tmp_path / "idx", quantize=1, quiet=True)
    queries = [(f"q{i}", {t: rng.randint(1, 32) for t in rng.sample(vocab, 5)}) for i in range(20)]
    engine = bench.Engine("clirkit", tmp_path / "idx")
    prepared = engine.prepare(queries)
    everything = {"postings_per_term": 0, "query_terms": 0, "candidates": 10**6}
    built = engine.approximate.ready(everything)
    assert engine.approximate.ready({**everything, "candidates": 5}) is built  # same λ: not rebuilt
    exact = engine.ranked(engine.search(prepared, 10, {}), queries)
    assert engine.ranked(engine.search(prepared, 10, everything), queries) == exact
    pruned = {"postings_per_term": 3, "query_terms": 2, "candidates": 10}
    assert engine.approximate.ready(pruned) is not built
    assert engine.ranked(engine.search(prepared, 10, pruned), queries) != exact
