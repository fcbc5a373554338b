"""One forward pass, several outputs: a small multi-head graph (BGE-M3's dense CLS, sparse token weights and
ColBERT token vectors, random weights) encoded once for all three families equals three separate encodes,
and each head equals a numpy computation over the graph's outputs."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tiny_transformer
from clirkit import InvalidInputError
from clirkit.cli import main as cli_main
from clirkit.encoders import MultiHeadEncoder, encode_heads_file, load_embeddings, load_tokens

ort = pytest.importorskip("onnxruntime")

HEADS = {
    "dense": {"output": "last_hidden_state", "pooling": "cls", "normalize": True},
    "sparse": {"output": "sparse_weights", "type": "token_weights"},
    "multivector": {"output": "colbert_vecs"},
}


@pytest.fixture
def model_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CLIRKIT_CACHE_DIR", str(tmp_path / "cache"))
    return tiny_transformer.build(tmp_path / "m3", heads=True, config={"heads": HEADS})


def corpus(path, count: int) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for i, text in enumerate(tiny_transformer.texts(count, seed=5)):
            f.write(json.dumps({"_id": f"d{i}", "title": "", "text": text}) + "\n")


def numpy_heads(model_dir, texts):
    """The three heads by hand: one text at a time through the graph as built, numpy after it."""
    session = ort.InferenceSession(str(model_dir / "model.onnx"), providers=["CPUExecutionProvider"])
    enc = MultiHeadEncoder(model_dir, device="cpu")
    special = {enc.tokenizer.token_to_id(t) for t in tiny_transformer.SPECIALS}
    dense, sparse, tokens = [], [], []
    for text in texts:
        ids = np.array([enc.tokenizer.encode(text).ids], dtype=np.int64)
        hidden, weights, colbert = session.run(
            ["last_hidden_state", "sparse_weights", "colbert_vecs"],
            {"input_ids": ids, "attention_mask": np.ones_like(ids)},
        )
        dense.append(hidden[0, 0] / np.linalg.norm(hidden[0, 0]))
        terms: dict[str, float] = {}
        for token, weight in zip(ids[0].tolist(), weights[0, :, 0].tolist()):
            if token not in special and weight > 0:
                name = enc.tokenizer.id_to_token(token)
                terms[name] = max(terms.get(name, 0.0), weight)
        sparse.append(terms)
        tokens.append(colbert[0] / np.linalg.norm(colbert[0], axis=1, keepdims=True))
    return np.array(dense), sparse, tokens


def test_each_head_equals_a_numpy_forward_pass(model_dir):
    texts = tiny_transformer.texts(25)
    enc = MultiHeadEncoder(model_dir, device="cpu", batch_size=4)
    got = enc.encode_heads(texts)
    dense, sparse, tokens = numpy_heads(model_dir, texts)
    np.testing.assert_allclose(np.array(got["dense"]), dense, atol=1e-5)
    for g, want in zip(got["sparse"], sparse):
        assert g.keys() == want.keys()
        np.testing.assert_allclose([g[t] for t in want], list(want.values()), rtol=1e-5, atol=1e-5)
    for g, want in zip(got["multivector"], tokens):
        np.testing.assert_allclose(g, want, atol=1e-5)
    # Every batch ran once for all three heads.
    single = MultiHeadEncoder(model_dir, device="cpu", batch_size=4, outputs=["sparse"])
    single.encode_heads(texts)
    assert enc.forward_passes == single.forward_passes > 0


def test_one_pass_writes_what_three_separate_encodes_write(model_dir, tmp_path):
    corpus(tmp_path / "corpus.jsonl", 60)
    together = MultiHeadEncoder(model_dir, device="cpu", batch_size=8)
    results = encode_heads_file(
        together, tmp_path / "corpus.jsonl", tmp_path / "one", chunk_size=16, quiet=True
    )
    assert set(results) == {"dense", "sparse", "multivector"}
    separate_passes = []
    for family in HEADS:
        alone = MultiHeadEncoder(model_dir, device="cpu", batch_size=8, outputs=[family])
        encode_heads_file(alone, tmp_path / "corpus.jsonl", tmp_path / "sep", chunk_size=16, quiet=True)
        separate_passes.append(alone.forward_passes)
    # Three families, the forward passes of one (the dense family's counts a one-text probe of its size).
    assert 0 < together.forward_passes <= max(separate_passes) < sum(separate_passes) / 2
    for suffix in (
        ".dense.npy",
        ".dense.ids.txt",
        ".sparse.vectors.jsonl",
        ".multivector.tokens.npy",
        ".multivector.offsets.npy",
        ".multivector.ids.txt",
    ):
        assert (tmp_path / f"one{suffix}").read_bytes() == (tmp_path / f"sep{suffix}").read_bytes(), suffix
    # Files the index kinds read.
    vectors, ids = load_embeddings(tmp_path / "one.dense")
    assert vectors.shape == (60, tiny_transformer.HIDDEN) and ids[0] == "d0"
    tokens, offsets, token_ids = load_tokens(tmp_path / "one.multivector")
    assert tokens.shape[1] == tiny_transformer.COLBERT_DIM and len(offsets) == 61 and token_ids == ids
    line = json.loads((tmp_path / "one.sparse.vectors.jsonl").read_text().splitlines()[0])
    assert line["id"] == "d0" and all(w > 0 for w in line["vector"].values())


def test_cli_encodes_the_requested_outputs_once(model_dir, tmp_path, capsys):
    corpus(tmp_path / "corpus.jsonl", 12)
    args = ["encode", "--model", str(model_dir), "--corpus", str(tmp_path / "corpus.jsonl")]
    assert (
        cli_main([*args, "--output", str(tmp_path / "cli"), "--outputs", "dense,sparse", "--device", "cpu"])
        == 0
    )
    assert (tmp_path / "cli.dense.npy").is_file() and (tmp_path / "cli.sparse.vectors.jsonl").is_file()
    assert not (tmp_path / "cli.multivector.tokens.npy").exists()
    assert (
        cli_main([*args, "--output", str(tmp_path / "bad"), "--outputs", "dense,colbert", "--device", "cpu"])
        == 2
    )
    assert "colbert" in capsys.readouterr().err


def test_undeclared_or_missing_heads_are_named(tmp_path):
    plain = tiny_transformer.build(tmp_path / "plain")
    with pytest.raises(InvalidInputError, match="declares no 'heads'"):
        MultiHeadEncoder(plain, device="cpu")
    wrong = tiny_transformer.build(
        tmp_path / "wrong",
        heads=True,
        config={"heads": {"sparse": {"output": "nope", "type": "token_weights"}}},
    )
    with pytest.raises(InvalidInputError, match="'nope'"):
        MultiHeadEncoder(wrong, device="cpu")
