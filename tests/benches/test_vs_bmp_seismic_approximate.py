"""benches/impact/vs_bmp_seismic.py's clirkit approximate rows: the sweep's settings reach
``ImpactIndex.approximate``, the structure is built once per ``postings_per_term`` (outside the timed
passes), and keeping everything gives the exact row's hits."""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path

import pytest
from clirkit import ImpactIndex

BENCH = Path(__file__).resolve().parents[2] / "benches" / "impact" / "vs_bmp_seismic.py"


def _bench():
    spec = importlib.util.spec_from_file_location("vs_bmp_seismic", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _engine(bench, tmp_path, seed: int, vocab_size: int, doc_terms: int, num_docs: int, query_terms: int):
    """A random impact collection indexed by clirkit, opened as the bench's engine, with 20-30 queries."""
    rng = random.Random(seed)
    vocab = [f"t{n}" for n in range(vocab_size)]
    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        "".join(
            json.dumps(
                {"id": f"d{i}", "vector": {t: rng.randint(1, 255) for t in rng.sample(vocab, doc_terms)}}
            )
            + "\n"
            for i in range(num_docs)
        )
    )
    ImpactIndex.build(docs, tmp_path / "idx", quantize=1, quiet=True)
    queries = [(f"q{i}", {t: rng.randint(1, 32) for t in rng.sample(vocab, query_terms)}) for i in range(30)]
    engine = bench.Engine("clirkit", tmp_path / "idx")
    return engine, queries, engine.prepare(queries)


def test_clirkit_approximate_rows(tmp_path):
    bench = _bench()
    rows = bench.clirkit_sweep()
    assert rows[0] == {}
    assert all(set(r) == {"postings_per_term", "query_terms", "candidates"} for r in rows[1:])
    engine, queries, prepared = _engine(bench, tmp_path, 2, 60, 8, 400, 5)
    everything = {"postings_per_term": 0, "query_terms": 0, "candidates": 10**6}
    built = engine.approximate.ready(everything)
    assert engine.approximate.ready({**everything, "candidates": 5}) is built  # same λ: not rebuilt
    exact = engine.ranked(engine.search(prepared, 10, {}), queries)
    assert engine.ranked(engine.search(prepared, 10, everything), queries) == exact
    pruned = {"postings_per_term": 3, "query_terms": 2, "candidates": 10}
    assert engine.approximate.ready(pruned) is not built
    assert engine.ranked(engine.search(prepared, 10, pruned), queries) != exact


def test_clirkit_audit_matches_the_independent_comparison(tmp_path):
    """The bench's check of clirkit's audit: per query, the audit's Accuracy@10 equals the share of the
    exact top 10 the approximate run holds, computed by the bench from the two runs' hits; the
    calibrated settings are a search the engine runs."""
    bench = _bench()
    engine, queries, prepared = _engine(bench, tmp_path, 5, 40, 10, 600, 8)
    exact = engine.ranked(engine.search(prepared, 1000, {}), queries)
    pruned = {"postings_per_term": 20, "query_terms": 3, "candidates": 12}
    run = engine.ranked(engine.search(prepared, 10, pruned), queries)
    mine = bench.strict_accuracy(run, exact)
    assert min(mine.values()) < 1.0  # the setting misses something, so the comparison means something
    audit = engine.approximate.audit(prepared, 10, pruned)
    assert audit["per_query"] == pytest.approx(mine)
    assert audit["accuracy10"] == pytest.approx(sum(mine.values()) / len(mine))
    assert bench.strict_accuracy(exact, exact) == {q: 1.0 for q, _ in queries}
    chosen = engine.approximate.calibrate(prepared, 0.9, 20)
    assert chosen["postings_per_term"] == 20 and set(chosen) == set(pruned)
    assert engine.ranked(engine.search(prepared, 10, chosen), queries).keys() == exact.keys()
