"""The seeded Zipfian corpus generator used by the BM25 benchmarks (benches/synthetic/gen_zipf_corpus.py)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import bench_module


@pytest.fixture(scope="module")
def gen():
    return bench_module("synthetic/gen_zipf_corpus")


def _lines(path: Path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_same_seed_same_bytes_other_seed_other_bytes(gen, tmp_path):
    a = gen.generate(tmp_path / "a", docs=300, queries=20, seed=7, vocab=5000, quiet=True)
    b = gen.generate(tmp_path / "b", docs=300, queries=20, seed=7, vocab=5000, quiet=True)
    c = gen.generate(tmp_path / "c", docs=300, queries=20, seed=8, vocab=5000, quiet=True)
    assert a["corpus_sha256"] == b["corpus_sha256"] and a["queries_sha256"] == b["queries_sha256"]
    assert a["corpus_sha256"] != c["corpus_sha256"]
    assert (tmp_path / "a" / "corpus.jsonl").read_bytes() == (tmp_path / "b" / "corpus.jsonl").read_bytes()
    assert json.loads((tmp_path / "a" / "meta.json").read_text())["seed"] == 7


def test_beir_layout_counts_and_lengths(gen, tmp_path):
    meta = gen.generate(tmp_path, docs=2000, queries=100, seed=1, vocab=20000, doc_median=40, quiet=True)
    docs = _lines(tmp_path / "corpus.jsonl")
    queries = _lines(tmp_path / "queries.jsonl")
    assert len(docs) == 2000 and len(queries) == 100
    assert len({d["_id"] for d in docs}) == 2000 and len({q["_id"] for q in queries}) == 100
    assert all(set(d) == {"_id", "title", "text"} for d in docs)
    lengths = np.array([len(d["text"].split()) for d in docs])
    assert lengths.min() >= 5 and lengths.max() <= 1000
    assert 35 <= np.median(lengths) <= 45  # log-normal around the requested median
    assert lengths.mean() > np.median(lengths)  # right-skewed, like real passages
    assert all(2 <= len(q["text"].split()) for q in queries)
    total = sum(len(d["text"].split()) + len(d["title"].split()) for d in docs)
    assert meta["tokens"] == total


def test_rank_frequency_is_zipfian(gen, tmp_path):
    gen.generate(tmp_path, docs=3000, queries=10, seed=3, vocab=50000, quiet=True)
    counts = Counter(w for d in _lines(tmp_path / "corpus.jsonl") for w in d["text"].split())
    freqs = np.array(sorted(counts.values(), reverse=True), dtype=float)
    ranks = np.arange(1, len(freqs) + 1)
    # log-log slope over ranks 10..1000 (past the Mandelbrot offset, before the sampling tail): about -1
    sel = slice(9, 1000)
    slope = np.polyfit(np.log(ranks[sel]), np.log(freqs[sel]), 1)[0]
    assert -1.2 < slope < -0.8
    assert counts.most_common(1)[0][0] == "the"


def test_content_words_are_unique_stemmer_proof_and_not_stopwords(gen):
    words = [gen.content_word(i) for i in range(0, 400_000, 3)]
    assert len(set(words)) == len(words)
    assert gen.content_word(0) == "babab" and len(gen.content_word(10**6)) > len(gen.content_word(0))
    assert not set(words) & set(gen.FUNCTION_WORDS)
    # nothing a Porter/Porter2 step could strip: no s/e/y/i/l/n/c letters, consonant ending
    assert all(not set(w) & set("seyilnc") and w[-1] in gen.CONSONANTS for w in words)


def test_rejects_empty_sizes(gen, tmp_path):
    with pytest.raises(ValueError):
        gen.generate(tmp_path, docs=0, queries=1, quiet=True)
