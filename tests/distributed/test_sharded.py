"""A sharded index's manifest is read through the core's one list of index kinds
(``_native.sharded_manifest``, dispatched by format name in ``index_kinds.rs``), whatever its kind;
a directory holding no sharded index, or one of a kind this clirkit does not read, is refused
naming it. No Ray needed: the shards are built in threads."""

from __future__ import annotations

import json

import pytest
from clirkit import BM25Index, IndexFormatError, InvalidInputError
from clirkit.distributed.bm25 import build_sharded_bm25
from clirkit.distributed.sharded import read_manifest


def write_corpus(path, n):
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({"_id": f"d{i}", "text": f"word{i % 7} common text {i}"}) + "\n")
    return path


def test_the_manifest_of_a_sharded_bm25_index(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.jsonl", 30)
    build_sharded_bm25(corpus, tmp_path / "sharded", 3, threads=1, quiet=True)
    manifest = read_manifest(tmp_path / "sharded")
    assert (manifest.kind, len(manifest.shards), manifest.num_docs) == ("bm25", 3, 30)
    assert manifest.fields["format"] == "clirkit-sharded-bm25"
    # A shard missing: refused, naming it.
    shard = tmp_path / "sharded" / manifest.shards[1].dir
    (shard / "meta.json").unlink()
    with pytest.raises(IndexFormatError, match="shard 1 of the sharded index is missing"):
        read_manifest(tmp_path / "sharded")


def test_anything_else_is_refused_naming_it(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.jsonl", 5)
    BM25Index.build(corpus, tmp_path / "plain", quiet=True)
    with pytest.raises(InvalidInputError, match="plain: not a sharded index"):
        read_manifest(tmp_path / "plain")
    future = tmp_path / "future"
    future.mkdir()
    (future / "meta.json").write_text(json.dumps({"format": "clirkit-sharded-future", "version": 1}))
    with pytest.raises(
        IndexFormatError, match="'clirkit-sharded-future' index, which this clirkit does not read"
    ):
        read_manifest(future)
