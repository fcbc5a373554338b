"""Multi-vector search (compressed, exact, and ``maxsim_search`` without an index) and the build draw
the one progress bar (queries searched; token assignments to centroids), fed by the core's counter
while the GIL is released: on a terminal only, not with ``quiet``, and the results are the same
either way."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
from clirkit.cli import main as cli
from clirkit.encoders.tokens import token_paths
from clirkit.multivector import MultiVectorIndex, maxsim_search
from conftest import Terminal, check_search_bar_unless_quiet, search_command


def unit_tokens(rows: int, dim: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def items(n: int, per_item: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    return unit_tokens(n * per_item, 8, seed), np.arange(0, n * per_item + 1, per_item, dtype=np.uint64)


def searched(index: MultiVectorIndex, queries: tuple, docs: tuple, out: Path, **options) -> tuple:
    qids = [f"q{i}" for i in range(len(queries[1]) - 1)]
    scores, ids = index.search(*queries, 10, threads=2, **options)
    run = index.search_run(*queries, qids, 10, threads=2, **options)
    exact = index.search_run(*queries, qids, 5, exact=True, maxp=True, threads=2, **options)
    index.search_trec(*queries, qids, out, 10, threads=2, **options)
    brute = maxsim_search(*docs, *queries, 10, threads=2, **options)
    return scores.tobytes(), ids.tobytes(), run, exact, out.read_bytes(), *(part.tobytes() for part in brute)


def test_a_terminal_shows_the_queries_searched_and_results_do_not_change(tmp_path, monkeypatch):
    docs, queries = items(90, 5, 1), items(23, 4, 2)
    ids = [f"d{i // 2}#{i % 2}" for i in range(90)]
    index = MultiVectorIndex.build(*docs, ids, tmp_path / "idx", centroids=16, keep_vectors=True, threads=1)
    terminal, piped, quiet = Terminal(), io.StringIO(), Terminal()
    results = []
    for stream, options in ((terminal, {}), (piped, {}), (quiet, {"quiet": True})):
        monkeypatch.setattr(sys, "stderr", stream)
        results.append(searched(index, queries, docs, tmp_path / "run.trec", **options))
    assert results[0] == results[1] == results[2]
    drawn = terminal.getvalue()
    assert drawn.count("23/23 queries") == 5 and "searching" in drawn and "eta" in drawn
    assert piped.getvalue() == "" and quiet.getvalue() == ""


def test_cli_search_draws_the_bar_unless_quiet(tmp_path, monkeypatch):
    docs = items(40, 4, 3)
    MultiVectorIndex.build(*docs, [f"d{i}" for i in range(40)], tmp_path / "idx", centroids=8, threads=1)
    tokens, offsets = items(9, 3, 4)
    paths = token_paths(tmp_path / "q")
    np.save(paths["tokens"], tokens)
    np.save(paths["offsets"], offsets.astype(np.int64))
    paths["ids"].write_text("".join(f"q{i}\n" for i in range(9)))
    output = tmp_path / "run.trec"
    command = [*search_command("multivector", tmp_path / "idx", tmp_path / "q", output), "--k", "5"]
    check_search_bar_unless_quiet(command, output, monkeypatch, "9/9 queries")


def test_a_build_shows_its_token_assignments_on_a_terminal_only(tmp_path, monkeypatch):
    docs = items(60, 5, 5)
    ids = [f"d{i}" for i in range(60)]
    options = {"centroids": 8, "kmeans_sample": 40, "kmeans_iterations": 3, "threads": 2}
    total = 3 * 40 + 60 * 5  # the k-means passes over the sample, then every token
    terminal, piped, quiet = Terminal(), io.StringIO(), Terminal()
    files = []
    for name, stream, extra in (
        ("shown", terminal, {}),
        ("piped", piped, {}),
        ("quiet", quiet, {"quiet": True}),
    ):
        monkeypatch.setattr(sys, "stderr", stream)
        MultiVectorIndex.build(*docs, ids, tmp_path / name, **options, **extra)
        files.append({p.name: p.read_bytes() for p in sorted((tmp_path / name).iterdir())})
    assert files[0] == files[1] == files[2]
    assert f"{total}/{total} tokens assigned" in terminal.getvalue() and "indexing" in terminal.getvalue()
    assert piped.getvalue() == "" and quiet.getvalue() == ""
    # The command line: the same bar, none with --quiet.
    paths = token_paths(tmp_path / "docs")
    np.save(paths["tokens"], docs[0])
    np.save(paths["offsets"], docs[1].astype(np.int64))
    paths["ids"].write_text("".join(i + "\n" for i in ids))
    command = ["index", "multivector", "--embeddings", str(tmp_path / "docs"), "--centroids", "8"]
    for quiet_flag in (False, True):
        shown = Terminal()
        monkeypatch.setattr(sys, "stderr", shown)
        index = str(tmp_path / f"cli-{quiet_flag}")
        assert cli([*command, "--index", index, *(["--quiet"] if quiet_flag else [])]) == 0
        assert ("tokens assigned" in shown.getvalue()) is not quiet_flag
