"""Learned-sparse (SPLADE) encoding: the weights against a numpy reference on the model's own logits,
batch invariance, top-term pruning, vector JSONL files (resumable), bad models, and the CLI."""

from __future__ import annotations

import json
import shutil
from itertools import islice
from pathlib import Path

import numpy as np
import pytest
from conftest import shared_path

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")

from clirkit import DuplicateIdError, cli  # noqa: E402
from clirkit.encoders import (  # noqa: E402
    OnnxEncoder,
    SparseEncoder,
    encode_file,
    encode_sparse_file,
    is_sparse_model,
    sparse_output_paths,
)


@pytest.fixture(scope="module")
def splade_dir() -> Path:
    return shared_path("models", "splade-tiny-en")


@pytest.fixture(scope="module")
def splade(splade_dir) -> SparseEncoder:
    return SparseEncoder(splade_dir, max_length=64, batch_size=4, threads=2, device="cpu")


@pytest.fixture(scope="module")
def scifact_texts() -> list[str]:
    """Twelve SciFact documents (title + " " + text, of varied lengths), an empty text and a short one."""
    texts = []
    with open(shared_path("data", "beir-scifact", "corpus.jsonl"), encoding="utf-8") as f:
        for line in islice(f, 12):
            rec = json.loads(line)
            texts.append(f"{rec['title']} {rec['text'][: 40 * len(texts)]}")
    return [*texts, "", "Aspirin and heart attacks"]


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    """Eleven SciFact documents with their BEIR fields."""
    path = tmp_path / "corpus.jsonl"
    with open(shared_path("data", "beir-scifact", "corpus.jsonl"), encoding="utf-8") as src:
        path.write_text("".join(islice(src, 11)), encoding="utf-8")
    return path


def reference_vectors(model_dir: Path, texts: list[str], max_length: int) -> list[dict[str, float]]:
    """SPLADE written out plainly: each text alone through onnxruntime's default session, log(1 + relu)
    of every token's logits, max over the tokens, the nonzero entries named by the vocabulary."""
    import onnxruntime as ort
    import tokenizers

    session = ort.InferenceSession(str(model_dir / "model.onnx"), providers=["CPUExecutionProvider"])
    tokenizer = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.enable_truncation(max_length)
    vocabulary = {i: t for t, i in tokenizer.get_vocab(with_added_tokens=True).items()}
    vectors = []
    for text in texts:
        ids = np.array([tokenizer.encode(text).ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        (logits,) = session.run(["logits"], feeds)
        weights = np.log1p(np.maximum(logits[0], 0)).max(axis=0)
        vectors.append({vocabulary[i]: float(weights[i]) for i in np.flatnonzero(weights)})
    return vectors


def dense(vector: dict[str, float], vocabulary: dict[str, int]) -> np.ndarray:
    out = np.zeros(len(vocabulary), dtype=np.float64)
    for term, weight in vector.items():
        out[vocabulary[term]] = weight
    return out


def test_vectors_equal_a_numpy_reference(splade, splade_dir, scifact_texts):
    truncated_before = splade.truncated
    ours = splade.encode(scifact_texts)
    reference = reference_vectors(splade_dir, scifact_texts, 64)
    vocabulary = splade.tokenizer.get_vocab(with_added_tokens=True)
    for text, mine, theirs in zip(scifact_texts, ours, reference):
        assert mine, text
        np.testing.assert_allclose(dense(mine, vocabulary), dense(theirs, vocabulary), rtol=1e-6, atol=1e-6)
        # Terms are vocabulary strings in vocabulary order; weights are positive float32 values.
        assert list(mine) == sorted(mine, key=vocabulary.__getitem__)
        assert all(w > 0 and np.float32(w) == w for w in mine.values())
    assert splade.truncated - truncated_before >= 4  # the longer documents pass 64 tokens


def test_batches_give_the_vectors_of_one_text_at_a_time(splade, splade_dir, scifact_texts):
    one_at_a_time = SparseEncoder(splade_dir, max_length=64, batch_size=1, threads=1, device="cpu")
    assert splade.encode(scifact_texts) == [one_at_a_time.encode([t])[0] for t in scifact_texts]
    assert splade.encode([]) == []
    with pytest.raises(TypeError, match="sequence of texts"):
        splade.encode("one string")


def test_top_terms_keeps_the_largest_weights(splade, splade_dir, scifact_texts):
    pruned = SparseEncoder(splade_dir, max_length=64, top_terms=10, device="cpu")
    for full, top in zip(splade.encode(scifact_texts), pruned.encode(scifact_texts)):
        assert len(top) == min(10, len(full)) and all(full[t] == w for t, w in top.items())
        assert min(top.values()) >= max((w for t, w in full.items() if t not in top), default=0)
    assert pruned.fingerprint() != splade.fingerprint()
    with pytest.raises(ValueError, match="top_terms must be at least 1"):
        SparseEncoder(splade_dir, top_terms=0)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_corpus_and_queries_are_written_as_anserini_json_vectors(splade, corpus, tmp_path):
    result = encode_sparse_file(splade, corpus, tmp_path / "out" / "docs", chunk_size=4, quiet=True)
    assert result.vectors_path == tmp_path / "out" / "docs.vectors.jsonl"
    assert (result.rows, result.records) == (11, 11)
    records = read_jsonl(corpus)
    texts = [f"{r['title']} {r['text']}" for r in records]
    lines = read_jsonl(result.vectors_path)
    assert [line["id"] for line in lines] == [r["_id"] for r in records]
    assert [line["contents"] for line in lines] == texts
    assert [line["vector"] for line in lines] == splade.encode_passages(texts)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["docs.vectors.jsonl"]
    with pytest.raises(ValueError, match="use encode_sparse_file"):
        encode_file(splade, corpus, tmp_path / "dense")

    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"_id": "q1", "text": "aspirin"}\n{"_id": "q2", "text": "stem cells"}\n')
    result = encode_sparse_file(splade, queries, tmp_path / "q", kind="queries", quiet=True)
    lines = read_jsonl(result.vectors_path)
    assert [(line["id"], line["contents"]) for line in lines] == [("q1", "aspirin"), ("q2", "stem cells")]
    assert [line["vector"] for line in lines] == splade.encode_queries(["aspirin", "stem cells"])


class Interrupt(Exception):
    pass


def test_interrupted_encoding_resumes_to_identical_output(splade, corpus, tmp_path):
    full = encode_sparse_file(splade, corpus, tmp_path / "full", chunk_size=3, quiet=True)
    calls = {"n": 0}
    original = SparseEncoder.encode_passages

    def encode_or_interrupt(self, texts):
        calls["n"] += 1
        if calls["n"] == 3:
            raise Interrupt
        return original(self, texts)

    prefix = tmp_path / "r"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SparseEncoder, "encode_passages", encode_or_interrupt)
        with pytest.raises(Interrupt):
            encode_sparse_file(splade, corpus, prefix, chunk_size=3, quiet=True)
    paths = sparse_output_paths(prefix)
    assert not paths["vectors"].exists() and paths["state"].exists()
    # A crash after writing but before the state records it: the extra bytes are dropped on resume.
    with open(paths["vectors_partial"], "ab") as f:
        f.write(b'{"id": "half-written')
    pruned = SparseEncoder(splade.model_dir, max_length=64, top_terms=5, device="cpu")
    with pytest.raises(ValueError, match="different settings.*encoder"):
        encode_sparse_file(pruned, corpus, prefix, chunk_size=3, quiet=True)

    resumed = encode_sparse_file(splade, corpus, prefix, chunk_size=3, quiet=True)
    assert resumed.resumed_rows == 6 and resumed.rows == full.rows == 11
    assert paths["vectors"].read_bytes() == full.vectors_path.read_bytes()
    assert not paths["state"].exists() and not paths["vectors_partial"].exists()


