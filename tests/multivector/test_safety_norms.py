"""Token vectors too large for f32 scores (report finding F20: an approximate search over token vectors of
norm >= 1e20 wrote an empty run, exit code 0). A token whose squared norm overflows f32 is refused when
it is read; tokens that pass alone but whose MaxSim overflows (norms near 1.5e19 on both sides) stop the
search with an error naming the query, in every search mode and through the command line (exit 2, no
run written); large norms that fit are searched as usual."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from clirkit import ClirkitError, MultiVectorIndex
from clirkit.cli import main as cli
from clirkit.multivector import maxsim_search

DOCS, PER = 12, 5


def unit(rows: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((rows, 8)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def offsets(items: int, per: int) -> np.ndarray:
    return np.arange(0, items * per + 1, per, dtype=np.uint64)


def index(tmp_path: Path, scale: float) -> MultiVectorIndex:
    ids = [f"d{i}" for i in range(DOCS)]
    return MultiVectorIndex.build(
        unit(DOCS * PER, 0) * scale, offsets(DOCS, PER), ids, tmp_path / "mv", keep_vectors=True, seed=0
    )


def test_a_token_whose_norm_overflows_is_refused_when_read(tmp_path):
    tokens = unit(DOCS * PER, 0)
    tokens[7] *= 1e20
    with pytest.raises(ClirkitError, match=r"token 2 of 'd1' \(item 1\) has a norm too large"):
        MultiVectorIndex.build(tokens, offsets(DOCS, PER), [f"d{i}" for i in range(DOCS)], tmp_path / "mv")
    queries = unit(8, 1)
    queries[5] *= 1e20
    good = index(tmp_path, 1.0)
    with pytest.raises(ClirkitError, match="norm too large"):
        good.search(queries, offsets(2, 4), k=5)


@pytest.mark.parametrize("mode", [{}, {"refine": True}, {"exact": True}])
def test_scores_that_overflow_stop_the_search_naming_the_query(tmp_path, mode):
    big = index(tmp_path, 1.5e19)
    queries = unit(8, 1) * 1.5e19  # each token passes alone; their MaxSim is past f32's range
    with pytest.raises(ClirkitError, match="query 0: a MaxSim score overflows f32"):
        big.search(queries, offsets(2, 4), k=5, **mode)
    with pytest.raises(ClirkitError, match="query 'q0': a MaxSim score overflows f32"):
        big.search_run(queries, offsets(2, 4), ["q0", "q1"], k=5, **mode)
    with pytest.raises(ClirkitError, match="overflows f32"):
        maxsim_search(unit(DOCS * PER, 0) * 1.5e19, offsets(DOCS, PER), queries, offsets(2, 4), k=5)


def test_large_norms_that_fit_are_searched(tmp_path):
    scores, found = index(tmp_path, 1e18).search(unit(8, 1), offsets(2, 4), k=5)
    assert np.isfinite(scores).all() and (found >= 0).all() and scores.shape == (2, 5)


def test_the_command_line_exits_2_and_writes_no_run(tmp_path, capsys):
    docs, queries = tmp_path / "docs", tmp_path / "queries"
    np.save(f"{docs}.tokens.npy", unit(DOCS * PER, 0) * 1.5e19)
    np.save(f"{docs}.offsets.npy", offsets(DOCS, PER).astype(np.int64))
    Path(f"{docs}.ids.txt").write_text("".join(f"d{i}\n" for i in range(DOCS)))
    np.save(f"{queries}.tokens.npy", unit(8, 1) * 1.5e19)
    np.save(f"{queries}.offsets.npy", offsets(2, 4).astype(np.int64))
    Path(f"{queries}.ids.txt").write_text("q0\nq1\n")
    idx, run = tmp_path / "idx", tmp_path / "run.trec"
    assert cli(["index", "multivector", "--embeddings", str(docs), "--index", str(idx), "--quiet"]) == 0
    argv = ["search", "multivector", "--index", str(idx), "--queries", str(queries), "--output", str(run)]
    assert cli([*argv, "--quiet"]) == 2
    assert "query 'q0': a MaxSim score overflows f32" in capsys.readouterr().err
    assert not run.exists()
