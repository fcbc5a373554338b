"""A pointwise rerank node in an experiment sorts each query's whole depth, as ``clirkit rerank`` does
(not RankGPT's 20/10 windows, which only partially sort): with a scorer that reverses the first-stage
order, the top 100 comes out exactly reversed (the sample's runs hold up to 52 hits, more than two
windows), and the run equals the CLI's byte for byte."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import clirkit.encoders
import numpy as np
from clirkit.cli import main as cli
from clirkit.experiment import Experiment
from clirkit.runs import read_run
from conftest import SAMPLE, sample_experiment_head

DEPTH = 100


class ReversingEncoder:
    """Stands in for :class:`clirkit.encoders.OnnxEncoder`: unit vectors whose cosine gives each
    query's top ``DEPTH`` documents a score rising with their first-stage rank (the last one best).
    Query j is the unit vector of axis 2j; a passage holds, in axes 2j and 2j+1, the cosine and sine of an
    angle falling with its rank in query j's run, all divided by sqrt(queries) (so it has unit norm)."""

    ranks: dict[str, dict[str, int]] = {}  # query text -> {passage text: first-stage rank}

    def __init__(self, model_dir, **settings) -> None:
        self.queries = {text: j for j, text in enumerate(sorted(self.ranks))}

    def encode_queries(self, texts):
        out = np.zeros((len(texts), 2 * len(self.queries)))
        for row, text in enumerate(texts):
            out[row, 2 * self.queries[text]] = 1.0
        return out

    def encode_passages(self, texts):
        out = np.zeros((len(texts), 2 * len(self.queries)))
        for row, text in enumerate(texts):
            for query, j in self.queries.items():
                angle = math.pi * (DEPTH - self.ranks[query].get(text, DEPTH)) / (DEPTH + 1)
                out[row, 2 * j : 2 * j + 2] = (math.cos(angle), math.sin(angle))
        return out / math.sqrt(len(self.queries))


def _experiment(tmp_path: Path, rerank: bool) -> Experiment:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text("{}", encoding="utf-8")
    text = (
        sample_experiment_head("pointwise", ["en"]) + '\n[systems.first]\nkind = "bm25"\nfields = ["text"]\n'
    )
    if rerank:
        text += f'\n[rerank.sorted]\ninput = "first"\nbackend = "pointwise"\nmodel = "model"\nfields = ["text"]\ndepth = {DEPTH}\n'
    path = tmp_path / "exp.toml"
    path.write_text(text + '\n[evaluation]\nmeasures = ["nDCG@10"]\n', encoding="utf-8")
    exp = Experiment(path, tmp_path / "work", quiet=True)
    exp.run(log=io.StringIO())
    return exp


def test_pointwise_rerank_sorts_the_whole_depth_as_the_cli_does(tmp_path, monkeypatch):
    first = _experiment(tmp_path, rerank=False).plan.runs["first"]["mlir/en"].output / "run.trec"
    queries = [
        json.loads(line) for line in (SAMPLE / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    queries = [q for q in queries if q["lang"] == "en"]
    docs = [json.loads(line) for line in (SAMPLE / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    doc_text = {d["_id"]: d["text"] for d in docs}
    assert len(set(doc_text.values())) == len(doc_text)  # a passage's text names it
    query_text = {q["_id"]: q["text"] for q in queries}
    assert len(set(query_text.values())) == len(query_text)
    first_run = {qid: list(hits) for qid, hits in read_run(first).items()}  # canonical order
    # longer than a listwise window (20): windows sliding bottom-up could not reverse them
    assert max(len(hits) for hits in first_run.values()) > 40
    ReversingEncoder.ranks = {
        query_text[qid]: {doc_text[d]: rank for rank, d in enumerate(hits[:DEPTH])}
        for qid, hits in first_run.items()
    }
    monkeypatch.setattr(clirkit.encoders, "OnnxEncoder", ReversingEncoder)

    exp = _experiment(tmp_path, rerank=True)
    reranked = exp.plan.runs["sorted"]["mlir/en"].output / "run.trec"
    for qid, hits in read_run(reranked).items():
        order = sorted(hits, key=lambda d: -hits[d])
        assert order[:DEPTH] == first_run[qid][:DEPTH][::-1], qid  # exactly reversed: a full sort
        assert order[DEPTH:] == first_run[qid][DEPTH:]  # the rest of the run keeps its order

    qfile = tmp_path / "queries-en.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    out = tmp_path / "cli.trec"
    assert cli(["rerank", "--backend", "pointwise", "--model-dir", str(tmp_path / "model"),
                "--run", str(first), "--queries", str(qfile), "--corpus", str(SAMPLE / "corpus.jsonl"),
                "--output", str(out), "--no-cache", "--quiet"]) == 0  # fmt: skip
    assert reranked.read_bytes() == out.read_bytes()
