"""Impact index: search equals an exact dot product of the quantized vectors (canonical ties),
pruning == exhaustive, thread independence, bad input, CLI."""

from __future__ import annotations

import io
import json
import math
import random
from pathlib import Path

import pytest
from clirkit import ImpactIndex, InvalidInputError, ParseError
from clirkit.cli import main as cli


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def impact(weight: float, quantize: int = 100) -> int:
    """Round half away from zero (Java's Math.round for non-negative weights)."""
    return math.floor(weight * quantize + 0.5)


def search_args(index: Path, queries: Path, run: Path) -> list[str]:
    return ["search", "impact", "--index", str(index), "--queries", str(queries), "--output", str(run)]


def random_vector(rng: random.Random, vocab: int, length: int) -> dict[str, float]:
    # Zipf-like term choice and coarse weights: long and short postings, many exact ties.
    return {f"t{int(vocab ** rng.random())}": rng.randint(1, 30) / 10 for _ in range(length)}


def exact_top_k(
    docs: dict[str, dict[str, float]], query: dict[str, float], k: int
) -> list[tuple[str, float]]:
    q = {t: impact(w) for t, w in query.items()}
    scored = []
    for doc_id, vector in docs.items():
        score = sum(impact(w) * q.get(t, 0) for t, w in vector.items())
        if score > 0:
            scored.append((doc_id, float(score)))
    scored.sort(key=lambda x: x[0].encode(), reverse=True)  # canonical ties: doc id descending
    scored.sort(key=lambda x: -x[1])
    return scored[:k]


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    rng = random.Random(13)
    docs = {f"d{(i * 7919) % 100_003}": random_vector(rng, 800, rng.randint(1, 60)) for i in range(2500)}
    tmp = tmp_path_factory.mktemp("impact")
    path = write_jsonl(tmp / "docs.jsonl", [{"id": d, "contents": "", "vector": v} for d, v in docs.items()])
    index = ImpactIndex.build(path, tmp / "idx", threads=2, quiet=True)
    return docs, index, tmp


def test_search_equals_the_exact_dot_product_and_pruning_equals_exhaustive(collection):
    docs, index, _ = collection
    assert index.num_docs == len(docs) and index.quantize == 100
    assert index.manifest["quantize"] == 100
    rng = random.Random(5)
    for _ in range(25):
        query = random_vector(rng, 820, rng.randint(1, 35))
        for k in (1, 10, 1000):
            expected = exact_top_k(docs, query, k)
            for strategy in ("maxscore", "exhaustive", "auto"):
                assert index.search(query, k, strategy=strategy) == expected, (k, strategy)


def test_batch_search_is_independent_of_threads(collection):
    docs, index, tmp = collection
    rng = random.Random(8)
    queries = {f"q{i}": random_vector(rng, 800, 20) for i in range(30)}
    one = index.batch_search(queries, k=100, threads=1, quiet=True).to_dict()
    two = index.batch_search(queries, k=100, threads=2, quiet=True)
    assert two.to_dict() == one
    assert two["q3"] == index.search(queries["q3"], 100)
    # The query file forms give the same results: JSONL vectors and weighted-term TSV.
    qpath = write_jsonl(tmp / "q.vectors.jsonl", [{"id": q, "vector": v} for q, v in queries.items()])
    assert index.search_file(qpath, k=100, quiet=True).to_dict() == one
    tsv = tmp / "q.tsv"
    tsv.write_text("".join(f"{q}\t{t}\t{w}\n" for q, v in queries.items() for t, w in v.items()))
    assert index.search_file(tsv, k=100, quiet=True).to_dict() == one


def test_a_query_without_indexed_terms_finds_nothing(collection):
    _, index, _ = collection
    assert index.search({"not-a-term": 1.0}) == []
    assert index.search({"t1": 0.001}) == []  # its weight quantizes to 0


@pytest.mark.parametrize(
    ("vector", "message"),
    [
        ({"a": -0.5}, "docs.jsonl:2: 'bad': the weight of term 'a' is negative"),
        ({"a": "high"}, "docs.jsonl:2: 'bad': the weight of term 'a' is a string, not a number"),
        ({}, "docs.jsonl:2: 'bad': empty vector"),
        ({"x" * 40000: 1.0}, "over the limit of 32766"),
    ],
)
def test_bad_vectors_name_the_file_and_line(tmp_path, vector, message):
    path = write_jsonl(
        tmp_path / "docs.jsonl", [{"id": "ok", "vector": {"a": 1}}, {"id": "bad", "vector": vector}]
    )
    with pytest.raises(ParseError, match=message.replace("(", r"\(")):
        ImpactIndex.build(path, tmp_path / "idx", quiet=True)
    assert not (tmp_path / "idx").exists()


