"""The NeuCLIR measures in an experiment: on a multilingual (MLIR) task the `neuclir` preset adds
alpha-nDCG@20 with each document's language as its aspect, equal to the evaluator given the languages."""

from __future__ import annotations

import io
import json

from clirkit.evaluation import evaluate
from clirkit.experiment import Experiment
from conftest import SAMPLE, sample_experiment_head


def test_neuclir_preset_on_an_mlir_task_scores_language_aspects(tmp_path):
    path = tmp_path / "exp.toml"
    path.write_text(
        sample_experiment_head("mlir-measures", ["en", "de"])
        + '\n[systems.bm25]\nkind = "bm25"\nfields = ["text"]\n\n[evaluation]\nmeasures = ["neuclir"]\n',
        encoding="utf-8",
    )
    exp = Experiment(path, tmp_path / "work", quiet=True)
    exp.run(log=io.StringIO())
    languages = {}
    for line in (SAMPLE / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        languages[doc["_id"]] = doc["lang"]
    runs = sorted((tmp_path / "work" / "runs").rglob("*en*.trec"))
    run = next(r for r in runs if "bm25" in str(r))
    expected = evaluate(SAMPLE / "qrels.tsv", run, ["alpha_nDCG@20"], doc_languages=languages)
    got = exp.results.value("bm25", "mlir/en", "alpha_nDCG@20")
    assert got is not None and got == expected["alpha_nDCG@20"]
    assert 0 < got <= 1
    assert exp.results.value("bm25", "mlir/en", "RBP(rel=1)") is not None
