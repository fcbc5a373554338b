"""The one reader of a ``.npy`` matrix and its ids file (``clirkit.dense.vectors.load_vectors``): every
caller, ``load_embeddings`` included, gets the id rule of ``read_ids`` and the row-count check."""

from __future__ import annotations

import numpy as np
import pytest
from clirkit import IndexFormatError, InvalidInputError
from clirkit.dense import load_vectors
from clirkit.encoders import load_embeddings


def write_pair(prefix, rows, ids_text):
    np.save(f"{prefix}.npy", np.arange(rows * 4, dtype=np.float32).reshape(rows, 4))
    with open(f"{prefix}.ids.txt", "w", encoding="utf-8", newline="") as f:
        f.write(ids_text)


@pytest.mark.parametrize("mapped", [False, True])
def test_a_matrix_and_its_ids(tmp_path, mapped):
    prefix = tmp_path / "emb"
    write_pair(prefix, 3, "\ufeffd1\r\nd2\nd3\n")
    matrix, ids = load_vectors(f"{prefix}.npy", f"{prefix}.ids.txt", mapped=mapped)
    assert ids == ["d1", "d2", "d3"] and matrix.shape == (3, 4)
    assert isinstance(matrix, np.memmap) == mapped


@pytest.mark.parametrize("reader", ["load_vectors", "load_embeddings"])
@pytest.mark.parametrize(
    "ids_text, problem",
    [("d1\nd 2\nd3\n", r"ids.txt:2: .*white space"), ("d1\n\nd3\n", r"ids.txt:2: .*empty")],
)
def test_ids_are_checked_by_the_one_id_rule(tmp_path, reader, ids_text, problem):
    prefix = tmp_path / "emb"
    write_pair(prefix, 3, ids_text)
    with pytest.raises(InvalidInputError, match=problem):
        if reader == "load_vectors":
            load_vectors(f"{prefix}.npy", f"{prefix}.ids.txt")
        else:
            load_embeddings(prefix)


@pytest.mark.parametrize("reader", ["load_vectors", "load_embeddings"])
def test_rows_and_ids_must_agree(tmp_path, reader):
    prefix = tmp_path / "emb"
    write_pair(prefix, 3, "d1\nd2\n")
    with pytest.raises(IndexFormatError, match=r"emb.npy has shape \(3, 4\) but .*emb.ids.txt lists 2 ids"):
        if reader == "load_vectors":
            load_vectors(f"{prefix}.npy", f"{prefix}.ids.txt")
        else:
            load_embeddings(prefix)
