"""A task searching several unfiltered document files (NeuCLIR's MLIR: one file per language) reads them
in place, in sequence, with no merged copy in the store: its BM25 index (with RM3's document vectors) and
runs equal those built from the merged copy the experiment used to write; an id in two files is an error
naming both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirkit import ClirkitError
from clirkit.bm25 import RM3, BM25Index
from clirkit.experiment import Experiment
from clirkit.experiment import stages as st
from clirkit.experiment.stage import RUN_FILE
from conftest import SAMPLE, zstd_frame

LANGS = ("zh", "de", "ru")


def _collection(root: Path) -> Path:
    """The sample's zh, de and ru documents as NeuCLIR files (zh zstd-compressed; ru records without
    a ``lang`` field, taking their file's language), topics from the English questions."""
    (root / "docs").mkdir(parents=True)
    docs = [json.loads(line) for line in open(SAMPLE / "corpus.jsonl", encoding="utf-8")]
    questions = [json.loads(line) for line in open(SAMPLE / "queries.jsonl", encoding="utf-8")]
    for lang in LANGS:
        lines = []
        for d in docs:
            if d["lang"] == lang:
                record = {"id": d["_id"], "title": d.get("title", ""), "text": d["text"]}
                if lang != "ru":
                    record["lang"] = lang
                lines.append(json.dumps(record, ensure_ascii=False) + "\n")
        data = "".join(lines).encode()
        name = f"{lang}.jsonl.zst" if lang == "zh" else f"{lang}.jsonl"
        (root / "docs" / name).write_bytes(zstd_frame(data) if lang == "zh" else data)
    topics = [
        json.dumps({"topic_id": q["_id"], "topics": [{"lang": "eng", "topic_title": q["text"]}]}) + "\n"
        for q in questions
        if q["lang"] == "en"
    ]
    (root / "topics.jsonl").write_text("".join(topics), encoding="utf-8")
    # An English topic is judged by what its zh/de/ru versions were judged against.
    qrels = [line.split("\t") for line in (SAMPLE / "qrels.tsv").read_text().splitlines()[1:]]
    judged = [(q.rsplit("-", 1), d, r) for q, d, r in qrels]
    mlir = "".join(f"{q}-en 0 {d} {r}\n" for (q, lang), d, r in judged if lang in LANGS)
    (root / "mlir.txt").write_text(mlir, encoding="utf-8")
    for lang in LANGS:
        (root / f"{lang}.txt").write_text("", encoding="utf-8")
    return root


def _experiment(tmp_path: Path) -> Path:
    root = _collection(tmp_path / "c")
    docs = ", ".join(f'{lang} = "{p}"' for lang, p in ((lang, _doc_file(root, lang)) for lang in LANGS))
    qrels = ", ".join(f'{lang} = "{root}/{lang}.txt"' for lang in LANGS)
    text = f"""[experiment]
name = "in-place"

[collections.c]
format = "neuclir"
docs = {{ {docs} }}
topics = "{root}/topics.jsonl"
qrels = {{ {qrels}, mlir = "{root}/mlir.txt" }}

[[tasks]]
collection = "c"
setting = "mlir"

[systems.bm25]
kind = "bm25"

[systems.rm3]
kind = "bm25"
rm3 = true
"""
    path = tmp_path / "exp.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _doc_file(root: Path, lang: str) -> Path:
    return root / "docs" / (f"{lang}.jsonl.zst" if lang == "zh" else f"{lang}.jsonl")


def _index_files(index: Path) -> dict[str, bytes]:
    """The index's data files (the manifest names its corpus, so it is left out)."""
    return {p.name: p.read_bytes() for p in sorted(index.iterdir()) if p.name != "meta.json"}


def test_mlir_documents_are_read_in_place_and_index_as_the_merged_copy(tmp_path):
    exp = Experiment(_experiment(tmp_path), quiet=True)
    exp.run()
    kinds = {s.kind for s in exp.plan.stages}
    assert "docs" not in kinds and not (exp.store.root / "docs").exists()
    (task,) = exp.tasks
    assert task.docs.in_place and len(task.docs.sources) == 3

    # What the experiment did before: the documents merged into one file, indexed with lang_field.
    merged = tmp_path / "merged"
    merged.mkdir()
    st.write_documents(task.docs)(None, merged, None)
    index_stages = [s for s in exp.plan.stages if s.kind == "bm25-index"]
    assert len(index_stages) == 2
    for stage in index_stages:
        docvectors = stage.params.get("docvectors", False)
        reference = BM25Index.build(
            merged / "corpus.jsonl",
            tmp_path / f"ref-{docvectors}",
            lang_field="lang",
            store_docvectors=docvectors,
            quiet=True,
        )
        assert _index_files(stage.output / "index") == _index_files(tmp_path / f"ref-{docvectors}")
        assert reference.languages == ["de", "ru", "zh"]
        system = "rm3" if docvectors else "bm25"
        run = tmp_path / f"{system}.trec"
        rm3 = RM3() if docvectors else None
        reference.batch_search(list(task.queries), exp.config.hits, rm3=rm3, quiet=True).to_trec(run)
        assert (exp.plan.runs[system][task.label].output / RUN_FILE).read_bytes() == run.read_bytes()


def test_an_id_in_two_document_files_is_an_error_naming_both(tmp_path):
    path = _experiment(tmp_path)
    root = tmp_path / "c"
    first = json.loads((root / "docs" / "de.jsonl").read_text(encoding="utf-8").splitlines()[1])
    with open(root / "docs" / "ru.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"id": first["id"], "text": "again"}) + "\n")
    lines = len((root / "docs" / "ru.jsonl").read_text(encoding="utf-8").splitlines())
    with pytest.raises(ClirkitError) as err:
        Experiment(path, quiet=True).run()
    message = str(err.value)
    assert f"ru.jsonl: duplicate id '{first['id']}' at line {lines}" in message
    assert f"(first seen at {root / 'docs' / 'de.jsonl'}:2)" in message