def test_bad_query_weights_are_errors(collection):
    _, index, _ = collection
    with pytest.raises(InvalidInputError, match="the weight of term 't1' is NaN"):
        index.search({"t1": float("nan")})
    with pytest.raises(InvalidInputError, match="query 'q': empty vector"):
        index.batch_search({"q": {}})


def test_cli_round_trip_with_integer_weights(tmp_path):
    docs = write_jsonl(
        tmp_path / "docs.jsonl",
        [
            {"_id": "a", "vector": {"x": 3, "y": 1}},
            {"_id": "b", "vector": {"x": 2}},
            {"_id": "c", "vector": {"z": 5}},
        ],
    )
    assert (
        cli(
            [
                "index",
                "impact",
                "--vectors",
                str(docs),
                "--index",
                str(tmp_path / "idx"),
                "--quantize",
                "1",
                "--quiet",
            ]
        )
        == 0
    )
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tx x y\n")
    run = tmp_path / "run.trec"
    args = search_args(tmp_path / "idx", queries, run)
    assert cli([*args, "--k", "10", "--threads", "1", "--quiet"]) == 0
    lines = [line.split() for line in run.read_text().splitlines()]
    assert [(r[0], r[2], r[3], float(r[4]), r[5]) for r in lines] == [
        ("q1", "a", "1", 7.0, "clirkit-impact"),
        ("q1", "b", "2", 4.0, "clirkit-impact"),
    ]
    index = ImpactIndex.open(tmp_path / "idx")
    assert index.manifest["quantize"] == 1
    index.search_file(queries, k=10, quiet=True).to_trec(tmp_path / "api.trec")
    assert (tmp_path / "api.trec").read_text() == run.read_text()


def test_cli_encodes_queries_with_model_at_search_time(tmp_path, shared):
    from clirkit.encoders import SparseEncoder, encode_sparse_file

    model = shared("models", "splade-tiny-en")
    texts = {"d1": "rain falls from clouds", "d2": "ulcers are caused by bacteria", "d3": "clouds of dust"}
    corpus = write_jsonl(tmp_path / "corpus.jsonl", [{"_id": d, "text": t} for d, t in texts.items()])
    queries = write_jsonl(tmp_path / "queries.jsonl", [{"_id": "q1", "text": "what causes rain"}])
    encoder = SparseEncoder(model, max_length=64, device="cpu")
    docs = encode_sparse_file(encoder, corpus, tmp_path / "docs", quiet=True).vectors_path
    encoded = encode_sparse_file(encoder, queries, tmp_path / "q", kind="queries", quiet=True).vectors_path
    index = ImpactIndex.build(docs, tmp_path / "idx", quiet=True)
    run = tmp_path / "run.trec"
    args = search_args(tmp_path / "idx", queries, run)
    assert cli([*args, "--model", str(model), "--max-length", "64", "--device", "cpu", "--quiet"]) == 0
    index.search_file(encoded, k=1000, quiet=True).to_trec(tmp_path / "expected.trec")
    assert run.read_text() == (tmp_path / "expected.trec").read_text()
    assert run.read_text().startswith("q1 Q0 d1 1 ")


def test_experiment_impact_system_equals_the_api(tmp_path, shared):
    from clirkit.encoders import SparseEncoder, encode_sparse_file
    from clirkit.experiment import Experiment
    from clirkit.experiment.stage import RUN_FILE
    from conftest import SAMPLE, sample_experiment_head

    model = shared("models", "splade-tiny-en")
    system = f'\n[systems.splade]\nkind = "impact"\nmodel = "{model}"\nfields = ["text"]\nmax_length = 64\n'
    evaluation = '\n[evaluation]\nmeasures = ["nDCG@10"]\n'
    path = tmp_path / "exp.toml"
    path.write_text(sample_experiment_head("impact", ("en",)) + system + evaluation, encoding="utf-8")
    exp = Experiment(path, tmp_path / "work", quiet=True)
    exp.run(log=io.StringIO())
    got = (exp.plan.runs["splade"]["mlir/en"].output / RUN_FILE).read_text()

    encoder = SparseEncoder(model, max_length=64)
    docs = encode_sparse_file(
        encoder, SAMPLE / "corpus.jsonl", tmp_path / "docs", fields=["text"], quiet=True
    )
    index = ImpactIndex.build(docs.vectors_path, tmp_path / "idx", quiet=True)
    queries = [
        json.loads(line) for line in (SAMPLE / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    english = [q for q in queries if q["lang"] == "en"]
    vectors = SparseEncoder(model).encode_queries([q["text"] for q in english])
    index.batch_search([(q["_id"], v) for q, v in zip(english, vectors)], 1000).to_trec(tmp_path / "api.trec")
    assert got == (tmp_path / "api.trec").read_text()
