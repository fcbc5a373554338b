"""`clirkit verify` checks every byte of every file, the headers included, for every index kind
(issue 32 item 7, finding F13 of the hostile-input report: a flip of a binary file's header kind or
version bytes, offsets 8-19, passed `verify` while search refused the index). And the one list of
index kinds (`clirkit._native.index_kinds`) is what `verify` and `index merge` dispatch on."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from clirkit import BM25Index, IndexFormatError
from clirkit._native import index_format, index_kinds, verify_index
from clirkit.cli import main as cli
from clirkit.dense import DenseIndex
from clirkit.impact import ImpactIndex
from clirkit.multivector import MultiVectorIndex

#: The header's kind (8 bytes) and version (4 bytes), which no payload CRC covers.
KIND_AND_VERSION = range(8, 20)


def _vectors(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def indexes(tmp_path_factory, sample_dir: Path) -> dict[str, Path]:
    """One index of every kind over the embedded sample (small: every header is flipped)."""
    work = tmp_path_factory.mktemp("kinds")
    corpus = work / "corpus.jsonl"
    lines = (sample_dir / "corpus.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[:30]
    corpus.write_text("".join(lines), encoding="utf-8")
    ids = [str(json.loads(line)["_id"]) for line in lines]
    out = {"bm25": work / "bm25"}
    BM25Index.build(corpus, out["bm25"], lang_field="lang", quiet=True, threads=1, store_docvectors=True)
    weights = work / "impact.jsonl"
    with open(weights, "w", encoding="utf-8") as f:
        for i in ids:
            f.write(json.dumps({"id": i, "vector": {"a": 1.0, f"t{i}": 2.0}}) + "\n")
    out["impact"] = work / "impact"
    ImpactIndex.build(weights, out["impact"], threads=1, quiet=True)
    docs = _vectors(len(ids), 16, 1)
    out["dense"] = work / "dense"
    DenseIndex.build(docs, ids, pq=8, threads=1, quiet=True).save(out["dense"])
    lengths = np.array([2 + i % 3 for i in range(len(ids))])
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.uint64)
    out["multivector"] = work / "multivector"
    MultiVectorIndex.build(
        _vectors(int(lengths.sum()), 16, 2), offsets, ids, out["multivector"], nbits=2, threads=1,
        keep_vectors=True,
    )  # fmt: skip
    return out


def _binary_files(index: Path) -> list[Path]:
    return sorted(p for p in index.iterdir() if p.is_file() and p.name != "meta.json")


@pytest.mark.parametrize("kind", ["bm25", "impact", "dense", "multivector"])
def test_verify_refuses_a_flip_of_any_header_kind_or_version_byte(indexes, kind):
    index = indexes[kind]
    verify_index(str(index))
    files = _binary_files(index)
    assert files, index
    for file in files:
        original = file.read_bytes()
        try:
            for at in KIND_AND_VERSION:
                flipped = bytearray(original)
                flipped[at] ^= 1 << (at % 8)
                file.write_bytes(flipped)
                with pytest.raises(IndexFormatError, match=file.name):
                    verify_index(str(index))
        finally:
            file.write_bytes(original)
    verify_index(str(index))


def test_cli_verify_refuses_the_reports_reproduction(indexes, capsys):
    """F13's reproduction: version byte 16 of an impact index's postings set to 9."""
    postings = indexes["impact"] / "postings.bin"
    original = postings.read_bytes()
    try:
        postings.write_bytes(original[:16] + b"\x09" + original[17:])
        assert cli(["verify", str(indexes["impact"])]) == 2
        assert "postings.bin: format version 9" in capsys.readouterr().err
    finally:
        postings.write_bytes(original)
    assert cli(["verify", str(indexes["impact"])]) == 0


def test_one_list_of_kinds_names_every_kind_and_what_merges(indexes):
    kinds = dict(index_kinds())
    assert {"clirkit-bm25", "clirkit-impact", "clirkit-dense", "clirkit-multivector"} <= set(kinds)
    assert {"clirkit-sharded-bm25", "clirkit-sharded-dense"} <= set(kinds)
    assert [f for f, mergeable in kinds.items() if mergeable] == ["clirkit-bm25", "clirkit-dense"]
    for kind, path in indexes.items():
        assert index_format(str(path)) == f"clirkit-{kind}"


def test_merge_is_dispatched_by_the_core(indexes, tmp_path, capsys):
    out = tmp_path / "merged"
    assert cli(["index", "merge", "--index", str(out), str(indexes["impact"])]) == 2
    err = capsys.readouterr().err
    assert "'clirkit-impact' indexes cannot be merged (only clirkit-bm25, clirkit-dense)" in err, err
    assert cli(["index", "merge", "--index", str(out), str(indexes["bm25"]), str(indexes["dense"])]) == 2
    err = capsys.readouterr().err
    assert 'different kinds cannot be merged: ["clirkit-bm25", "clirkit-dense"]' in err, err
    (tmp_path / "plain").mkdir()
    assert cli(["index", "merge", "--index", str(out), str(tmp_path / "plain")]) == 2
    assert not out.exists()
    # The BM25 merge is reached (and refuses docvectors, which it cannot carry); dense merges.
    assert cli(["index", "merge", "--index", str(out), str(indexes["bm25"])]) == 2
    assert "stores document vectors" in capsys.readouterr().err
    assert cli(["index", "merge", "--quiet", "--index", str(out), str(indexes["dense"])]) == 0
    assert DenseIndex.open(out).ntotal == 30
    verify_index(str(out))
