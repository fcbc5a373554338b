"""Multi-vector late interaction: token encoding files, the exact path against numpy MaxSim, the
compressed (PLAID-style) index against exact, budgets, MaxP, CLI, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import clirkit
import numpy as np
import pytest
from clirkit import IndexFormatError, InvalidInputError
from clirkit.cli import main
from clirkit.multivector import MultiVectorIndex, load_tokens, maxsim_search
from conftest import shared_path

DOCS = 300
QUERIES = 30
K = 10


def numpy_maxsim(queries: np.ndarray, qoff: np.ndarray, docs: np.ndarray, doff: np.ndarray) -> np.ndarray:
    """(queries, documents) MaxSim scores, the textbook way."""
    out = np.empty((len(qoff) - 1, len(doff) - 1), dtype=np.float64)
    for q in range(len(qoff) - 1):
        sims = queries[qoff[q] : qoff[q + 1]].astype(np.float64) @ docs.T.astype(np.float64)
        for d in range(len(doff) - 1):
            out[q, d] = sims[:, doff[d] : doff[d + 1]].max(axis=1).sum()
    return out


def agreement(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.mean([len(set(g) & set(w)) / len(w) for g, w in zip(got, want)]))


@pytest.fixture(scope="module")
def scifact(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Per-token MiniLM vectors of the first SciFact documents and queries, through the encode CLI."""
    pytest.importorskip("onnxruntime")
    model = shared_path("models", "all-MiniLM-L6-v2-int8")
    data = shared_path("data", "beir-scifact")
    work = tmp_path_factory.mktemp("mv")
    for name, count in (("corpus.jsonl", DOCS), ("queries.jsonl", QUERIES)):
        with open(data / name, encoding="utf-8") as src:
            lines = [next(src) for _ in range(count)]
        (work / name).write_text("".join(lines), encoding="utf-8")
    common = ["encode", "--multivector", "--model", str(model), "--max-length", "128", "--quiet"]
    assert main([*common, "--corpus", str(work / "corpus.jsonl"), "--output", str(work / "docs")]) == 0
    assert main([*common, "--queries", str(work / "queries.jsonl"), "--output", str(work / "queries")]) == 0
    docs, doff, ids = load_tokens(work / "docs")
    queries, qoff, qids = load_tokens(work / "queries")
    index = MultiVectorIndex.build(
        docs,
        doff,
        ids,
        work / "index",
        nbits=4,
        centroids=512,
        kmeans_iterations=10,
        keep_vectors=True,
        threads=2,
    )
    return {
        "work": work,
        "docs": (np.array(docs), doff, ids),
        "queries": (np.array(queries), qoff, qids),
        "index": index,
        "reference": numpy_maxsim(np.array(queries), qoff, np.array(docs), doff),
    }


def test_token_files_are_unit_vectors_with_offsets(scifact: dict) -> None:
    docs, doff, ids = scifact["docs"]
    assert len(ids) == DOCS and doff[0] == 0 and doff[-1] == len(docs) and (np.diff(doff) > 0).all()
    assert docs.shape[1] == 384
    np.testing.assert_allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    # Whole documents at --max-length 128: at most 128 tokens, special tokens included.
    assert np.diff(doff).max() <= 128


def test_exact_path_equals_numpy_maxsim(scifact: dict) -> None:
    queries, qoff, _ = scifact["queries"]
    reference = scifact["reference"]
    scores, ids = scifact["index"].search(queries, qoff, K, exact=True, threads=2)
    for q in range(len(qoff) - 1):
        np.testing.assert_allclose(scores[q], reference[q, ids[q]], rtol=1e-5, atol=1e-4)
        # The k best by numpy, up to float noise at the boundary.
        assert scores[q][-1] >= np.sort(reference[q])[::-1][K - 1] - 1e-4
    docs, doff, _ = scifact["docs"]
    free_scores, free_ids = maxsim_search(docs, doff, queries, qoff, K, threads=1)
    np.testing.assert_array_equal(free_ids, ids)
    np.testing.assert_array_equal(free_scores, scores)


