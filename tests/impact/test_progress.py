"""Impact builds and searches (exact and approximate) draw clirkit's one progress bar (the Rust core
counts, ``clirkit._progress`` draws): a build the MiB of its vectors read against their size, a search
its queries; nothing when stderr is not a terminal or when quiet, and the same results either way."""

from __future__ import annotations

import json
import random

from clirkit.impact import ApproximateSettings, ImpactIndex
from conftest import BAR_CASES, bar_stream, check_drawn, check_search_bar_unless_quiet, search_command


def write_vectors(path, prefix: str, count: int, rng: random.Random) -> None:
    rows = []
    for i in range(count):
        vector = {f"t{rng.randrange(300)}": rng.randint(1, 30) / 10 for _ in range(rng.randint(1, 20))}
        rows.append(json.dumps({"id": f"{prefix}{i}", "vector": vector}) + "\n")
    path.write_text("".join(rows), encoding="utf-8")


def test_builds_and_searches_draw_on_a_terminal_only(tmp_path, monkeypatch):
    rng = random.Random(3)
    docs, queries, pairs = tmp_path / "docs.jsonl", tmp_path / "queries.jsonl", tmp_path / "pairs.jsonl"
    write_vectors(docs, "d", 3000, rng)
    write_vectors(queries, "q", 23, rng)
    write_vectors(pairs, "p", 9, rng)
    given = {r["id"]: r["vector"] for r in map(json.loads, pairs.read_text(encoding="utf-8").splitlines())}
    size = docs.stat().st_size / (1 << 20)
    settings = ApproximateSettings(query_terms=3, candidates=20)
    outputs = []
    for case in BAR_CASES:
        stream, quiet = bar_stream(case, monkeypatch), case == "quiet"
        index = ImpactIndex.build(docs, tmp_path / case, threads=2, quiet=quiet)
        index.search_file_to_trec(queries, tmp_path / f"{case}.run", 10, quiet=quiet)
        approximate = index.approximate(postings_per_term=50)
        outputs.append(
            (
                (tmp_path / f"{case}.run").read_bytes(),
                index.batch_search(given, 5, quiet=quiet).to_dict(),
                index.search_file(queries, 5, quiet=quiet).to_dict(),
                approximate.batch_search(given, 5, settings=settings, quiet=quiet).to_dict(),
                approximate.batch_search(queries, 5, settings=settings, quiet=quiet).to_dict(),
            )
        )
        check_drawn(case, stream, f"{size:,.1f}/{size:,.1f} MiB read")
        drawn = stream.getvalue()
        assert (drawn.count("23/23 queries"), drawn.count("9/9 queries")) == (
            (3, 2) if case == "terminal" else (0, 0)
        )
    assert outputs[0] == outputs[1] == outputs[2]


def test_the_cli_search_draws_unless_quiet(tmp_path, monkeypatch):
    rng = random.Random(4)
    docs, queries = tmp_path / "docs.jsonl", tmp_path / "queries.jsonl"
    write_vectors(docs, "d", 200, rng)
    write_vectors(queries, "q", 7, rng)
    ImpactIndex.build(docs, tmp_path / "idx", quiet=True)
    command = search_command("impact", tmp_path / "idx", queries, tmp_path / "run")
    check_search_bar_unless_quiet(command, tmp_path / "run", monkeypatch, "7/7 queries")
