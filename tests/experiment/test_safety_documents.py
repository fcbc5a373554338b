"""Documents and queries through every task kind (report findings F5, F8, F16): a rewritten document
keeps every field the systems name (a ``mono`` task scores as the ``mlir`` task over the same
documents), empty documents are warned about with their count, gzip inputs are read, and ids follow the
one id rule."""

from __future__ import annotations

import gzip
import io
import json
import shutil
from pathlib import Path

import pytest
from clirkit import ClirkitError
from clirkit.experiment import Experiment
from conftest import SAMPLE, zstd_frame


def english_collection(root: Path, compress: str = "") -> Path:
    """The sample's English documents and questions with the text under ``headline``/``body``, the
    corpus and queries files plain, gzip (``"gz"``) or zstd (``"zst"``)."""
    root.mkdir()
    docs = [json.loads(line) for line in open(SAMPLE / "corpus.jsonl", encoding="utf-8")]
    docs = [d for d in docs if d["lang"] == "en"]
    lines = [
        json.dumps({"_id": d["_id"], "headline": "", "body": d["text"], "lang": "en"}) + "\n" for d in docs
    ]
    queries = [line for line in open(SAMPLE / "queries.jsonl", encoding="utf-8") if '"lang": "en"' in line]
    pack = {"": lambda b: b, "gz": gzip.compress, "zst": zstd_frame}[compress]
    suffix = f".{compress}" if compress else ""
    (root / f"corpus.jsonl{suffix}").write_bytes(pack("".join(lines).encode()))
    (root / f"queries.jsonl{suffix}").write_bytes(pack("".join(queries).encode()))
    shutil.copy(SAMPLE / "qrels.tsv", root / "qrels.tsv")
    return root


def experiment(tmp_path: Path, coll: Path, suffix: str = "") -> Path:
    text = f"""[experiment]
name = "fields"

[collections.c]
path = "{coll}"
corpus = "corpus.jsonl{suffix}"
queries = "queries.jsonl{suffix}"
qrels = "qrels.tsv"
lang_field = "lang"

[[tasks]]
collection = "c"
setting = "mlir"
languages = ["en"]

[[tasks]]
collection = "c"
setting = "mono"
languages = ["en"]

[systems.bm25]
kind = "bm25"
fields = ["headline", "body"]
"""
    path = tmp_path / "fields.toml"
    path.write_text(text, encoding="utf-8")
    return path


def scores(exp: Experiment) -> dict[str, float]:
    return {r["task"]: r["value"] for r in exp.rows if r["measure"] == exp.rows[0]["measure"]}


@pytest.mark.parametrize("compress", ["", "gz", "zst"])
def test_mono_task_keeps_the_fields_a_system_names(tmp_path, capsys, compress):
    coll = english_collection(tmp_path / "c", compress)
    exp = Experiment(
        experiment(tmp_path, coll, f".{compress}" if compress else ""), tmp_path / "work", quiet=True
    )
    exp.run(log=io.StringIO())
    by_task = scores(exp)
    assert by_task["mlir/en"] > 0.5
    assert by_task["mono/en"] == pytest.approx(by_task["mlir/en"])
    assert "warning" not in capsys.readouterr().err


def test_empty_documents_are_warned_about_with_their_count(tmp_path, capsys):
    coll = english_collection(tmp_path / "c")
    path = experiment(tmp_path, coll)
    path.write_text(path.read_text().replace('fields = ["headline", "body"]', 'fields = ["title"]'))
    Experiment(path, tmp_path / "work", quiet=True).run(log=io.StringIO())
    err = capsys.readouterr().err
    count = sum(1 for _ in open(coll / "corpus.jsonl"))
    assert f"bm25: {count} of {count} documents" in err and "no text in fields ['title']" in err


@pytest.mark.parametrize(
    "bad_id, message",
    [("1.5", "id 1.5 is not a string or an integer"), ('"a b"', "white space"), ('""', "empty")],
)
def test_query_and_document_ids_follow_the_one_id_rule(tmp_path, bad_id, message):
    coll = english_collection(tmp_path / "c")
    with open(coll / "queries.jsonl", "a", encoding="utf-8") as f:
        f.write(f'{{"_id": {bad_id}, "text": "x", "lang": "en"}}\n')
    with pytest.raises(ClirkitError, match=f"queries.jsonl:\\d+: .*{message}"):
        Experiment(experiment(tmp_path, coll), tmp_path / "work", quiet=True)


def test_big_integer_ids_stay_exact(tmp_path):
    coll = english_collection(tmp_path / "c")
    big = "123456789012345678901234567890"
    with open(coll / "corpus.jsonl", "a", encoding="utf-8") as f:
        f.write(f'{{"_id": {big}, "headline": "h", "body": "zebra crossing", "lang": "en"}}\n')
    exp = Experiment(experiment(tmp_path, coll), tmp_path / "work", quiet=True)
    exp.run(log=io.StringIO())
    docs = exp.plan.docs(exp.tasks[1].docs)
    written = [json.loads(line) for line in open(docs.output / "corpus.jsonl", encoding="utf-8")]
    assert written[-1]["_id"] == big and written[-1]["body"] == "zebra crossing"
