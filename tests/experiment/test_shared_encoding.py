"""Systems over one multi-head model share one encoding stage: an experiment with a dense, a sparse and a
multi-vector system over a small multi-head graph (built here, random weights) plans one ``encode-heads``
stage, runs it once (each document goes through the model once), and every family's encoded files and
run equal those of an experiment holding that system alone (a separate pass)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
import tiny_transformer
from clirkit.experiment import Experiment

pytest.importorskip("onnxruntime")

HEADS = {
    "dense": {"output": "last_hidden_state", "pooling": "cls", "normalize": True},
    "sparse": {"output": "sparse_weights", "type": "token_weights"},
    "multivector": {"output": "colbert_vecs"},
}
SYSTEMS = {
    "m3-dense": 'kind = "dense"\nmax_length = 48',
    "m3-sparse": 'kind = "impact"\nmax_length = 48\nquery_max_length = 16',
    "m3-mv": 'kind = "multivector"\nmax_length = 48\nnbits = 4\ncentroids = 8',
}
FILES = {
    "m3-dense": ("heads.dense.npy", "heads.dense.ids.txt"),
    "m3-sparse": ("heads.sparse.vectors.jsonl",),
    "m3-mv": ("heads.multivector.tokens.npy", "heads.multivector.offsets.npy", "heads.multivector.ids.txt"),
}
DOCS = 70


@pytest.fixture
def collection(tmp_path, monkeypatch):
    """A BEIR folder of texts in the tiny tokenizer's words, and the multi-head model."""
    monkeypatch.setenv("CLIRKIT_CACHE_DIR", str(tmp_path / "cache"))
    model = tiny_transformer.build(tmp_path / "m3", heads=True, config={"heads": HEADS})
    data = tmp_path / "beir"
    (data / "qrels").mkdir(parents=True)
    docs = tiny_transformer.texts(DOCS, seed=11)
    queries = tiny_transformer.texts(12, seed=12)
    with open(data / "corpus.jsonl", "w", encoding="utf-8") as f:
        for i, text in enumerate(docs):
            f.write(json.dumps({"_id": f"d{i}", "title": "", "text": text}) + "\n")
    with open(data / "queries.jsonl", "w", encoding="utf-8") as f:
        for i, text in enumerate(queries):
            f.write(json.dumps({"_id": f"q{i}", "text": text}) + "\n")
    (data / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{3 * i}\t1\n" for i in range(12)), encoding="utf-8"
    )
    return model, data


def experiment(tmp_path: Path, name: str, model: Path, data: Path, systems: list[str]) -> Experiment:
    tables = "".join(
        f'\n[systems.{s}]\nmodel = "{model}"\nfields = ["text"]\n{SYSTEMS[s]}\n' for s in systems
    )
    text = (
        f'[experiment]\nname = "{name}"\nhits = 20\n\n[collections.c]\npath = "{data}"\n\n'
        f'[[tasks]]\ncollection = "c"\n{tables}\n[evaluation]\nmeasures = ["nDCG@10"]\n'
    )
    path = tmp_path / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return Experiment(path, tmp_path / f"work-{name}", quiet=True)


