"""Every long stage of an experiment (each index kind's build, each search) draws its progress bar
under its ``[i/n] KIND LABEL`` line when stderr is a terminal; fusion and evaluation are short and draw
none; nothing is drawn in a pipe or with ``quiet``, and the results are the same. The systems read
precomputed inputs (embeddings, impact vectors, token vectors), so no model is needed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
from clirkit.experiment import Experiment
from conftest import BAR_CASES, SAMPLE, bar_stream, bm25_system, sample_experiment_head

SYSTEMS = (
    bm25_system("bm25")
    + """
[systems.dense]
kind = "dense"
embeddings = "docs"
query_embeddings = "queries"
pq = 4

[systems.splade]
kind = "impact"
vectors = "docs.vectors.jsonl"
query_vectors = "queries.vectors.jsonl"

[systems.late]
kind = "multivector"
tokens = "docs"
query_tokens = "queries"
centroids = 8

[fusion.fused]
inputs = ["bm25", "dense"]

[evaluation]
measures = ["nDCG@10"]
"""
)
LONG = {"bm25-index", "dense-index", "impact-index", "multivector-index", "search"}
STAGE = re.compile(r"^\[\d+/\d+\] (\S+) (.*) \.\.\.$", re.M)


def write_inputs(tmp_path: Path) -> None:
    """Embeddings, impact vectors and token vectors of the sample's documents and queries."""
    rng = np.random.default_rng(1)
    for name, file in (("docs", "corpus.jsonl"), ("queries", "queries.jsonl")):
        ids = [json.loads(line)["_id"] for line in (SAMPLE / file).read_text(encoding="utf-8").splitlines()]
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((len(ids), 16)).astype(np.float32))
        (tmp_path / f"{name}.ids.txt").write_text("".join(i + "\n" for i in ids), encoding="utf-8")
        vectors = [{"id": i, "vector": {f"t{t}": 1.0 for t in rng.choice(50, 4, replace=False)}} for i in ids]
        (tmp_path / f"{name}.vectors.jsonl").write_text("".join(json.dumps(v) + "\n" for v in vectors))
        lengths = rng.integers(2, 5, size=len(ids))
        np.save(
            tmp_path / f"{name}.tokens.npy", rng.standard_normal((int(lengths.sum()), 8)).astype(np.float32)
        )
        np.save(tmp_path / f"{name}.offsets.npy", np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))


def test_each_long_stage_draws_its_bar_on_a_terminal_only(tmp_path, monkeypatch):
    write_inputs(tmp_path)
    (tmp_path / "exp.toml").write_text(
        sample_experiment_head("bars", ["en", "de"]) + SYSTEMS, encoding="utf-8"
    )
    results = []
    for case in BAR_CASES:
        stream = bar_stream(case, monkeypatch)
        exp = Experiment(tmp_path / "exp.toml", tmp_path / f"work-{case}", quiet=case == "quiet")
        results.append(exp.run(log=stream))
        text = stream.getvalue()
        starts = list(STAGE.finditer(text))
        assert len(starts) == len(exp.plan.stages) == 24
        kinds = set()
        for start, end in zip(starts, starts[1:] + [None]):
            kind, drawn = start.group(1), text[start.end() : end.start() if end else len(text)]
            kinds.add(kind)
            assert ("eta" in drawn) is (case == "terminal" and kind in LONG), (case, start.group(0))
        assert LONG < kinds and {"fuse", "eval"} < kinds
    assert results[0] == results[1] == results[2]
