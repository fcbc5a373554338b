"""The indexes' statistics forwarded from the native index (one descriptor, ``NativeValue``): read as
Python values, documented on the class, and read-only, as the properties they replaced were."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from clirkit.bm25 import BM25Index
from clirkit.dense import DenseIndex

SAMPLE = Path(__file__).resolve().parents[2] / "python" / "clirkit" / "data" / "sample"


@pytest.fixture(scope="module")
def bm25(tmp_path_factory: pytest.TempPathFactory) -> BM25Index:
    return BM25Index.build(
        SAMPLE / "corpus.jsonl", tmp_path_factory.mktemp("bm25") / "idx", lang="en", quiet=True
    )


def test_bm25_statistics_are_the_native_values(bm25: BM25Index) -> None:
    native = bm25.native
    assert (bm25.num_docs, bm25.num_terms) == (native.num_docs, native.num_terms) and bm25.num_docs > 0
    assert bm25.languages == ["en"] and bm25.avgdl == native.avgdl > 0
    assert bm25.has_docvectors is False


def test_statistics_are_documented_on_the_class_and_read_only(bm25: BM25Index) -> None:
    assert BM25Index.num_docs.__doc__ == "Number of documents, empty ones included."
    with pytest.raises(AttributeError, match="num_docs"):
        bm25.num_docs = 3  # type: ignore[misc]
    assert bm25.num_docs == bm25.native.num_docs
    dense = DenseIndex.build(np.eye(4, dtype=np.float32), ["a", "b", "c", "d"])
    assert (dense.dim, dense.ntotal, dense.kind) == (4, 4, "flat")
    with pytest.raises(AttributeError, match="dim"):
        dense.dim = 8  # type: ignore[misc]
