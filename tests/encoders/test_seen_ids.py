"""Duplicate-id detection over hashes: exact even when every hash collides, file:line in its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirkit import DuplicateIdError
from clirkit.encoders.seen_ids import SeenIds


def jsonl(path: Path, ids: list[str]) -> Path:
    """One record per id, with a blank line after every third record (line numbers and offsets must skip it)."""
    with open(path, "w", encoding="utf-8") as f:
        for n, doc_id in enumerate(ids, 1):
            f.write(json.dumps({"_id": doc_id, "text": f"text of {doc_id} ü"}, ensure_ascii=False) + "\n")
            if n % 3 == 0:
                f.write("\n")
    return path


def line_of(ids: list[str], index: int) -> int:
    """The file line of ``ids[index]`` as :func:`jsonl` writes it."""
    return index + 1 + index // 3


def read_all(path: Path, batch: int, hash_id=hash) -> SeenIds:
    seen = SeenIds(path, hash_id=hash_id)
    seen.add_input_before(path.stat().st_size, batch)
    return seen


@pytest.mark.parametrize("hash_id", [lambda _: 42, len, hash], ids=["all-collide", "by-length", "default"])
def test_distinct_ids_pass_whatever_the_hash_collisions(tmp_path, hash_id):
    ids = [f"d{i}" for i in range(60)] + ["ü-1", "x"]
    seen = read_all(jsonl(tmp_path / "c.jsonl", ids), batch=4, hash_id=hash_id)
    assert len(seen) == len(ids)


@pytest.mark.parametrize("hash_id", [lambda _: 42, len, hash], ids=["all-collide", "by-length", "default"])
@pytest.mark.parametrize("batch", [1, 5, 100])
def test_a_repeated_id_is_found_with_both_lines(tmp_path, hash_id, batch):
    ids = [f"d{i}" for i in range(40)]
    ids[33] = "d7"  # and d12 later repeats d9: the first repetition in file order is reported
    ids[37] = "d9"
    path = jsonl(tmp_path / "dup.jsonl", ids)
    expected = rf"dup\.jsonl:{line_of(ids, 33)}: duplicate id 'd7' \(first seen at line {line_of(ids, 7)}\)"
    with pytest.raises(DuplicateIdError, match=expected):
        read_all(path, batch, hash_id)


def test_repeat_inside_one_batch_and_across_merged_runs(tmp_path):
    ids = [f"doc-{i}" for i in range(1000)] + ["doc-3"]
    path = jsonl(tmp_path / "big.jsonl", ids)
    expected = (
        rf"big\.jsonl:{line_of(ids, 1000)}: duplicate id 'doc-3' \(first seen at line {line_of(ids, 3)}\)"
    )
    with pytest.raises(DuplicateIdError, match=expected):
        read_all(path, batch=7)  # 143 batches: runs merged many times before the repeat arrives
    with pytest.raises(DuplicateIdError, match=expected):
        read_all(path, batch=2000)


def test_resumed_reader_knows_the_ids_before_its_offset(tmp_path):
    ids = ["a", "b", "c", "d", "e"]
    path = jsonl(tmp_path / "r.jsonl", ids)
    offset_after_c = len(path.read_bytes().split(b"\n\n")[0]) + 2  # three records and the blank line
    seen = SeenIds(path, hash_id=lambda _: 0)
    seen.add_input_before(offset_after_c, batch=2)
    assert len(seen) == 3
    with pytest.raises(DuplicateIdError, match=r"r\.jsonl:6: duplicate id 'b' \(first seen at line 2\)"):
        seen.add(["b"], [offset_after_c], [6])
    seen.add(["d"], [offset_after_c], [5])
    assert len(seen) == 4