def test_three_families_over_one_model_encode_the_documents_once(collection, tmp_path, monkeypatch):
    from clirkit.encoders.multihead import MultiHeadEncoder

    model, data = collection
    encoded: list[int] = []  # texts per forward-pass call of the multi-head encoder
    heads_of = MultiHeadEncoder._heads_of

    def counting(self, texts, prefix, role=None):
        encoded.append(len(texts))
        return heads_of(self, texts, prefix, role)

    monkeypatch.setattr(MultiHeadEncoder, "_heads_of", counting)

    together = experiment(tmp_path, "together", model, data, list(SYSTEMS))
    kinds = [s.kind for s in together.plan.stages]
    assert kinds.count("encode-heads") == 1
    assert not {"encode", "sparse-encode", "encode-tokens"} & set(kinds)
    shared = next(s for s in together.plan.stages if s.kind == "encode-heads")
    assert shared.params["heads"] == ["dense", "multivector", "sparse"]
    for name in SYSTEMS:  # every index is built from the one shared stage
        index = together.plan.runs[name]["c"].inputs[0]
        assert index.inputs == (shared,)
    together.run(log=io.StringIO())
    assert [kind for kind, _, _ in together.timings].count("encode-heads") == 1
    # One forward pass over the documents for all three heads (separate passes would make three calls
    # of DOCS texts); the other calls are the 12 queries per system and one-text dimension probes.
    assert [n for n in encoded if n > 12] == [DOCS]

    for name in SYSTEMS:
        alone = experiment(tmp_path, name, model, data, [name])
        stage = next(s for s in alone.plan.stages if s.kind == "encode-heads")
        assert stage.params["heads"] == [
            {"m3-dense": "dense", "m3-sparse": "sparse", "m3-mv": "multivector"}[name]
        ]
        alone.run(log=io.StringIO())
        for file in FILES[name]:
            assert (stage.output / file).read_bytes() == (shared.output / file).read_bytes(), (name, file)
        run_alone = (alone.plan.runs[name]["c"].output / "run.trec").read_text()
        run_together = (together.plan.runs[name]["c"].output / "run.trec").read_text()
        assert run_alone == run_together and run_alone.count("\n") == 12 * 20, name
    ids = (shared.output / "heads.dense.ids.txt").read_text().split()
    assert ids == [f"d{i}" for i in range(DOCS)]
    assert np.load(shared.output / "heads.dense.npy").shape == (DOCS, tiny_transformer.HIDDEN)


def test_a_plain_models_token_states_feed_dense_and_multivector_in_one_pass(collection, tmp_path):
    """A model declaring no heads: a dense and a multi-vector system over it share one pass of its token
    states, whose files equal the ``encode`` and ``encode-tokens`` stages of each system alone."""
    _, data = collection
    plain = tiny_transformer.build(tmp_path / "plain")
    both = experiment(tmp_path, "both", plain, data, ["m3-dense", "m3-mv"])
    kinds = [s.kind for s in both.plan.stages]
    assert kinds.count("encode-heads") == 1 and "encode" not in kinds and "encode-tokens" not in kinds
    shared = next(s for s in both.plan.stages if s.kind == "encode-heads")
    assert shared.params["heads"] == ["dense", "multivector"]
    both.run(log=io.StringIO())
    separate = {"m3-dense": ("encode", "embeddings"), "m3-mv": ("encode-tokens", "tokens")}
    for name, (kind, prefix) in separate.items():
        alone = experiment(tmp_path, f"plain-{name}", plain, data, [name])
        stage = next(s for s in alone.plan.stages if s.kind.startswith("encode") and "quer" not in s.kind)
        assert stage.kind == kind  # one family of a plain model: its own stage, as before
        alone.run(log=io.StringIO())
        for file in FILES[name]:
            own = file.replace("heads.dense", prefix).replace("heads.multivector", prefix)
            assert (stage.output / own).read_bytes() == (shared.output / file).read_bytes(), (name, file)
        run_alone = (alone.plan.runs[name]["c"].output / "run.trec").read_text()
        assert run_alone == (both.plan.runs[name]["c"].output / "run.trec").read_text(), name


def test_token_states_refuse_what_is_not_a_plain_token_model(collection, tmp_path):
    from clirkit import InvalidInputError
    from clirkit.encoders.multihead import MultiHeadEncoder

    model, _ = collection
    with pytest.raises(InvalidInputError, match="declares heads"):
        MultiHeadEncoder(model, device="cpu", token_states=True)
    colbert = tiny_transformer.build(tmp_path / "colbert", config={"colbert": {"doc_marker": "[MASK]"}})
    with pytest.raises(InvalidInputError, match="'colbert' settings"):
        MultiHeadEncoder(colbert, device="cpu", token_states=True)
