"""Streaming corpus encoding (resumable, passages, dtypes), the JSONL reader, MaxP, and the CLI."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import shared_path

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")

import clirkit  # noqa: E402
from clirkit import ClirkitError, DuplicateIdError, cli  # noqa: E402
from clirkit.datasets import iter_jsonl  # noqa: E402
from clirkit.encoders import (  # noqa: E402
    OnnxEncoder,
    doc_id,
    encode_file,
    load_embeddings,
    maxp,
    maxp_file,
    output_paths,
)


@pytest.fixture(scope="module")
def minilm() -> OnnxEncoder:
    return OnnxEncoder(shared_path("models", "all-MiniLM-L6-v2-int8"), device="cpu", batch_size=8)


@pytest.fixture()
def corpus(tmp_path: Path, sample_dir: Path) -> Path:
    """12 documents of the sample collection, with titles."""
    path = tmp_path / "corpus.jsonl"
    with open(sample_dir / "corpus.jsonl", encoding="utf-8") as src, open(path, "w", encoding="utf-8") as out:
        for i, line in zip(range(12), src):
            rec = json.loads(line)
            out.write(json.dumps({"_id": rec["_id"], "title": f"T{i}", "text": rec["text"]}) + "\n")
            if i == 3:
                out.write("\n")  # blank lines are skipped
    return path


def test_iter_jsonl_joins_fields_and_names_bad_lines(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text('{"_id": "a", "title": "T", "text": "x", "lang": "en"}\n{"id": 7, "text": " y "}\n')
    assert list(iter_jsonl(p)) == [("a", "T x", "en"), ("7", "y", None)]
    for bad, message in [
        ('{"_id": "a"\n', "c.jsonl:2: malformed JSON"),
        ('{"text": "no id"}\n', "c.jsonl:2: no id field"),
        ('["list"]\n', "c.jsonl:2: expected a JSON object"),
        ('{"_id": "a b", "text": "x"}\n', 'c.jsonl:2: id "a b" contains white space'),
        ('{"_id": "a", "text": 3}\n', "c.jsonl:2: field 'text' of 'a'"),
    ]:
        p.write_text('{"_id": "ok"}\n' + bad)
        with pytest.raises(ValueError, match=message):
            list(iter_jsonl(p))
    p.write_bytes(b'{"_id": "ok"}\n{"_id": "\xff"}\n')
    with pytest.raises(ValueError, match="c.jsonl:2: not valid UTF-8"):
        list(iter_jsonl(p))


def test_corpus_encoding_equals_in_memory_encoding(minilm, corpus, tmp_path):
    result = encode_file(minilm, corpus, tmp_path / "out" / "emb", chunk_size=7, quiet=True)
    matrix, ids = load_embeddings(tmp_path / "out" / "emb")
    records = list(iter_jsonl(corpus))
    assert ids == [r.id for r in records]
    assert (result.rows, result.records, result.dim) == (12, 12, 384)
    assert isinstance(matrix, np.memmap) and matrix.dtype == np.float32
    np.testing.assert_allclose(matrix, minilm.encode_passages([r.text for r in records]), atol=1e-5)
    assert not output_paths(tmp_path / "out" / "emb")["state"].exists()

    half = encode_file(minilm, corpus, tmp_path / "half", fields=["text"], dtype="float16", quiet=True)
    matrix16, _ = load_embeddings(tmp_path / "half")
    assert matrix16.dtype == np.float16 and half.rows == 12
    texts_only = minilm.encode_passages([r.text.split(" ", 1)[1] for r in records])
    np.testing.assert_allclose(matrix16.astype(np.float32), texts_only, atol=2e-3)


def test_queries_use_the_query_prefix(corpus, tmp_path):
    e5 = OnnxEncoder(shared_path("models", "multilingual-e5-small-int8"), device="cpu")
    encode_file(e5, corpus, tmp_path / "q", kind="queries", chunk_size=10, quiet=True)
    matrix, ids = load_embeddings(tmp_path / "q")
    texts = [r.text for r in iter_jsonl(corpus, fields=("text",))]
    np.testing.assert_allclose(matrix, e5.encode_queries(texts), atol=1e-5)


def test_passages_split_by_tokens(minilm, corpus, tmp_path):
    result = encode_file(minilm, corpus, tmp_path / "p", passages=(12, 6), chunk_size=4, quiet=True)
    matrix, ids = load_embeddings(tmp_path / "p")
    records = list(iter_jsonl(corpus))
    expected_ids, expected_texts = [], []
    for r in records:
        windows = minilm.token_windows(r.text, 12, 6)
        expected_ids += [f"{r.id}#{k}" for k in range(len(windows))]
        expected_texts += windows
    assert ids == expected_ids and result.rows == len(ids) > len(records)
    np.testing.assert_allclose(matrix, minilm.encode_passages(expected_texts), atol=1e-5)
    assert {doc_id(i) for i in ids} == {r.id for r in records}


class Interrupt(Exception):
    pass


def encode_until_interrupted(encoder: OnnxEncoder, corpus: Path, prefix: Path, chunk: int) -> None:
    """Encode in chunks of 5 records with the ``chunk``-th chunk raising :class:`Interrupt`, as a crash would."""
    calls = {"n": 0}
    original = OnnxEncoder.encode_passages

    def encode_or_interrupt(self, texts):
        calls["n"] += 1
        if calls["n"] == chunk:
            raise Interrupt
        return original(self, texts)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(OnnxEncoder, "encode_passages", encode_or_interrupt)
        with pytest.raises(Interrupt):
            encode_file(encoder, corpus, prefix, chunk_size=5, quiet=True)


def test_interrupted_encoding_resumes_after_the_last_chunk(minilm, corpus, tmp_path):
    prefix = tmp_path / "r"
    full = encode_file(minilm, corpus, tmp_path / "full", chunk_size=5, quiet=True)
    encode_until_interrupted(minilm, corpus, prefix, 3)
    paths = output_paths(prefix)
    assert not paths["npy"].exists() and paths["state"].exists()
    # Settings that change the vectors or rows cannot continue someone else's work.
    with pytest.raises(ValueError, match="different settings.*dtype"):
        encode_file(minilm, corpus, prefix, chunk_size=5, dtype="float16", quiet=True)

    resumed = encode_file(minilm, corpus, prefix, chunk_size=5, quiet=True)
    assert resumed.resumed_rows == 10 and resumed.rows == full.rows == 12
    a, ids_a = load_embeddings(prefix)
    b, ids_b = load_embeddings(tmp_path / "full")
    assert ids_a == ids_b
    np.testing.assert_allclose(a, b, atol=1e-6)
    assert not paths["state"].exists() and not paths["npy_partial"].exists()


def clirkit_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "clirkit.cli", *args]


def clirkit_env() -> dict[str, str]:
    """The environment for a ``clirkit`` subprocess that imports the clirkit under test (a source checkout
    on PYTHONPATH, or the installed package), not whichever another path would find."""
    package_root = str(Path(clirkit.__file__).resolve().parent.parent)
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])),
    }


def test_killed_cli_encode_resumes_without_reencoding_finished_chunks(tmp_path, sample_dir):
    """A real ``kill -9`` of ``clirkit encode`` once a chunk is on disk, then the same command again."""
    model = shared_path("models", "all-MiniLM-L6-v2-int8")
    corpus = tmp_path / "corpus.jsonl"
    sample_lines = (sample_dir / "corpus.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    corpus.write_text("".join(sample_lines[:160]), encoding="utf-8")
    prefix = tmp_path / "killed"
    paths = output_paths(prefix)
    command = clirkit_command(
        "encode", "--model", str(model), "--corpus", str(corpus), "--output", str(prefix),
        "--max-length", "32", "--chunk-size", "8",
    )  # fmt: skip
    proc = subprocess.Popen(command, env=clirkit_env(), stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    committed_rows = 0
    while committed_rows == 0:
        assert proc.poll() is None, f"encode ended before it could be killed: {proc.stderr.read().decode()}"
        assert time.monotonic() < deadline, "no chunk reached the disk within 120 s"
        try:
            committed_rows = json.loads(paths["state"].read_text(encoding="utf-8"))["rows"]
        except (FileNotFoundError, json.JSONDecodeError):
            pass
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    state = json.loads(paths["state"].read_text(encoding="utf-8"))
    assert not paths["npy"].exists() and not state.get("complete") and 0 < state["rows"] < 160

    rerun = subprocess.run(command, env=clirkit_env(), stderr=subprocess.PIPE, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    # Only what the state had not recorded was encoded again.
    assert "encoded 160 records -> 160 rows x 384 (float32, cpu)" in rerun.stderr
    assert f"(resumed after {state['rows']} rows)" in rerun.stderr
    encoder = OnnxEncoder(model, device="cpu", max_length=32)
    encode_file(encoder, corpus, tmp_path / "uninterrupted", chunk_size=8, quiet=True)
    resumed, resumed_ids = load_embeddings(prefix)
    uninterrupted, uninterrupted_ids = load_embeddings(tmp_path / "uninterrupted")
    assert resumed_ids == uninterrupted_ids
    np.testing.assert_allclose(resumed, uninterrupted, atol=1e-6)
    assert not paths["state"].exists() and not paths["npy_partial"].exists()


def test_run_killed_between_the_final_renames_finishes_them_without_encoding(
    minilm, corpus, tmp_path, monkeypatch
):
    prefix = tmp_path / "renaming"
    paths = output_paths(prefix)
    real_replace = os.replace

    def killed_before_second_rename(src, dst):
        if Path(dst) == paths["ids"]:
            raise Interrupt
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", killed_before_second_rename)
    with pytest.raises(Interrupt):
        encode_file(minilm, corpus, prefix, chunk_size=5, quiet=True)
    monkeypatch.setattr(os, "replace", real_replace)
    assert paths["npy"].exists() and paths["ids_partial"].exists() and paths["state"].exists()
    monkeypatch.setattr(OnnxEncoder, "encode_passages", lambda self, texts: pytest.fail("encoded again"))
    finished = encode_file(minilm, corpus, prefix, chunk_size=5, quiet=True)
    assert finished.resumed_rows == finished.rows == 12
    matrix, ids = load_embeddings(prefix)
    assert matrix.shape == (12, 384) and ids == [r.id for r in iter_jsonl(corpus)]
    assert not paths["state"].exists()


def test_damaged_partial_output_is_refused(minilm, corpus, tmp_path):
    prefix = tmp_path / "damaged"
    encode_until_interrupted(minilm, corpus, prefix, 2)
    partial = output_paths(prefix)["npy_partial"]
    with open(partial, "r+b") as f:
        f.truncate(partial.stat().st_size - 4)
    with pytest.raises(ValueError, match=r"damaged\.npy\.partial: holds \d+ bytes but .* records \d+ bytes"):
        encode_file(minilm, corpus, prefix, chunk_size=5, quiet=True)
    assert encode_file(minilm, corpus, prefix, chunk_size=5, restart=True, quiet=True).rows == 12


def test_changed_input_is_refused_and_restart_discards(minilm, corpus, tmp_path):
    prefix = tmp_path / "c"
    encode_until_interrupted(minilm, corpus, prefix, 1)
    with open(corpus, "a", encoding="utf-8") as f:
        f.write('{"_id": "new", "text": "appended"}\n')
    with pytest.raises(ValueError, match="different input"):
        encode_file(minilm, corpus, prefix, chunk_size=5, quiet=True)
    assert encode_file(minilm, corpus, prefix, chunk_size=5, restart=True, quiet=True).rows == 13


def test_duplicate_ids_and_empty_input(minilm, tmp_path):
    p = tmp_path / "dup.jsonl"
    p.write_text('{"_id": "a", "text": "x"}\n{"_id": "b", "text": ""}\n{"_id": "a", "text": "z"}\n')
    with pytest.raises(DuplicateIdError, match=r"dup.jsonl:3: duplicate id 'a' \(first seen at line 1\)"):
        encode_file(minilm, p, tmp_path / "d", quiet=True)
    assert not output_paths(tmp_path / "d")["npy"].exists()
    # A resumed run re-reads the ids before its offset, so it names the earlier line exactly.
    resumed = tmp_path / "resumed.jsonl"
    resumed.write_text("".join(f'{{"_id": "d{i}", "text": "t{i}"}}\n' for i in range(11)) + '{"_id": "d2"}\n')
    encode_until_interrupted(minilm, resumed, tmp_path / "r", 2)
    with pytest.raises(
        DuplicateIdError, match=r"resumed.jsonl:12: duplicate id 'd2' \(first seen at line 3\)"
    ):
        encode_file(minilm, resumed, tmp_path / "r", chunk_size=5, quiet=True)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert encode_file(minilm, empty, tmp_path / "e", quiet=True).rows == 0
    assert load_embeddings(tmp_path / "e")[0].shape == (0, 384)


def test_maxp_matches_a_python_reference(tmp_path):
    rng = random.Random(7)
    run = {
        f"q{q}": {f"d{rng.randrange(40)}#{k}": round(rng.uniform(-1, 1), 3) for k in range(60)}
        for q in range(20)
    }
    expected = {}
    for qid, passages in run.items():
        best = {}
        for pid, score in passages.items():
            d = pid.rsplit("#", 1)[0]
            best[d] = max(best.get(d, -np.inf), score)
        ranked = sorted(best.items(), key=lambda kv: (-kv[1], tuple(-b for b in kv[0].encode())))
        expected[qid] = ranked[:10]
    got = maxp(run, depth=10)
    assert {q: list(d.items()) for q, d in got.items()} == expected
    assert doc_id("a#b#3") == "a#b" and doc_id("x", "::") == "x"
    with pytest.raises(ValueError):
        maxp(run, depth=0)
    with pytest.raises(ClirkitError, match="separator"):
        maxp(run, separator="")


def test_cli_encode_search_maxp_end_to_end(corpus, tmp_path, capsys):
    model = shared_path("models", "all-MiniLM-L6-v2-int8")
    prefix = tmp_path / "cli"
    rc = cli.main(
        [
            "encode",
            "--model",
            str(model),
            "--corpus",
            str(corpus),
            "--output",
            str(prefix),
            "--passages",
            "16:8",
            "--dtype",
            "float16",
            "--batch-size",
            "4",
            "--max-length",
            "64",
        ]
    )
    assert rc == 0
    assert "rows x 384 (float16, cpu)" in capsys.readouterr().err
    matrix, ids = load_embeddings(prefix)
    rc = cli.main(
        [
            "encode",
            "--model",
            str(model),
            "--queries",
            str(corpus),
            "--output",
            str(tmp_path / "q"),
            "--quiet",
        ]
    )
    assert rc == 0
    queries, qids = load_embeddings(tmp_path / "q")
    scores = queries[:3].astype(np.float32) @ matrix.astype(np.float32).T
    passage_run = {qids[i]: {ids[j]: float(scores[i, j]) for j in range(len(ids))} for i in range(3)}
    from clirkit import write_run

    write_run(tmp_path / "passages.trec", passage_run)
    rc = cli.main(
        ["maxp", str(tmp_path / "passages.trec"), "--output", str(tmp_path / "docs.trec"), "--depth", "5"]
    )
    assert rc == 0
    lines = (tmp_path / "docs.trec").read_text().splitlines()
    assert len(lines) == 15 and all("#" not in line.split()[2] for line in lines)
    best = {q: max(scores.values()) for q, scores in passage_run.items()}
    assert [float(line.split()[4]) for line in lines[::5]] == pytest.approx([best[q] for q in qids[:3]])
    assert maxp_file(tmp_path / "passages.trec", tmp_path / "again.trec", depth=5) == maxp(
        passage_run, depth=5
    )


def test_cli_prefixes_override_the_model_config(minilm, corpus, tmp_path):
    model = str(shared_path("models", "all-MiniLM-L6-v2-int8"))  # its config.json has no prefixes
    for source, option, prefix, fields in [
        ("--queries", "--query-prefix", "query: ", ("text",)),
        ("--corpus", "--passage-prefix", "doc: ", ("title", "text")),
    ]:
        out = tmp_path / source.strip("-")
        args = [
            "encode",
            "--model",
            model,
            source,
            str(corpus),
            "--output",
            str(out),
            option,
            prefix,
            "--quiet",
        ]
        assert cli.main(args) == 0
        matrix, _ = load_embeddings(out)
        texts = [r.text for r in iter_jsonl(corpus, fields=fields)]
        np.testing.assert_allclose(matrix, minilm.encode(texts, prefix=prefix), atol=1e-5)
        assert not np.allclose(matrix, minilm.encode(texts), atol=1e-3)


def test_dense_retriever_encodes_indexes_and_searches_in_two_lines(corpus, tmp_path):
    model = shared_path("models", "all-MiniLM-L6-v2-int8")
    queries = {"q1": "Panthers defense points", "q2": "Super Bowl champion", "q3": "NFL season"}
    retriever = clirkit.DenseRetriever.build(
        model, corpus, tmp_path / "docs", passages=(12, 6), index_dir=tmp_path / "idx", quiet=True
    )
    run = retriever.search(queries, k=5)
    # The same by hand: the default encoder, encode_file, a flat index, MaxP search.
    encoder = OnnxEncoder(model)
    encode_file(encoder, corpus, tmp_path / "by-hand", passages=(12, 6), quiet=True)
    index = clirkit.DenseIndex.build(*load_embeddings(tmp_path / "by-hand"))
    expected = index.search_run(encoder.encode_queries(list(queries.values())), list(queries), k=5, maxp=True)
    assert run == expected and list(run) == list(queries)
    assert all(len(docs) == 5 for docs in run.values())
    assert clirkit.DenseIndex.open(tmp_path / "idx").ntotal == index.ntotal > 12
    whole = clirkit.DenseRetriever.build(model, corpus, tmp_path / "whole", quiet=True)
    assert not whole.maxp and whole.index.ntotal == 12


def test_cli_reports_bad_input(tmp_path, capsys):
    rc = cli.main(
        [
            "encode",
            "--model",
            str(tmp_path),
            "--corpus",
            str(tmp_path / "c.jsonl"),
            "--output",
            str(tmp_path / "o"),
        ]
    )
    assert rc == 2 and "lacks model.onnx, tokenizer.json, config.json" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["encode", "--model", "m", "--corpus", "c", "--output", "o", "--passages", "90:180"])
