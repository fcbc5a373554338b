"""Index ownership, consistent snapshots and integrity (issue 16, items 1-3): the reproductions
from the issue, `clirkit verify`, and short runs of the byte-flip sweep and the rebuild race
(the full runs are `benches/integrity/byte_flip_sweep.py` and `benches/integrity/rebuild_race.py`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from clirkit import BM25Index, IndexFormatError
from clirkit.cli import main as cli
from clirkit.dense import DenseIndex
from conftest import bench_module


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "c.jsonl"
    rows = [{"_id": f"d{i}", "text": f"zorp quux {'blip ' * (i % 4)}"} for i in range(30)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("kind", ["bm25", "dense"])
def test_a_directory_holding_meta_json_is_not_an_index_and_survives(tmp_path, corpus, kind, capsys):
    target = tmp_path / "d"
    target.mkdir()
    (target / "meta.json").write_text("{}")
    (target / "thesis.tex").write_text("x")
    if kind == "bm25":
        args = ["index", "bm25", "--corpus", str(corpus), "--index", str(target), "--quiet"]
    else:
        np.save(tmp_path / "e.npy", np.eye(30, 8, dtype=np.float32))
        (tmp_path / "ids.txt").write_text("".join(f"d{i}\n" for i in range(30)))
        args = ["index", "dense", "--embeddings", str(tmp_path / "e.npy"), "--ids", str(tmp_path / "ids.txt")]
        args += ["--index", str(target), "--quiet"]
    assert cli(args) != 0
    err = capsys.readouterr().err
    assert str(target) in err and "not a clirkit index" in err, err
    assert (target / "thesis.tex").read_text() == "x"
    with pytest.raises(IndexFormatError, match="not a clirkit index"):
        DenseIndex.build(np.eye(30, 8, dtype=np.float32), [f"d{i}" for i in range(30)], quiet=True).save(
            target
        )
    assert sorted(p.name for p in target.iterdir()) == ["meta.json", "thesis.tex"]


def test_verify_command_checks_every_file(tmp_path, corpus, capsys):
    index = tmp_path / "idx"
    BM25Index.build(corpus, index, quiet=True, store_docvectors=True)
    assert cli(["verify", str(index)]) == 0
    out = capsys.readouterr().out
    assert "ok (clirkit-bm25, 6 files" in out, out
    for name in ("docvectors.bin", "blockmax.bin"):
        path = index / name
        intact = path.read_bytes()
        data = bytearray(intact)
        data[-1] ^= 0x01  # the last chunk CRC: only a full check reads it
        path.write_bytes(bytes(data))
        assert cli(["verify", str(index)]) == 2
        err = capsys.readouterr().err
        assert name in err and "checksum mismatch" in err, err
        path.write_bytes(intact)


def test_avgdl_zero_is_an_error_at_open(tmp_path, corpus):
    index = tmp_path / "idx"
    BM25Index.build(corpus, index, quiet=True)
    meta = index / "meta.json"
    text = meta.read_text()
    meta.write_text(text.replace('"avgdl": ', '"avgdl": 0, "was": '))
    with pytest.raises(IndexFormatError, match="meta.json"):
        BM25Index.open(index)


def test_non_finite_vectors_are_refused_at_build():
    data = np.ones((4, 8), dtype=np.float32)
    data[2, 5] = np.nan
    with pytest.raises(Exception, match="vector 2 has a non-finite value"):
        DenseIndex.build(data, ["a", "b", "c", "d"], quiet=True)


def test_byte_flips_are_harmless_or_detected():
    sweep = bench_module("integrity/byte_flip_sweep")
    totals = sweep.run(scifact=False, samples=40, seed=7, docs=60, log=lambda line: None)
    for name, counts in totals.items():
        assert sum(counts.values()) > 0, name
        assert counts["silent"] == 0 and counts["panic"] == 0, (name, counts)
        assert counts["verify-differ"] == 0 and counts["unverified"] == 0, (name, counts)


def test_rebuild_race_never_mixes_builds():
    race = bench_module("integrity/rebuild_race")
    totals = race.run(seconds=3)
    for kind, c in totals.items():
        assert c["opens"] > 0 and c["rebuilds"] > 0, (kind, c)
        assert c["wrong"] == c["errors"] == c["panics"] == c["crashed_processes"] == 0, (kind, c)


# A process holding an index open, searching it before and after the parent's signal on stdin.
_VICTIM = """
import json, sys
from clirkit import BM25Index
from clirkit.dense import DenseIndex
import numpy as np
bm25, dense = BM25Index.open(sys.argv[1]), DenseIndex.open(sys.argv[2])
query = np.eye(1, 8, 3, dtype=np.float32)
def results():
    return [bm25.search("zorp blip", k=5), dense.search(query, k=5)[1].tolist()]
print(json.dumps(results()), flush=True)
sys.stdin.readline()
print(json.dumps(results()), flush=True)
"""


def test_truncated_files_under_an_open_index_do_not_kill_its_reader(tmp_path, corpus):
    """What is safe (README, "Index integrity"): clirkit replaces an index only by renaming a new
    directory over it, so a reader keeps the build it opened, and truncating the files now under
    the name (even in place) makes a fresh open fail with a clear error; inputs are read with
    read(), never mapped, so a truncated input is a shorter file."""
    import subprocess

    bm25, dense = tmp_path / "bm25", tmp_path / "dense"
    BM25Index.build(corpus, bm25, quiet=True)
    vectors = np.random.default_rng(3).standard_normal((30, 8)).astype(np.float32)
    DenseIndex.build(vectors, [f"d{i}" for i in range(30)], quiet=True).save(dense)
    victim = subprocess.Popen(
        [sys.executable, "-c", _VICTIM, str(bm25), str(dense)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    before = victim.stdout.readline()
    assert before, "the reader failed to start"
    # Rebuild both under the reader, then truncate every file now under their names in place.
    other = tmp_path / "other.jsonl"
    other.write_text('{"_id": "x", "text": "zorp"}\n', encoding="utf-8")
    BM25Index.build(other, bm25, quiet=True)
    DenseIndex.build(vectors[::-1].copy(), [f"e{i}" for i in range(30)], quiet=True).save(dense)
    for index in (bm25, dense):
        for file in index.glob("*.bin"):
            with open(file, "r+b") as f:
                f.truncate(file.stat().st_size // 2)
    victim.stdin.write("go\n")
    victim.stdin.flush()
    after = victim.stdout.readline()
    assert victim.wait(timeout=60) == 0
    assert json.loads(after) == json.loads(before)
    for open_index, path in ((BM25Index.open, bm25), (DenseIndex.open, dense)):
        with pytest.raises(IndexFormatError, match=r"\.bin"):
            open_index(path)
    # An input truncated while it is being read: the reader sees a shorter file.
    from clirkit.datasets import ParseError, iter_jsonl

    big = tmp_path / "big.jsonl"
    big.write_text("".join(f'{{"_id": "d{i}", "text": "{"x" * 60}"}}\n' for i in range(100_000)))
    records = iter_jsonl(big)
    assert next(records).id == "d0"
    with open(big, "r+b") as f:
        f.truncate(10)
    # What was buffered before the truncation is read, then the file ends: fewer records, or
    # the cut line as a parse error naming it; never a crash.
    try:
        assert len(list(records)) < 99_999
    except ParseError as err:
        assert "big.jsonl:" in str(err) and "malformed JSON" in str(err)
