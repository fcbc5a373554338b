"""Sharded impact indexes searched in threads of this process: exact search gives the single
index's run byte for byte (API and CLI, many exact score ties across shards); approximate search
merges the shards' approximate top k's; a missing shard, a rebuilt one or a sharded index of
another kind is refused naming it."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
from clirkit import ImpactIndex, IndexFormatError, InvalidInputError
from clirkit.cli import main as cli
from clirkit.distributed import ShardedImpactIndex, build_sharded_bm25, build_sharded_impact
from clirkit.distributed.impact import Pruning
from clirkit.impact import ApproximateSettings


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def random_vector(rng: random.Random, vocab: int, length: int) -> dict[str, float]:
    # Coarse weights: many exact score ties, which the merge must break as the single index does.
    return {f"t{int(vocab ** rng.random())}": rng.randint(1, 6) / 2 for _ in range(length)}


def lists(results) -> dict[str, list[tuple[str, float]]]:
    return {qid: results[qid] for qid in results}


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    rng = random.Random(11)
    # Ids not in file order, so that shard order is not id order.
    ids = [f"d{(i * 7919) % 100_003}" for i in range(1200)]
    docs = {d: random_vector(rng, 300, rng.randint(1, 30)) for d in ids}
    queries = {f"q{i}": random_vector(rng, 300, 6) for i in range(50)}
    tmp = tmp_path_factory.mktemp("sharded-impact")
    for name, vectors in (("docs", docs), ("queries", queries)):
        write_jsonl(tmp / f"{name}.jsonl", [{"id": i, "vector": v} for i, v in vectors.items()])
    return tmp, ImpactIndex.build(tmp / "docs.jsonl", tmp / "single", threads=2, quiet=True), queries


@pytest.mark.parametrize("shards", [1, 3, 5])
def test_exact_sharded_runs_equal_the_single_index_byte_for_byte(collection, shards):
    tmp, single, queries = collection
    sharded = build_sharded_impact(
        tmp / "docs.jsonl", tmp / f"sharded-{shards}", shards, threads=2, quiet=True
    )
    assert (sharded.num_docs, sharded.num_shards, sharded.quantize) == (1200, shards, 100)
    for k in (1, 10, 300):
        single.search_file_to_trec(tmp / "queries.jsonl", tmp / f"single-{k}.run", k, threads=2)
        sharded.search_file_to_trec(tmp / "queries.jsonl", tmp / f"sharded-{shards}-{k}.run", k)
        expected = (tmp / f"single-{k}.run").read_bytes()
        assert (tmp / f"sharded-{shards}-{k}.run").read_bytes() == expected, (shards, k)
        # The Python API's results are the single index's too.
        assert sharded.batch_search(queries, k) == lists(single.batch_search(queries, k))


def test_cli_sharded_exact_and_approximate(collection):
    tmp, _, queries = collection
    common = ["--queries", str(tmp / "queries.jsonl"), "--k", "100", "--quiet"]
    assert cli(["index", "impact", "--vectors", str(tmp / "docs.jsonl"), "--index", str(tmp / "cli-sharded"),
                "--shards", "4", "--quiet"]) == 0  # fmt: skip
    assert cli(["search", "impact", "--index", str(tmp / "single"), "--output", str(tmp / "cli-single.run"),
                *common]) == 0  # fmt: skip
    assert cli(["search", "impact", "--index", str(tmp / "cli-sharded"), "--output", str(tmp / "cli-sharded.run"),
                "--threads", "2", *common]) == 0  # fmt: skip
    assert (tmp / "cli-sharded.run").read_bytes() == (tmp / "cli-single.run").read_bytes()

    # Approximate: every shard pruned and searched alike, merged; the API gives the same run.
    approximate = ["--approximate", "--postings-per-term", "8", "--query-terms", "2", "--candidates", "100"]
    out = tmp / "cli-approx.run"
    assert cli(["search", "impact", "--index", str(tmp / "cli-sharded"), "--output", str(out), *approximate,
                "--audit", "20", "--audit-seed", "4", *common]) == 0  # fmt: skip
    pruning = Pruning(ApproximateSettings(query_terms=2, candidates=100), postings_per_term=8)
    with ShardedImpactIndex.open(tmp / "cli-sharded") as sharded:
        sharded.search_file_to_trec(tmp / "queries.jsonl", tmp / "api-approx.run", 100, pruning=pruning)
        exact = sharded.batch_search(queries, 10)
    assert out.read_bytes() == (tmp / "api-approx.run").read_bytes()
    assert out.read_bytes() != (tmp / "cli-sharded.run").read_bytes(), "pruned this hard, something is missed"

    # The audit beside the run equals an independent comparison of the approximate run with exact search.
    audit = json.loads((tmp / "cli-approx.run.audit.json").read_text())
    assert (audit["audited"], audit["of"], audit["seed"], audit["postings_per_term"]) == (20, 50, 4, 8)
    assert audit["settings"] == {"query_terms": 2, "candidates": 100}
    run: dict[str, list[tuple[str, float]]] = {}
    for line in out.read_text().splitlines():
        qid, _, doc, _, score, _ = line.split()
        run.setdefault(qid, []).append((doc, float(score)))
    accuracies = []
    for audited in audit["queries"]:
        want, got = exact[audited["query"]], run.get(audited["query"], [])[:10]
        found = len({d for d, _ in want} & {d for d, _ in got})
        assert audited["accuracy_at_10"] == found / len(want)
        gap = (sum(s for _, s in want) - sum(s for _, s in got)) / sum(s for _, s in want)
        assert audited["score_gap"] == pytest.approx(max(gap, 0.0), abs=1e-12)
        accuracies.append(found / len(want))
    assert audit["accuracy_at_10"] == pytest.approx(sum(accuracies) / len(accuracies))
    assert audit["min_accuracy_at_10"] == min(accuracies) < 1.0


def test_the_audit_draws_the_single_index_sample_and_is_exact_when_nothing_is_pruned(collection):
    tmp, single, queries = collection
    with ShardedImpactIndex.open(tmp / "sharded-3") as sharded:
        everything = ApproximateSettings(query_terms=0, candidates=10**6)
        report = sharded.audit(queries, 15, seed=9, k=50, pruning=Pruning(everything, postings_per_term=0))
        assert (report.accuracy_at_10, report.min_accuracy_at_10, report.max_score_gap) == (1.0, 1.0, 0.0)
        assert sharded.batch_search(queries, 50, pruning=Pruning(everything, 0)) == (
            lists(single.batch_search(queries, 50))
        )
    approx = single.approximate(postings_per_term=0, threads=2)
    same = approx.audit(queries, 15, seed=9, k=50, settings=everything, threads=2)
    assert [q.query for q in report.queries] == [q.query for q in same.queries]


def test_bad_sharded_indexes_are_refused_naming_the_path(collection, tmp_path):
    tmp, _, _ = collection
    broken = tmp_path / "broken"
    shutil.copytree(tmp / "sharded-3", broken)
    shutil.rmtree(broken / "shard-0002")
    with pytest.raises(IndexFormatError, match=r"shard-0002.*shard 2 of the sharded index is missing"):
        ShardedImpactIndex.open(broken)
    code = cli(["search", "impact", "--index", str(broken), "--queries", str(tmp / "queries.jsonl"),
                "--output", str(tmp_path / "x.run"), "--quiet"])  # fmt: skip
    assert code != 0
    # A shard rebuilt since: another build than the manifest records.
    ImpactIndex.build(tmp / "docs.jsonl", broken / "shard-0002", quiet=True)
    with pytest.raises(IndexFormatError, match=r"shard-0002.*another build"):
        ShardedImpactIndex.open(broken)
    # A sharded BM25 index is not an impact index.
    corpus = write_jsonl(
        tmp_path / "corpus.jsonl", [{"_id": f"d{i}", "text": f"word{i} rain"} for i in range(9)]
    )
    bm25 = build_sharded_bm25(corpus, tmp_path / "bm25", 2, quiet=True)
    with pytest.raises(InvalidInputError, match=rf"{bm25.manifest.path}: a sharded bm25 index, not impact"):
        ShardedImpactIndex.open(tmp_path / "bm25")
    # At least one shard; a refused build leaves nothing.
    with pytest.raises(InvalidInputError, match="shards must be at least 1"):
        build_sharded_impact(tmp / "docs.jsonl", tmp_path / "none", 0)
    assert not (tmp_path / "none").exists()


def test_ray_and_calibration_flags_are_refused_where_they_do_not_apply(collection, tmp_path):
    tmp, _, _ = collection
    search = ["search", "impact", "--queries", str(tmp / "queries.jsonl"), "--output", str(tmp_path / "r.run")]  # fmt: skip
    with pytest.raises(SystemExit, match="--ray searches a sharded index"):
        cli([*search, "--index", str(tmp / "single"), "--ray"])
    with pytest.raises(SystemExit, match="--target-accuracy is not available on a sharded index"):
        cli([*search, "--index", str(tmp / "sharded-3"), "--approximate", "--target-accuracy", "0.9"])
    with pytest.raises(SystemExit, match="--ray builds a sharded index: give --shards N"):
        cli(
            ["index", "impact", "--vectors", str(tmp / "docs.jsonl"), "--index", str(tmp_path / "i"), "--ray"]
        )
