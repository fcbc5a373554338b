"""A multi-vector index built from token files read in place (``MultiVectorIndex.build_files``,
``clirkit index multivector`` with several prefixes): the files equal those of the in-memory build over
the kept items' tokens concatenated (the path that loads every matrix and copies it into one), byte for
byte, whatever the parts' dtype, compression and item selection."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from clirkit._native import ClirkitError
from clirkit.cli import main as cli
from clirkit.encoders.tokens import load_tokens
from clirkit.multivector import MultiVectorIndex

OPTIONS = {"centroids": 16, "kmeans_sample": 300, "seed": 3, "quiet": True}


def write_tokens(prefix: Path, name: str, items: int, rng: np.random.Generator, dtype=np.float32) -> None:
    """``items`` items of 1 to 9 unit tokens (d = 16), ids ``NAME-i``, as ``clirkit encode --multivector``
    writes them."""
    lengths = rng.integers(1, 10, size=items)
    tokens = rng.standard_normal((int(lengths.sum()), 16)).astype(np.float32)
    tokens /= np.linalg.norm(tokens, axis=1, keepdims=True)
    np.save(f"{prefix}.tokens.npy", tokens.astype(dtype))
    np.save(f"{prefix}.offsets.npy", np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
    Path(f"{prefix}.ids.txt").write_text("".join(f"{name}-{i}\n" for i in range(items)), encoding="utf-8")


def concatenated(
    prefixes: list[Path], items: list[list[int] | None]
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The kept items of ``prefixes`` loaded and copied into one matrix: the build's input before it
    read files in place."""
    matrices, lengths, ids = [], [], []
    for prefix, keep in zip(prefixes, items):
        tokens, offsets, names = load_tokens(prefix)
        if keep is not None:
            spans = [tokens[offsets[n] : offsets[n + 1]] for n in keep]
            tokens, names = np.concatenate(spans), [names[n] for n in keep]
            offsets = np.concatenate([[0], np.cumsum([len(s) for s in spans])])
        matrices.append(tokens)
        lengths.append(np.diff(offsets.astype(np.int64)))
        ids.extend(names)
    offsets = np.concatenate([[0], np.cumsum(np.concatenate(lengths))]).astype(np.uint64)
    return np.concatenate(matrices), offsets, ids


def files(index: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in index.iterdir()}


@pytest.fixture
def parts(tmp_path):
    rng = np.random.default_rng(11)
    prefixes = [tmp_path / "zh", tmp_path / "fa", tmp_path / "ru"]
    write_tokens(prefixes[0], "zh", 120, rng)
    write_tokens(prefixes[1], "fa", 90, rng, np.float16)
    write_tokens(prefixes[2], "ru", 60, rng)
    # a gzip-compressed token file, which the native reader cannot read in place: read into memory
    raw = Path(f"{prefixes[2]}.tokens.npy")
    raw.write_bytes(gzip.compress(raw.read_bytes()))
    return prefixes


@pytest.mark.parametrize("keep_vectors", [False, True])
def test_build_files_equals_the_build_of_the_concatenated_items(tmp_path, parts, keep_vectors):
    items = [[n for n in range(120) if n % 4], None, [59, 3, 4, 5, 30]]
    MultiVectorIndex.build_files(parts, tmp_path / "files", items=items, keep_vectors=keep_vectors, **OPTIONS)
    tokens, offsets, ids = concatenated(parts, items)
    MultiVectorIndex.build(tokens, offsets, ids, tmp_path / "whole", keep_vectors=keep_vectors, **OPTIONS)
    assert files(tmp_path / "files") == files(tmp_path / "whole")


def test_cli_indexes_several_prefixes_as_the_concatenated_build(tmp_path, parts):
    args = ["--centroids", "16", "--kmeans-sample", "300", "--seed", "3", "--quiet", "--keep-vectors"]
    index = tmp_path / "cli"
    assert cli(["index", "multivector", "--embeddings", *map(str, parts), "--index", str(index), *args]) == 0
    tokens, offsets, ids = concatenated(parts, [None, None, None])
    MultiVectorIndex.build(tokens, offsets, ids, tmp_path / "whole", keep_vectors=True, **OPTIONS)
    assert files(index) == files(tmp_path / "whole")


def test_bad_parts_are_errors_naming_the_file_and_item(tmp_path, parts):
    with pytest.raises(ClirkitError, match=r"zh.tokens.npy: 120 items; item 120 was asked for"):
        MultiVectorIndex.build_files(parts[:1], tmp_path / "x", items=[[0, 120]], **OPTIONS)
    with pytest.raises(ClirkitError, match=r"items: 1 item lists for 2 token prefixes"):
        MultiVectorIndex.build_files(parts[:2], tmp_path / "x", items=[None], **OPTIONS)
    rng = np.random.default_rng(1)
    write_tokens(tmp_path / "wide", "w", 5, rng)
    tokens = np.load(f"{tmp_path / 'wide'}.tokens.npy")
    np.save(f"{tmp_path / 'wide'}.tokens.npy", np.concatenate([tokens, tokens], axis=1))
    with pytest.raises(ClirkitError, match=r"part 2 has tokens of dimension 32, part 1 has 16"):
        MultiVectorIndex.build_files([parts[0], tmp_path / "wide"], tmp_path / "x", **OPTIONS)
    big = np.load(f"{parts[0]}.tokens.npy")
    offsets = np.load(f"{parts[0]}.offsets.npy")
    big[offsets[7] + 0] *= 1e20
    np.save(f"{parts[0]}.tokens.npy", big)
    with pytest.raises(
        ClirkitError, match=r"zh.tokens.npy: token 0 of 'zh-7' \(item 7\) has a norm too large"
    ):
        MultiVectorIndex.build_files(parts[:1], tmp_path / "x", **OPTIONS)
    # an item left out is not read
    MultiVectorIndex.build_files(
        parts[:1], tmp_path / "x", items=[[n for n in range(120) if n != 7]], **OPTIONS
    )
    assert not (tmp_path / "x").with_suffix(".tmp").exists()