def test_compressed_top10_agrees_with_exact_and_converges(scifact: dict) -> None:
    """Settings: 4-bit residuals, 512 centroids (10 k-means iterations), MiniLM tokens of 300 SciFact
    documents at 128 tokens, 30 queries. MiniLM is not trained for late interaction: its token vectors
    are close to one another, so documents' MaxSim scores are close and 2-bit residuals agree less
    (benches/RESULTS.md)."""
    index: MultiVectorIndex = scifact["index"]
    queries, qoff, _ = scifact["queries"]
    exact_scores, exact_ids = index.search(queries, qoff, K, exact=True)
    budgets = [dict(ncells=1, ndocs=K, rerank=K), dict(ncells=2, ndocs=64, rerank=32), {}]
    results = [agreement(index.search(queries, qoff, K, **b)[1], exact_ids) for b in budgets]
    everything = dict(
        ncells=index.ncentroids, centroid_score_threshold=float("-inf"), ndocs=DOCS, rerank=DOCS
    )
    full = agreement(index.search(queries, qoff, K, **everything)[1], exact_ids)
    assert results == sorted(results) and results[-1] <= full, (results, full)
    # PLAID's defaults for k = 10 (1 cell per query token, threshold 0.5, 256 candidates, 64 rescored).
    assert results[-1] >= 0.9
    assert full >= 0.95
    # Refining the last stage with the full vectors: better at the default budget, exact at the largest.
    refined = agreement(index.search(queries, qoff, K, refine=True)[1], exact_ids)
    assert refined >= max(results[-1], 0.95)
    scores, ids = index.search(queries, qoff, K, refine=True, **everything)
    np.testing.assert_array_equal(ids, exact_ids)
    np.testing.assert_array_equal(scores, exact_scores)


def test_maxp_and_trec_output(scifact: dict, tmp_path: Path) -> None:
    index: MultiVectorIndex = scifact["index"]
    queries, qoff, qids = scifact["queries"]
    run = index.search_run(queries, qoff, qids, 5, exact=True)
    assert list(run) == qids and all(len(d) == 5 for d in run.values())
    # Ids without a separator are whole documents: MaxP changes nothing.
    assert index.search_run(queries, qoff, qids, 5, exact=True, maxp=True) == run
    out = tmp_path / "run.trec"
    index.search_trec(queries, qoff, qids, out, 5, exact=True)
    lines = out.read_text().splitlines()
    assert len(lines) == 5 * len(qids)
    q0 = [line.split() for line in lines if line.split()[0] == qids[0]]
    assert [d for _, _, d, *_ in q0] == list(run[qids[0]])
    # Written window by window as it is searched, in the queries' order: the same run and the same
    # bytes at any thread count.
    whole = index.search_run(queries, qoff, qids, 5)
    written = []
    for threads in (1, 2):
        index.search_trec(queries, qoff, qids, out, 5, threads=threads)
        assert clirkit.read_run(out) == whole
        written.append(out.read_bytes())
    assert written[0] == written[1]
    assert [line.split()[0] for line in written[0].decode().splitlines()[::5]] == qids


def test_cli_index_and_search(scifact: dict, tmp_path: Path) -> None:
    work = scifact["work"]
    index_dir, out = tmp_path / "idx", tmp_path / "run.trec"
    prefix = ["--quiet", "--threads", "2"]
    assert main(["index", "multivector", "--embeddings", str(work / "docs"), "--index", str(index_dir),
                 "--centroids", "128", "--nbits", "4", *prefix]) == 0  # fmt: skip
    meta = json.loads((index_dir / "meta.json").read_text())
    assert meta["format"] == "clirkit-multivector" and meta["nbits"] == 4 and meta["ncentroids"] == 128
    assert main(["search", "multivector", "--index", str(index_dir), "--queries", str(work / "queries"),
                 "--output", str(out), "--k", "7", "--maxp", *prefix]) == 0  # fmt: skip
    assert len(out.read_text().splitlines()) == 7 * QUERIES
    # Exact search on an index without full vectors is a clear error.
    assert main(["search", "multivector", "--index", str(index_dir), "--queries", str(work / "queries"),
                 "--output", str(out), "--exact", *prefix]) == 2  # fmt: skip


