"""Experiment files that cannot run fail before anything runs, naming the file, the line and the key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from clirkit.experiment import Experiment, ExperimentError, load_config
from conftest import SAMPLE, bm25_system, sample_experiment_head

GOOD = (
    sample_experiment_head("t", ["en", "de"])
    + "\n"
    + bm25_system("bm25")
    + "\n"
    + bm25_system("bm25-k12", k1=1.2)
    + """
[fusion.rrf]
inputs = ["bm25", "bm25-k12"]
k = 60

[evaluation]
measures = ["nDCG@10", "Judged@10"]
baseline = "bm25"
"""
)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "exp.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def _fails(tmp_path: Path, text: str, line_needle: str, key: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ExperimentError) as err:
        Experiment(path, tmp_path / "work")
    shown = str(err.value)
    assert shown.startswith(f"{path}:{_line_of(text, line_needle)}: {key}: "), shown
    assert re.search(message, shown), shown
    assert not (tmp_path / "work").exists()  # nothing ran


def test_a_good_file_loads(tmp_path):
    config = load_config(_write(tmp_path, GOOD))
    assert list(config.systems) == ["bm25", "bm25-k12"] and config.fusion["rrf"].k == 60
    assert config.systems["bm25-k12"].options["k1"] == 1.2


def test_unknown_key(tmp_path):
    text = GOOD.replace("k1 = 1.2", "k1 = 1.2\nkl = 3")
    _fails(tmp_path, text, "kl = 3", "systems.bm25-k12.kl", "unknown key")


def test_unknown_top_level_key(tmp_path):
    _fails(tmp_path, GOOD + "\n[evalutaion]\nmeasures = []\n", "[evalutaion]", "evalutaion", "unknown key")


def test_missing_collection_file(tmp_path):
    text = GOOD.replace('qrels = "qrels.tsv"', 'qrels = "qrels/none.tsv"')
    _fails(tmp_path, text, "qrels/none.tsv", "collections.sample.qrels", "file not found: qrels/none.tsv")


def test_missing_neuclir_file_in_an_inline_table(tmp_path):
    text = GOOD.replace(
        '[collections.sample]\npath = "{}"\nqrels = "qrels.tsv"\nlang_field = "lang"'.format(SAMPLE),
        f'[collections.sample]\nformat = "neuclir"\ndocs = {{ zh = "{SAMPLE}/corpus.jsonl", ru = "nope.jsonl" }}\n'
        f'topics = "{SAMPLE}/queries.jsonl"\nqrels = {{ mlir = "{SAMPLE}/qrels.tsv" }}',
    )
    _fails(tmp_path, text, "nope.jsonl", "collections.sample.docs.ru", "file not found: nope.jsonl")


def test_system_referenced_but_not_defined(tmp_path):
    text = GOOD.replace('inputs = ["bm25", "bm25-k12"]', 'inputs = ["bm25", "splade"]')
    _fails(tmp_path, text, "inputs =", "fusion.rrf.inputs", "'splade' is referenced but not defined")


def test_undefined_baseline(tmp_path):
    text = GOOD.replace('baseline = "bm25"', 'baseline = "bm26"')
    _fails(tmp_path, text, "baseline =", "evaluation.baseline", "'bm26' is referenced but not defined")


def test_cycle(tmp_path):
    text = GOOD.replace('inputs = ["bm25", "bm25-k12"]', 'inputs = ["bm25", "reranked"]') + (
        '\n[rerank.reranked]\ninput = "rrf"\nbackend = "openai"\nmodel = "m"\nbase_url = "http://127.0.0.1:9"\n'
    )
    _fails(tmp_path, text, 'input = "rrf"', "rerank.reranked.input", "cycle: rrf -> reranked -> rrf")


def test_unknown_measure(tmp_path):
    text = GOOD.replace('measures = ["nDCG@10", "Judged@10"]', 'measures = ["nDCG@10", "nDGC@10"]')
    _fails(
        tmp_path,
        text,
        'measures = ["nDCG',
        "evaluation.measures[1]",
        "unknown measure 'nDGC@10'; known measures: map",
    )


def test_unknown_system_kind(tmp_path):
    text = GOOD.replace('kind = "bm25"\nk1', 'kind = "colbert"\nk1')
    _fails(
        tmp_path,
        text,
        'kind = "colbert"',
        "systems.bm25-k12.kind",
        "unknown system kind 'colbert'.*bm25, dense",
    )


def test_wrong_type(tmp_path):
    text = GOOD.replace("k = 60", 'k = "sixty"')
    _fails(tmp_path, text, 'k = "sixty"', "fusion.rrf.k", "must be int or float")


def test_toml_syntax_error_names_the_line(tmp_path):
    text = GOOD.replace("k = 60", "k = = 60")
    path = _write(tmp_path, text)
    with pytest.raises(
        ExperimentError, match=rf"^{re.escape(str(path))}:{_line_of(text, 'k = = 60')}: invalid TOML"
    ):
        load_config(path)


def test_correlation_of_an_unknown_column(tmp_path):
    text = GOOD.replace('baseline = "bm25"', 'baseline = "bm25"\ncorrelations = [["mlir/en", "mlir/fr"]]')
    _fails(
        tmp_path,
        text,
        "correlations =",
        r"evaluation.correlations[0]",
        "'mlir/fr' is not a task, average or external column",
    )


def test_beir_group_expands_to_one_collection_per_dataset(tmp_path):
    for name in ("arguana", "scifact"):
        (tmp_path / "group" / name / "qrels").mkdir(parents=True)
        for f in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
            (tmp_path / "group" / name / f).write_text("")
    (tmp_path / "group" / "notes").mkdir()
    text = """[collections.hindi]
format = "beir-group"
path = "group"
drop_self_hits = ["arguana"]

[[tasks]]
collection = "hindi"

[systems.bm25]
kind = "bm25"
"""
    config = load_config(_write(tmp_path, text))
    assert list(config.collections) == ["arguana", "scifact"]
    assert [c.group for c in config.collections.values()] == ["hindi", "hindi"]
    assert [c.drop_self_hits for c in config.collections.values()] == [True, False]
    assert [(t.collection, t.setting) for t in config.tasks] == [("arguana", "all"), ("scifact", "all")]
    bad = text.replace('path = "group"', 'path = "group"\ndatasets = ["scifact", "fiqa"]')
    _fails(tmp_path, bad, "datasets =", "collections.hindi.datasets", "'fiqa' is not a BEIR dataset")
