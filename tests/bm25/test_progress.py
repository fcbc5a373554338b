"""BM25 builds and searches draw clirkit's one progress bar (the Rust core counts, ``clirkit._progress``
draws): a build the MiB of its input read against the input's size, a search its queries; nothing
when stderr is not a terminal or when quiet, and the same index and run either way."""

from __future__ import annotations

import sys

from clirkit.bm25 import BM25Index, CorpusFile
from conftest import (
    BAR_CASES,
    SAMPLE,
    Terminal,
    bar_stream,
    check_drawn,
    check_search_bar_unless_quiet,
    search_command,
)

CORPUS, QUERIES = SAMPLE / "corpus.jsonl", SAMPLE / "queries.jsonl"


def query_count() -> int:
    return sum(1 for line in QUERIES.read_text(encoding="utf-8").splitlines() if line.strip())


def test_builds_and_searches_draw_on_a_terminal_only(tmp_path, monkeypatch):
    n, size = query_count(), CORPUS.stat().st_size / (1 << 20)
    outputs = []
    for case in BAR_CASES:
        stream, quiet = bar_stream(case, monkeypatch), case == "quiet"
        index = BM25Index.build(CORPUS, tmp_path / case, lang_field="lang", quiet=quiet)
        run = tmp_path / f"{case}.run"
        index.search_file_to_trec(QUERIES, run, 10, quiet=quiet)
        results = index.batch_search([("q1", "water", "en"), ("q2", "river", "en")], k=5, quiet=quiet)
        searched = index.search_file(QUERIES, 3, quiet=quiet).to_dict()
        outputs.append((run.read_bytes(), results.to_dict(), searched))
        check_drawn(case, stream, "indexing", f"{size:,.1f}/{size:,.1f} MiB read", "2/2 queries")
        assert stream.getvalue().count(f"{n}/{n} queries") == 2 * (
            case == "terminal"
        )  # the two file searches
    assert outputs[0] == outputs[1] == outputs[2]


def test_a_build_over_several_files_counts_every_file(tmp_path, monkeypatch):
    half = CORPUS.read_text(encoding="utf-8").splitlines(keepends=True)
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("".join(half[: len(half) // 2]), encoding="utf-8")
    second.write_text("".join(half[len(half) // 2 :]), encoding="utf-8")
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    BM25Index.build([CorpusFile(first), CorpusFile(second)], tmp_path / "idx", lang_field="lang")
    total = (first.stat().st_size + second.stat().st_size) / (1 << 20)
    assert f"{total:,.1f}/{total:,.1f} MiB read" in terminal.getvalue().rsplit("\r", 1)[1]


def test_the_cli_search_draws_unless_quiet(tmp_path, monkeypatch):
    BM25Index.build(CORPUS, tmp_path / "idx", lang_field="lang", quiet=True)
    n = query_count()
    command = search_command("bm25", tmp_path / "idx", QUERIES, tmp_path / "run")
    check_search_bar_unless_quiet(command, tmp_path / "run", monkeypatch, f"{n}/{n} queries")
