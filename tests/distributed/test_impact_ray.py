"""Sharded impact search on a local Ray cluster started here: shards built as Ray tasks (a worker
killed mid-build changes nothing) and searched through shard actors, exact runs byte-identical to
the single index's, approximate runs and their audit equal to the same search in threads of this
process. Skipped without Ray, which needs Python >= 3.10."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from clirkit import ImpactIndex  # noqa: E402
from clirkit.cli import main as cli  # noqa: E402
from clirkit.distributed import ShardedImpactIndex, build_sharded_impact  # noqa: E402


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_ray_build_and_search_equal_the_single_index_and_the_local_search(cluster, tmp_path):
    rng = random.Random(3)
    vector = lambda n: {f"t{int(200 ** rng.random())}": rng.randint(1, 6) / 2 for _ in range(n)}  # noqa: E731
    write_jsonl(
        tmp_path / "docs.jsonl", [{"id": f"d{i}", "vector": vector(rng.randint(1, 20))} for i in range(600)]
    )
    write_jsonl(tmp_path / "queries.jsonl", [{"id": f"q{i}", "vector": vector(5)} for i in range(30)])
    marker = tmp_path / "crash-build"
    marker.touch()
    build_sharded_impact(tmp_path / "docs.jsonl", tmp_path / "sharded", 3, ray=True, crash_once=marker)
    assert not marker.exists(), "a build worker was killed and its task retried"
    single = ImpactIndex.build(tmp_path / "docs.jsonl", tmp_path / "single", threads=2, quiet=True)
    single.search_file_to_trec(tmp_path / "queries.jsonl", tmp_path / "single.run", 100, threads=2)
    common = [
        "--index",
        str(tmp_path / "sharded"),
        "--queries",
        str(tmp_path / "queries.jsonl"),
        "--k",
        "100",
    ]
    approximate = ["--approximate", "--postings-per-term", "6", "--query-terms", "2", "--candidates", "100"]
    for where in ("ray", "local"):
        ray_flag = ["--ray"] if where == "ray" else []
        out = tmp_path / f"{where}.run"
        assert cli(["search", "impact", *common, "--output", str(out), "--quiet", *ray_flag]) == 0
        assert out.read_bytes() == (tmp_path / "single.run").read_bytes()
        approx = tmp_path / f"{where}-approx.run"
        assert cli(["search", "impact", *common, "--output", str(approx), "--quiet", *approximate,
                    "--audit", "10", *ray_flag]) == 0  # fmt: skip
    assert (tmp_path / "ray-approx.run").read_bytes() == (tmp_path / "local-approx.run").read_bytes()
    ray_audit = json.loads((tmp_path / "ray-approx.run.audit.json").read_text())
    assert ray_audit == json.loads((tmp_path / "local-approx.run.audit.json").read_text())
    assert ray_audit["accuracy_at_10"] < 1.0
    # A shard actor killed from outside is restarted and the search still gives the single run.
    with ShardedImpactIndex.open(tmp_path / "sharded", ray=True) as sharded:
        ray.kill(sharded.scatter.actors[1], no_restart=False)
        sharded.search_file_to_trec(tmp_path / "queries.jsonl", tmp_path / "killed.run", 100)
    assert (tmp_path / "killed.run").read_bytes() == (tmp_path / "single.run").read_bytes()
