"""Hostile numbers, ids and file formats on the command line and in the Python API (report findings
F8, F15, F16, F17, F21, F22): each is a clean error naming the option, file or line, never a
traceback; gzip inputs are read by the Python readers; ``.npy`` inputs are read, not mapped."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from clirkit import ClirkitError, ImpactIndex, MultiVectorIndex
from clirkit.cli import main as cli
from clirkit.encoders.tokens import load_tokens
from conftest import search_command


def tokens(rows: int, dim: int = 8) -> np.ndarray:
    x = np.random.default_rng(0).standard_normal((rows, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def write_tokens(prefix: Path, ids: list[str], compress: bool = False) -> None:
    per = 5
    np.save(f"{prefix}.tokens.npy", tokens(per * len(ids)))
    np.save(f"{prefix}.offsets.npy", np.arange(0, per * len(ids) + 1, per))
    data = "".join(i + "\n" for i in ids).encode()
    Path(f"{prefix}.ids.txt").write_bytes(gzip.compress(data) if compress else data)


@pytest.mark.parametrize(
    "argv",
    [
        ["index", "impact", "--vectors", "v.jsonl", "--index", "i", "--quantize", "-1"],
        ["index", "impact", "--vectors", "v.jsonl", "--index", "i", "--quantize", "4294967297"],
        ["index", "multivector", "--embeddings", "p", "--index", "i", "--seed", "-1"],
        ["index", "multivector", "--embeddings", "p", "--index", "i", "--kmeans-sample", "-3"],
        ["search", "multivector", "--index", "i", "--queries", "q", "--output", "o", "--ncells", "-1"],
        ["search", "multivector", "--index", "i", "--queries", "q", "--output", "o", "--ndocs", "-5"],
        ["eval", "compare", "--qrels", "q", "--run", "r", "--seed", "-1"],
        ["rerank", "--run", "r", "--queries", "q", "--corpus", "c", "--output", "o", "--depth", "-1"],
        ["index", "multivector", "--embeddings", "p", "--index", "i", "--centroids", "99999999999999999999"],
    ],
)
def test_bad_numbers_are_usage_errors_naming_the_option(argv, capsys):
    with pytest.raises(SystemExit) as exit:
        cli(argv)
    assert exit.value.code == 2
    option = next(a for a in argv if a.startswith("--") and argv[argv.index(a) + 1].lstrip("-").isdigit())
    assert f"argument {option}" in capsys.readouterr().err


def test_python_api_refuses_bad_numbers_cleanly(tmp_path):
    t = tokens(20)
    offsets = np.arange(0, 21, 5)
    for options in [{"nbits": -1}, {"threads": -1}, {"seed": -1}, {"kmeans_sample": 0}, {"nbits": True}]:
        with pytest.raises(ClirkitError, match=next(iter(options))):
            MultiVectorIndex.build(t, offsets, ["a", "b", "c", "d"], tmp_path / "mv", **options)
    index = MultiVectorIndex.build(t, offsets, ["a", "b", "c", "d"], tmp_path / "mv")
    for options in [{"ncells": -1}, {"ndocs": 2**70}]:
        with pytest.raises(ClirkitError, match=next(iter(options))):
            index.search(t[:5], np.array([0, 5]), k=2, **options)
    vectors = tmp_path / "v.jsonl"
    vectors.write_text('{"id": "d1", "vector": {"apple": 1}}\n')
    with pytest.raises(ClirkitError, match="quantize"):
        ImpactIndex.build(vectors, tmp_path / "imp", quantize=-1)
    imp = ImpactIndex.build(vectors, tmp_path / "imp")
    for weight in ["1", True, None]:
        with pytest.raises(ClirkitError, match="not a number"):
            imp.search({"apple": weight})
    assert imp.search({"apple": 1})[0][0] == "d1"


def test_impact_ids_follow_the_one_id_rule(tmp_path, capsys):
    vectors = tmp_path / "v.jsonl"
    vectors.write_text('{"id": 123456789012345678901234567890, "vector": {"apple": 1}}\n')
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tapple\n")
    assert cli(["index", "impact", "--vectors", str(vectors), "--index", str(tmp_path / "i"), "--quiet"]) == 0
    out = tmp_path / "r.trec"
    search = search_command("impact", tmp_path / "i", queries, out)
    assert cli(search) == 0
    assert out.read_text().split()[2] == "123456789012345678901234567890"
    for bad in ["1.5", '"a b"', '""', '"a\\u0000b"']:
        vectors.write_text(f'{{"id": {bad}, "vector": {{"apple": 1}}}}\n')
        assert (
            cli(["index", "impact", "--vectors", str(vectors), "--index", str(tmp_path / "j"), "--quiet"])
            == 2
        )
        assert f"{vectors}:1:" in capsys.readouterr().err
    queries.write_text("q 1\tapple\n")
    assert cli(search) == 2
    assert "q.tsv:1:" in capsys.readouterr().err


def test_duplicate_json_key_keeps_the_last_weight(tmp_path):
    vectors = tmp_path / "v.jsonl"
    vectors.write_text(
        '{"id": "d1", "vector": {"apple": 1, "apple": 2}}\n{"id": "d2", "vector": {"apple": 2}}\n'
    )
    hits = ImpactIndex.build(vectors, tmp_path / "i").search({"apple": 1})
    assert hits[0][1] == hits[1][1]  # d1's apple is 2, as d2's: never 1 + 2


def test_multivector_ids_are_checked_and_gzip_read(tmp_path):
    write_tokens(tmp_path / "p", ["a", "b c", "d"])
    with pytest.raises(ClirkitError, match=r"p\.ids\.txt:2: .*white space"):
        load_tokens(tmp_path / "p")
    write_tokens(tmp_path / "p", ["a", "", "d"])
    with pytest.raises(ClirkitError, match=r"p\.ids\.txt:2: id is empty"):
        load_tokens(tmp_path / "p")
    write_tokens(tmp_path / "p", ["a", "b", "d"], compress=True)
    _, _, ids = load_tokens(tmp_path / "p")
    assert ids == ["a", "b", "d"]


def test_npy_inputs_are_read_not_mapped_and_odd_ones_refused(tmp_path, capsys):
    write_tokens(tmp_path / "p", ["a", "b"])
    t, offsets, _ = load_tokens(tmp_path / "p")
    assert not isinstance(t, np.memmap) and not isinstance(t.base, np.memmap)
    np.save(tmp_path / "p.offsets.npy", np.array([0, 5, 10], dtype=object), allow_pickle=True)
    with pytest.raises(ClirkitError, match=r"p\.offsets\.npy: not a numeric \.npy array"):
        load_tokens(tmp_path / "p")
    emb = tmp_path / "e.npy"
    np.save(emb, tokens(3))
    gz = tmp_path / "e.npy.gz"
    gz.write_bytes(gzip.compress(emb.read_bytes()))
    ids = tmp_path / "ids.txt"
    ids.write_text("a\nb\nc\n")

    def index_dense(name: str) -> int:
        argv = ["index", "dense", "--embeddings", str(gz), "--ids", str(ids), "--index", str(tmp_path / name)]
        return cli([*argv, "--quiet"])

    assert index_dense("d") == 0
    gz.write_bytes(b"\x1f\x8b" + b"junk")
    assert index_dense("d2") == 2
    assert "e.npy.gz" in capsys.readouterr().err


def test_small_wording_fixes(tmp_path, capsys):
    """F23: a decompression error reads as one (never "[Errno 0] ..."); a huge weight is printed in
    e-notation, not as a 300-digit number."""
    corpus = tmp_path / "trunc.jsonl.gz"
    corpus.write_bytes(gzip.compress(b'{"_id": "a", "text": "x"}\n' * 100)[:-20])
    assert cli(["index", "bm25", "--corpus", str(corpus), "--index", str(tmp_path / "i"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "trunc.jsonl.gz" in err and "[Errno 0]" not in err
    vectors = tmp_path / "v.jsonl"
    vectors.write_text('{"id": "d", "vector": {"a": 1e300}}\n')
    assert cli(["index", "impact", "--vectors", str(vectors), "--index", str(tmp_path / "j"), "--quiet"]) == 2
    assert "1e300" in capsys.readouterr().err


def test_keep_first_duplicate_with_shards_is_refused_up_front(tmp_path, capsys):
    """F23: --keep-first-duplicate cannot keep a duplicate across shards, so it is refused before
    anything is built (never an error naming a hidden .X.building-*/shard-N directory)."""
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(f'{{"_id": "d{i % 3}", "text": "word {i}"}}\n' for i in range(6)))
    argv = ["index", "bm25", "--corpus", str(corpus), "--index", str(tmp_path / "i"), "--shards", "2"]
    assert cli([*argv, "--keep-first-duplicate", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "keep_first_duplicate cannot go with shards" in err and ".building" not in err
    assert not (tmp_path / "i").exists()


def test_merge_of_docvector_indexes_names_the_flag_that_exists(tmp_path, capsys):
    """F23: the merge refusal names --store-docvectors (there is no --docvectors)."""
    for name in ("a", "b"):
        corpus = tmp_path / f"{name}.jsonl"
        corpus.write_text(f'{{"_id": "{name}", "text": "{name} pie"}}\n')
        argv = [
            "index",
            "bm25",
            "--corpus",
            str(corpus),
            "--index",
            str(tmp_path / name),
            "--store-docvectors",
        ]
        assert cli([*argv, "--quiet"]) == 0
    assert (
        cli(["index", "merge", str(tmp_path / "a"), str(tmp_path / "b"), "--index", str(tmp_path / "m")]) == 2
    )
    err = capsys.readouterr().err
    assert "--store-docvectors" in err and "--docvectors" not in err.replace("--store-docvectors", "")


def test_another_builds_dense_codebook_is_named_as_the_codebook(tmp_path, capsys):
    """F23: a swapped codebook/ of a sharded dense index is reported as the codebook, not as shard 0."""
    import shutil

    from clirkit.distributed.dense import ShardedDenseIndex, build_sharded_dense, split_rows

    np.save(tmp_path / "e.npy", np.random.default_rng(0).standard_normal((300, 8)).astype(np.float32))
    ids = [f"d{i}" for i in range(300)]
    for name, seed in (("a", 0), ("b", 5)):
        build_sharded_dense(split_rows(tmp_path / "e.npy", ids, 2), tmp_path / name, pq=4, seed=seed)
    shutil.rmtree(tmp_path / "a" / "codebook")
    shutil.move(tmp_path / "b" / "codebook", tmp_path / "a" / "codebook")
    with pytest.raises(ClirkitError, match="the codebook is of another build") as refused:
        ShardedDenseIndex.open(tmp_path / "a")
    assert "shard 0" not in str(refused.value)
    assert cli(["verify", str(tmp_path / "a")]) != 0
    err = capsys.readouterr().err
    assert "the codebook is of another build" in err and "shard 0" not in err