def test_duplicate_ids_name_both_lines(splade, tmp_path):
    p = tmp_path / "dup.jsonl"
    p.write_text('{"_id": "a", "text": "x"}\n{"_id": "b", "text": "y"}\n{"_id": "a", "text": "z"}\n')
    with pytest.raises(DuplicateIdError, match=r"dup.jsonl:3: duplicate id 'a' \(first seen at line 1\)"):
        encode_sparse_file(splade, p, tmp_path / "d", chunk_size=2, quiet=True)
    assert not sparse_output_paths(tmp_path / "d")["vectors"].exists()


def test_a_model_without_mlm_logits_is_refused(splade_dir, tmp_path):
    # splade-tiny-en's config and tokenizer with MiniLM's graph, whose output is token states.
    bad = tmp_path / "bad"
    bad.mkdir()
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(splade_dir / name, bad / name)
    shutil.copy(shared_path("models", "all-MiniLM-L6-v2-int8", "model.onnx"), bad / "model.onnx")
    with pytest.raises(ValueError, match=r"must output MLM logits .* named 'logits', but its outputs are"):
        SparseEncoder(bad, device="cpu")
    # Named by config.json, the token states are refused for their shape.
    config = json.loads((bad / "config.json").read_text())
    (bad / "config.json").write_text(json.dumps({**config, "output": "last_hidden_state"}))
    with pytest.raises(ValueError, match=r"output 'last_hidden_state' has shape .*, not MLM logits"):
        SparseEncoder(bad, device="cpu")
    # A dense encoder refuses a sparse model instead of pooling its logits.
    with pytest.raises(ValueError, match="learned-sparse .* use clirkit.encoders.SparseEncoder"):
        OnnxEncoder(splade_dir, device="cpu")


def test_cli_encode_recognizes_a_sparse_model(splade_dir, corpus, tmp_path, capsys):
    assert is_sparse_model(splade_dir)
    assert not is_sparse_model(shared_path("models", "all-MiniLM-L6-v2-int8"))
    common = ["encode", "--model", str(splade_dir), "--threads", "2", "--quiet"]
    out = tmp_path / "cli"
    assert cli.main([*common, "--corpus", str(corpus), "--output", str(out), "--max-length", "64"]) == 0
    expected = encode_sparse_file(
        SparseEncoder(splade_dir, max_length=64, device="cpu"), corpus, tmp_path / "api", quiet=True
    )
    assert (tmp_path / "cli.vectors.jsonl").read_bytes() == expected.vectors_path.read_bytes()
    assert "truncated" in capsys.readouterr().err

    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"_id": "q1", "text": "aspirin and heart attacks"}\n')
    args = [*common, "--queries", str(queries), "--output", str(tmp_path / "q"), "--top-terms", "3"]
    assert cli.main(args) == 0
    assert len(read_jsonl(tmp_path / "q.vectors.jsonl")[0]["vector"]) == 3

    assert cli.main([*common, "--corpus", str(corpus), "--output", str(out), "--pooling", "cls"]) == 2
    assert "--pooling applies to dense models" in capsys.readouterr().err
    assert cli.main([*common, "--corpus", str(corpus), "--output", str(out), "--fast"]) == 2
    assert "--fast applies to dense models" in capsys.readouterr().err
    minilm = str(shared_path("models", "all-MiniLM-L6-v2-int8"))
    args = ["encode", "--model", minilm, "--corpus", str(corpus), "--output", str(out), "--top-terms", "3"]
    assert cli.main(args) == 2
    assert "--top-terms applies to learned-sparse models" in capsys.readouterr().err