def unit_tokens(rows: int, dim: int = 8, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_bad_input_gives_clear_errors(tmp_path: Path) -> None:
    tokens = unit_tokens(40)
    ids = [f"d{i}" for i in range(4)]
    with pytest.raises(InvalidInputError, match="do not add up"):
        MultiVectorIndex.build(tokens, [0, 10, 20, 30, 39], ids, tmp_path / "a", centroids=4)
    with pytest.raises(InvalidInputError, match="'d2'.*no tokens"):
        MultiVectorIndex.build(tokens, [0, 10, 20, 20, 40], ids, tmp_path / "a", centroids=4)
    with pytest.raises(InvalidInputError, match="3 ids for 4 items"):
        MultiVectorIndex.build(tokens, [0, 10, 20, 30, 40], ids[:3], tmp_path / "a", centroids=4)
    index = MultiVectorIndex.build(tokens, [0, 10, 20, 30, 40], ids, tmp_path / "a", centroids=4)
    assert clirkit.MultiVectorIndex is MultiVectorIndex
    assert (index.ndocs, index.ntokens, index.dim, list(index.ids)) == (4, 40, 8, ids)
    with pytest.raises(InvalidInputError, match="dimension 16"):
        index.search(unit_tokens(3, dim=16), [0, 3], 2)
    with pytest.raises(InvalidInputError, match="no tokens"):
        index.search(unit_tokens(3), [0, 0, 3], 2)
    with pytest.raises(InvalidInputError, match="offsets"):
        index.search(unit_tokens(3), [[0, 3]], 2)
    (tmp_path / "a" / "codes.bin").write_bytes(b"garbage")
    with pytest.raises(IndexFormatError, match="codes.bin"):
        MultiVectorIndex.open(tmp_path / "a")


def test_index_size_per_token_at_d128_2bit(tmp_path: Path) -> None:
    """At d = 128 with 2-bit residuals an index takes at most 40 bytes a token, everything on disk
    counted (PLAID's is about 36): 32 of residual, 2 of centroid number, at most 4 of inverted lists, and
    the centroids, ids and offsets shared out over the tokens (800 documents of 50 tokens, 64 centroids)."""
    docs, per_doc = 800, 50
    tokens = unit_tokens(docs * per_doc, dim=128, seed=3)
    offsets = np.arange(0, docs * per_doc + 1, per_doc, dtype=np.uint64)
    ids = [f"doc{i}" for i in range(docs)]
    index = MultiVectorIndex.build(tokens, offsets, ids, tmp_path / "idx", nbits=2, centroids=64, threads=2)
    assert (index.ntokens, index.dim) == (docs * per_doc, 128)
    on_disk = sum(p.stat().st_size for p in (tmp_path / "idx").rglob("*") if p.is_file())
    assert 34 < on_disk / index.ntokens <= 40


def test_load_tokens_checks_ids_against_offsets(tmp_path: Path) -> None:
    np.save(tmp_path / "p.tokens.npy", unit_tokens(5))
    np.save(tmp_path / "p.offsets.npy", np.array([0, 2, 5]))
    (tmp_path / "p.ids.txt").write_text("a\n")
    with pytest.raises(ValueError, match="1 ids but .* 3 offsets"):
        load_tokens(tmp_path / "p")


def test_colbert_conventions_and_projection(tmp_path: Path) -> None:
    """Markers, [MASK] query augmentation to query_maxlen, punctuation skipped in documents, and a
    projection from the model directory."""
    pytest.importorskip("onnxruntime")
    import shutil

    from clirkit.encoders import OnnxEncoder
    from clirkit.encoders.tokens import TokenEncoder

    source = shared_path("models", "all-MiniLM-L6-v2-int8")
    plain = TokenEncoder(OnnxEncoder(source, device="cpu", threads=2))
    model = tmp_path / "colbert-minilm"
    shutil.copytree(source, model)
    config = json.loads((model / "config.json").read_text())
    config["colbert"] = {
        "query_marker": "[unused0]",
        "doc_marker": "[unused1]",
        "query_maxlen": 16,
        "doc_maxlen": 32,
        "mask_punctuation": True,
    }
    (model / "config.json").write_text(json.dumps(config))
    np.save(model / "projection.npy", np.random.default_rng(0).standard_normal((64, 384)).astype(np.float32))
    colbert = TokenEncoder(OnnxEncoder(model, device="cpu", threads=2))
    queries = colbert.encode_queries(["what causes ulcers?", "a b c d e f g h i j k l m n o p q r s t"])
    assert [q.shape for q in queries] == [(16, 64), (16, 64)]
    np.testing.assert_allclose(np.linalg.norm(queries[0], axis=1), 1.0, atol=1e-5)
    doc = "Ulcers, it seems, are caused by bacteria."
    with_marks = colbert.encode_passages([doc])[0]
    wordpieces = len(plain.encoder.tokenizer.encode(doc).ids)  # [CLS] ... [SEP]
    assert plain.encode_passages([doc])[0].shape == (wordpieces, 384)
    # The [D] marker added, the two commas and the full stop skipped.
    assert with_marks.shape == (wordpieces + 1 - 3, 64)
    assert colbert.encode_passages(["word " * 40])[0].shape == (32, 64)


def test_passages_encode_to_ids_with_separator_and_maxp(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    model = shared_path("models", "all-MiniLM-L6-v2-int8")
    corpus = shared_path("data", "beir-scifact", "corpus.jsonl")
    with open(corpus, encoding="utf-8") as src:
        (tmp_path / "c.jsonl").write_text("".join(next(src) for _ in range(4)), encoding="utf-8")
    args = ["encode", "--multivector", "--model", str(model), "--corpus", str(tmp_path / "c.jsonl")]
    assert main([*args, "--output", str(tmp_path / "p"), "--passages", "48:24", "--quiet"]) == 0
    tokens, offsets, ids = load_tokens(tmp_path / "p")
    assert len(ids) > 4 and all("#" in i for i in ids)
    index = MultiVectorIndex.build(tokens, offsets, ids, tmp_path / "idx", centroids=16, keep_vectors=True)
    run = index.search_run(tokens[: offsets[1]], [0, int(offsets[1])], ["q"], 10, exact=True, maxp=True)
    assert len(run["q"]) == 4 and ids[0].split("#")[0] == next(iter(run["q"]))


def test_experiment_system_kind_multivector(tmp_path: Path) -> None:
    """``kind = "multivector"`` in an experiment file: the run equals searching the same index directly."""
    pytest.importorskip("onnxruntime")
    import io

    from clirkit.experiment import Experiment
    from conftest import sample_experiment_head

    model = shared_path("models", "all-MiniLM-L6-v2-int8")
    text = sample_experiment_head("sample-mv", ("en",)) + (
        f'\n[systems.minilm-mv]\nkind = "multivector"\nmodel = "{model}"\nfields = ["text"]\n'
        'max_length = 32\nnbits = 4\ncentroids = 64\n\n[evaluation]\nmeasures = ["nDCG@10"]\n'
    )
    path = tmp_path / "exp.toml"
    path.write_text(text, encoding="utf-8")
    exp = Experiment(path, tmp_path / "work", quiet=True)
    exp.run(log=io.StringIO())
    stage = exp.plan.runs["minilm-mv"]["mlir/en"]
    index_stage, queries_stage = stage.inputs
    index = MultiVectorIndex.open(index_stage.output / "index")
    tokens, offsets, qids = load_tokens(queries_stage.output / "queries")
    direct = tmp_path / "direct.trec"
    index.search_trec(tokens, offsets, qids, direct, 1000)
    written = (tmp_path / "work" / "runs" / "minilm-mv" / "mlir" / "en.trec").read_text()
    assert written and written.split("\n")[0].split()[:5] == direct.read_text().split("\n")[0].split()[:5]


class _Killed(BaseException):
    """Stands for a kill -9 between two chunks (BaseException: nothing on the way catches it)."""


def test_token_encoding_resumes_to_identical_files(tmp_path: Path) -> None:
    """An encoding stopped after two chunks, its partial files then given a torn record (a kill in the
    middle of a write), resumes from its last synced chunk and writes the bytes of an uninterrupted run;
    other settings are refused, --restart starts over."""
    pytest.importorskip("onnxruntime")
    from clirkit.encoders import OnnxEncoder
    from clirkit.encoders.tokens import TokenEncoder, encode_tokens_file, token_output_paths, token_paths

    model = shared_path("models", "all-MiniLM-L6-v2-int8")
    corpus = tmp_path / "c.jsonl"
    with open(shared_path("data", "beir-scifact", "corpus.jsonl"), encoding="utf-8") as src:
        corpus.write_text("".join(next(src) for _ in range(6)), encoding="utf-8")
    encoder = TokenEncoder(OnnxEncoder(model, device="cpu", threads=2, max_length=48))
    options = dict(passages=(32, 16), chunk_size=2, quiet=True)
    whole = encode_tokens_file(encoder, corpus, tmp_path / "whole", **options)
    assert whole.records == 6 and whole.items > 6 and whole.resumed_items == 0
    offsets = np.load(whole.offsets_path)
    # The streamed header is np.save's: the offsets file is what np.save writes.
    np.save(tmp_path / "saved.npy", offsets)
    assert whole.offsets_path.read_bytes() == (tmp_path / "saved.npy").read_bytes()

    class StopsAfterTwoChunks(TokenEncoder):
        chunks = 0

        def encode_passages(self, texts):
            if self.chunks == 2:
                raise _Killed
            self.chunks += 1
            return super().encode_passages(texts)

    prefix = tmp_path / "resumed"
    with pytest.raises(_Killed):
        encode_tokens_file(StopsAfterTwoChunks(encoder.encoder), corpus, prefix, **options)
    partial = token_output_paths(prefix)
    assert not any(p.exists() for p in token_paths(prefix).values())
    for name in ("tokens_partial", "offsets_partial", "ids_partial"):
        with open(partial[name], "ab") as f:
            f.write(b"\x7f torn record")
    with pytest.raises(InvalidInputError, match="different settings"):
        encode_tokens_file(encoder, corpus, prefix, **{**options, "passages": (24, 12)})
    resumed = encode_tokens_file(encoder, corpus, prefix, **options)
    assert 0 < resumed.resumed_items < resumed.items == whole.items
    for name, path in token_paths(prefix).items():
        assert path.read_bytes() == token_paths(tmp_path / "whole")[name].read_bytes(), name
    assert not partial["state"].exists()

    # --restart discards an interrupted run and encodes everything again.
    with pytest.raises(_Killed):
        encode_tokens_file(StopsAfterTwoChunks(encoder.encoder), corpus, prefix, **options)
    args = ["encode", "--multivector", "--model", str(model), "--max-length", "48", "--passages", "32:16"]
    args += ["--corpus", str(corpus), "--output", str(prefix), "--chunk-size", "2", "--quiet", "--restart"]
    assert main(args) == 0
    for name, path in token_paths(prefix).items():
        assert path.read_bytes() == token_paths(tmp_path / "whole")[name].read_bytes(), name
