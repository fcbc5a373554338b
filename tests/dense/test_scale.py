"""Streamed dense builds, append, merge (dense and BM25) through the API and the CLI."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from clirkit import BM25Index, DenseIndex, InvalidInputError
from clirkit.cli import main


def clustered(n: int, d: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(8, d)).astype(np.float32)
    x = c[rng.integers(0, 8, n)] + 0.4 * rng.normal(size=(n, d)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def files(index: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(index.iterdir())}


def write_ids(path: Path, ids: list[str]) -> str:
    path.write_text("\n".join(ids) + "\n")
    return str(path)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_streamed_build_equals_in_memory_build(tmp_path, dtype):
    x = clustered(700, 16, 0).astype(dtype)
    ids = [f"d{i}" for i in range(len(x))]
    np.save(tmp_path / "x.npy", x)
    options = {"pq": 8, "ivf": 4, "train_size": 300, "seed": 3}
    DenseIndex.build(x, ids, **options).save(tmp_path / "memory")
    # One MB of chunk budget against a 22-45 KB file, and one far below it (chunks of 32 rows).
    for memory_mb in [1, 0]:
        streamed = DenseIndex.build_file(
            tmp_path / "x.npy", ids, tmp_path / "streamed", memory_mb=memory_mb, **options
        )
        assert streamed.ntotal == len(x)
        assert files(tmp_path / "memory") == files(tmp_path / "streamed")


def test_add_streams_several_files_and_row_selections(tmp_path):
    """``add`` of ``.npy`` files with ``rows`` (as ``build_file`` takes them) writes what ``add`` of the
    matrix of those rows writes; a file that cannot be streamed (float64) is read into memory."""
    x = clustered(400, 16, 4)
    np.save(tmp_path / "a.npy", x[:150].astype(np.float16))
    np.save(tmp_path / "b.npy", x[150:])
    np.save(tmp_path / "b64.npy", x[150:].astype(np.float64))
    kept = [n for n in range(250) if n % 4]
    ids = [f"a{n}" for n in range(10, 150)] + [f"b{n}" for n in kept]
    codebook = DenseIndex.build(x, [f"x{i}" for i in range(len(x))], pq=8, ivf=3, train_size=300, seed=1)
    matrix = np.concatenate([x[10:150].astype(np.float16).astype(np.float32), x[150:][kept]])
    codebook.add(matrix, ids, tmp_path / "memory", keep_rows=False)
    for b in ("b.npy", "b64.npy"):
        out = tmp_path / f"streamed-{b}"
        parts = [tmp_path / "a.npy", tmp_path / b]
        added = codebook.add(parts, ids, out, rows=[range(10, 150), kept], keep_rows=False, memory_mb=0)
        assert added.ntotal == len(ids) and files(out) == files(tmp_path / "memory"), b
    with pytest.raises(InvalidInputError, match="rows applies to .npy files"):
        codebook.add(matrix, ids, tmp_path / "bad", rows=[None])


def test_cli_append_and_merge_equal_one_build_with_the_same_codebook(tmp_path):
    x = clustered(500, 16, 1)
    q = clustered(7, 16, 2)
    ids = [f"d{i}" for i in range(len(x))]
    np.save(tmp_path / "a16.npy", x[:200].astype(np.float16))
    np.save(tmp_path / "b.npy", x[200:])
    np.save(tmp_path / "q.npy", q)
    dense = ["index", "dense", "--quiet", "--memory-mb", "0"]
    once = str(tmp_path / "once")
    # The first part is given as float16: the whole collection holds the same values.
    x[:200] = x[:200].astype(np.float16).astype(np.float32)
    np.save(tmp_path / "all.npy", x)
    assert main([*dense, "--embeddings", str(tmp_path / "all.npy"), "--ids", write_ids(tmp_path / "all.txt", ids),
                 "--index", once, "--pq", "8"]) == 0  # fmt: skip
    grown = str(tmp_path / "grown")
    assert main([*dense, "--embeddings", str(tmp_path / "a16.npy"), "--ids", write_ids(tmp_path / "a.txt", ids[:200]),
                 "--index", grown, "--codebook-from", once]) == 0  # fmt: skip
    part_a = files(Path(grown))
    b_ids = write_ids(tmp_path / "b.txt", ids[200:])
    assert (
        main([*dense, "--embeddings", str(tmp_path / "b.npy"), "--ids", b_ids, "--index", grown, "--append"])
        == 0
    )
    assert files(Path(once)) == files(Path(grown))
    search = ["search", "dense", "--queries", str(tmp_path / "q.npy"), "--k", "20", "--quiet",
              "--qids", write_ids(tmp_path / "qids.txt", [f"q{i}" for i in range(len(q))])]  # fmt: skip
    for index in [once, grown]:
        assert main([*search, "--index", index, "--output", f"{index}.trec"]) == 0
    assert Path(f"{once}.trec").read_bytes() == Path(f"{grown}.trec").read_bytes()

    b = str(tmp_path / "b")
    assert main([*dense, "--embeddings", str(tmp_path / "b.npy"), "--ids", b_ids, "--index", b,
                 "--codebook-from", once]) == 0  # fmt: skip
    a = tmp_path / "a"
    a.mkdir()
    for name, content in part_a.items():
        (a / name).write_bytes(content)
    merged = tmp_path / "merged"
    assert main(["index", "merge", "--quiet", "--index", str(merged), str(a), b]) == 0
    assert files(Path(once)) == files(merged)

    other = DenseIndex.build(x, ids, pq=8, seed=5)
    other.save(tmp_path / "other")
    with pytest.raises(InvalidInputError, match="same codebook"):
        DenseIndex.merge([DenseIndex.open(a), DenseIndex.open(tmp_path / "other")], tmp_path / "bad")


def test_bm25_merge_equals_one_build(tmp_path):
    lines = [f'{{"_id": "doc{i}", "text": "w{i % 7} w{i % 3} common w{i % 11} w{i}"}}' for i in range(90)]
    (tmp_path / "all.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "a.jsonl").write_text("\n".join(lines[:40]) + "\n")
    (tmp_path / "b.jsonl").write_text("\n".join(lines[40:]) + "\n")
    for name in ["all", "a", "b"]:
        BM25Index.build(tmp_path / f"{name}.jsonl", tmp_path / name, quiet=True)
    assert main(["index", "merge", "--quiet", "--index", str(tmp_path / "merged"),
                 str(tmp_path / "a"), str(tmp_path / "b")]) == 0  # fmt: skip
    whole, merged = files(tmp_path / "all"), files(tmp_path / "merged")
    assert {k: v for k, v in whole.items() if k != "meta.json"} == {
        k: v for k, v in merged.items() if k != "meta.json"
    }
    one, two = BM25Index.open(tmp_path / "all"), BM25Index.open(tmp_path / "merged")
    assert (one.num_docs, one.avgdl) == (two.num_docs, two.avgdl)
    assert one.search("common w3", k=20) == two.search("common w3", k=20)
    assert main(["index", "merge", "--quiet", "--index", str(tmp_path / "x"), str(tmp_path / "a"),
                 str(tmp_path / "grown")]) == 2  # fmt: skip


def test_float16_rescoring_vectors_search_as_their_float32_widening(tmp_path):
    # Vectors exactly representable in float16: re-scoring widened float16 rows sees the same values.
    x = clustered(600, 16, 4).astype(np.float16)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "q.npy", clustered(9, 16, 5))
    ids = write_ids(tmp_path / "ids.txt", [f"d{i}" for i in range(len(x))])
    qids = write_ids(tmp_path / "qids.txt", [f"q{i}" for i in range(9)])
    runs = {}
    for dtype in ["float32", "float16"]:
        index = tmp_path / dtype
        assert main(["index", "dense", "--quiet", "--embeddings", str(tmp_path / "x.npy"), "--ids", ids,
                     "--index", str(index), "--pq", "8", "--vector-dtype", dtype, "--memory-mb", "0"]) == 0  # fmt: skip
        assert DenseIndex.open(index).vector_dtype == dtype
        assert main(["verify", str(index)]) == 0
        assert main(["search", "dense", "--quiet", "--index", str(index), "--queries", str(tmp_path / "q.npy"),
                     "--qids", qids, "--k", "20", "--output", str(tmp_path / f"{dtype}.trec")]) == 0  # fmt: skip
        runs[dtype] = (tmp_path / f"{dtype}.trec").read_bytes()
    assert runs["float16"] == runs["float32"]
    wide, narrow = files(tmp_path / "float32"), files(tmp_path / "float16")
    assert sorted(set(wide) ^ set(narrow)) == ["vectors.bin", "vectors_f16.bin"]
    assert len(narrow["vectors_f16.bin"]) < 0.51 * len(wide["vectors.bin"])
    assert narrow["codes.bin"] == wide["codes.bin"]
    in_memory = DenseIndex.build(x, [f"d{i}" for i in range(len(x))], pq=8, vector_dtype="float16")
    in_memory.save(tmp_path / "memory")
    assert files(tmp_path / "memory") == narrow
    with pytest.raises(InvalidInputError, match="needs pq"):
        DenseIndex.build(x, [f"d{i}" for i in range(len(x))], vector_dtype="float16")
    with pytest.raises(InvalidInputError, match="float32"):
        DenseIndex.build(x, [f"d{i}" for i in range(len(x))], pq=8, vector_dtype="bfloat16")
