"""The impact build within a memory budget: past ``--memory-mb`` postings are spilled to disk as sorted
runs and merged, and the index files are the same as an in-memory build's, byte for byte; several
vector files build the index of their concatenation."""

from __future__ import annotations

import json
import random
from pathlib import Path

from clirkit.cli import main as cli
from clirkit.impact import ImpactIndex


def _vectors(path: Path, n: int, seed: int, first: int = 0) -> Path:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(first, first + n):
            terms = {
                f"t{int(400 ** rng.random())}": round(rng.uniform(0.1, 3.0), 2)
                for _ in range(rng.randint(1, 80))
            }
            f.write(json.dumps({"id": f"d{i}", "vector": terms}) + "\n")
    return path


def _files(index: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(index.iterdir())}


def test_a_one_megabyte_budget_spills_and_changes_no_byte(tmp_path):
    # 20,000 documents of up to 80 terms: about 6 MB of postings, spilled after every block of lines
    vectors = _vectors(tmp_path / "docs.jsonl", 20_000, 1)
    assert cli(["index", "impact", "--vectors", str(vectors), "--index", str(tmp_path / "a"), "--quiet"]) == 0
    assert cli(["index", "impact", "--vectors", str(vectors), "--index", str(tmp_path / "b"),
                "--memory-mb", "1", "--quiet"]) == 0  # fmt: skip
    assert _files(tmp_path / "a") == _files(tmp_path / "b")


def test_several_files_index_their_concatenation(tmp_path):
    parts = [_vectors(tmp_path / f"p{n}.jsonl", 300, n, first=300 * n) for n in range(3)]
    whole = tmp_path / "whole.jsonl"
    whole.write_text("".join(p.read_text(encoding="utf-8") for p in parts), encoding="utf-8")
    a = ImpactIndex.build(whole, tmp_path / "a", memory_budget_mb=1)
    b = ImpactIndex.build(parts, tmp_path / "b", memory_budget_mb=1)
    files_a, files_b = _files(tmp_path / "a"), _files(tmp_path / "b")
    del files_a["meta.json"], files_b["meta.json"]  # each names its input files
    assert files_a == files_b
    assert a.num_docs == b.num_docs == 900
