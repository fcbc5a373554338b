"""NeuCLIR topics and documents: the query text is composed from named topic fields, the translation
comes from the source each setting calls for (human for mono and English-topic runs, the named MT source
for query translation), conflicting entries with no source chosen are an error naming the topic, and
documents without a ``lang`` field take their file's language."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirkit.experiment import ExperimentError, load_config
from clirkit.experiment.data import build_tasks, iter_documents


def _topic(tid: str, entries: list[tuple[str, str, str, str]]) -> str:
    return json.dumps(
        {
            "topic_id": tid,
            "topics": [
                {"lang": lang, "source": source, "topic_title": title, "topic_description": desc}
                for lang, source, title, desc in entries
            ],
        },
        ensure_ascii=False,
    )


# (lang, source, title, description) per topic: a human and a machine zh translation of each
ENTRIES = {
    "t1": (
        ("eng", "original", "solar power", "How cheap is solar electricity now?"),
        ("zho", "human translation", "太阳能", "现在太阳能发电有多便宜？"),
        ("zho", "google translation", "太阳能发电", "太阳能电力现在多便宜？"),
        ("rus", "human translation", "солнечная энергия", "Насколько дешево солнечное электричество?"),
    ),
    "t2": (
        ("eng", "original", "river floods", "Which rivers flooded in 2024?"),
        ("zho", "human translation", "河流洪水", "2024年哪些河流发生了洪水？"),
        ("zho", "google translation", "河流泛滥", "2024年哪些河流泛滥？"),
        ("rus", "human translation", "наводнения", "Какие реки разлились в 2024 году?"),
    ),
}
TOPICS = [_topic(tid, list(entries)) for tid, entries in ENTRIES.items()]


def _collection(tmp_path: Path) -> Path:
    for sub in ("docs", "translations", "qrels"):
        (tmp_path / sub).mkdir(parents=True)
    for lang, text in (("zh", "太阳能 河流"), ("ru", "солнечная энергия")):
        # NeuCLIR-1's documents carry no `lang` field
        (tmp_path / "docs" / f"{lang}.jsonl").write_text(
            json.dumps({"id": f"{lang}-1", "title": "", "text": text}, ensure_ascii=False) + "\n"
        )
        (tmp_path / "translations" / f"{lang}.en.jsonl").write_text(
            json.dumps({"id": f"{lang}-1", "title": "", "text": "solar river"}) + "\n"
        )
        (tmp_path / "qrels" / f"{lang}.txt").write_text(f"t1 0 {lang}-1 1\nt2 0 {lang}-1 1\n")
    (tmp_path / "qrels" / "mlir.txt").write_text("t1 0 zh-1 1\nt1 0 ru-1 1\n")
    (tmp_path / "topics.jsonl").write_text("\n".join(TOPICS) + "\n", encoding="utf-8")
    return tmp_path


def _experiment(tmp_path: Path, collection_keys: str, settings: list[tuple[str, list[str] | None]]) -> Path:
    root = _collection(tmp_path)
    tasks = ""
    for setting, languages in settings:
        tasks += f'\n[[tasks]]\ncollection = "c"\nsetting = "{setting}"\n'
        if languages:
            tasks += "languages = [" + ", ".join(f'"{lang}"' for lang in languages) + "]\n"
    text = f"""[experiment]
name = "topics"

[collections.c]
format = "neuclir"
docs = {{ zh = "{root}/docs/zh.jsonl", ru = "{root}/docs/ru.jsonl" }}
translations = {{ zh = "{root}/translations/zh.en.jsonl", ru = "{root}/translations/ru.en.jsonl" }}
topics = "{root}/topics.jsonl"
qrels = {{ zh = "{root}/qrels/zh.txt", ru = "{root}/qrels/ru.txt", mlir = "{root}/qrels/mlir.txt" }}
{collection_keys}
{tasks}
[systems.bm25]
kind = "bm25"
"""
    path = tmp_path / "exp.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _queries(path: Path) -> dict[str, dict[str, str]]:
    return {t.label: {q[0]: q[1] for q in t.queries} for t in build_tasks(load_config(path))}


def test_title_and_description_and_the_source_per_setting(tmp_path: Path):
    keys = 'topic_fields = ["topic_title", "topic_description"]\nmt_source = "google translation"'
    settings = [
        ("mono", ["zh", "ru"]),
        ("clir-qt", ["zh"]),
        ("clir-dt", ["zh"]),
        ("clir", ["ru"]),
        ("mlir", None),
    ]
    queries = _queries(_experiment(tmp_path, keys, settings))
    # mono: the human translation, title then description
    assert queries["mono/zh"] == {
        "t1": "太阳能 现在太阳能发电有多便宜？",
        "t2": "河流洪水 2024年哪些河流发生了洪水？",
    }
    assert queries["mono/ru"]["t1"] == "солнечная энергия Насколько дешево солнечное электричество?"
    # query translation: the named machine translation
    assert queries["clir-qt/zh"] == {
        "t1": "太阳能发电 太阳能电力现在多便宜？",
        "t2": "河流泛滥 2024年哪些河流泛滥？",
    }
    # English-topic settings: the original
    english = {
        "t1": "solar power How cheap is solar electricity now?",
        "t2": "river floods Which rivers flooded in 2024?",
    }
    assert queries["clir-dt/zh"] == queries["clir/ru"] == queries["mlir"] == english


def test_one_field_by_default(tmp_path: Path):
    queries = _queries(_experiment(tmp_path, "", [("mono", ["zh"])]))
    assert queries["mono/zh"] == {"t1": "太阳能", "t2": "河流洪水"}


def test_conflicting_entries_without_a_source_are_an_error(tmp_path: Path):
    # query translation asked for, two zh entries and no mt_source: which one is meant is unknown
    path = _experiment(tmp_path, "", [("clir-qt", ["zh"])])
    with pytest.raises(ExperimentError, match=r"topic 't1' has 2 different 'zh' entries .*mt_source"):
        build_tasks(load_config(path))
    # two human entries that disagree, for a mono run
    path = _experiment(tmp_path / "b", "", [("mono", ["zh"])])
    topics = tmp_path / "b" / "topics.jsonl"
    lines = topics.read_text(encoding="utf-8").splitlines()
    lines[1] = lines[1].replace("google translation", "human translation")
    topics.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ExperimentError, match=r"topics.jsonl: topic 't2' has 2 different 'zh' entries"):
        build_tasks(load_config(path))


def test_a_named_mt_source_missing_from_a_topic_is_an_error(tmp_path: Path):
    path = _experiment(tmp_path, 'mt_source = "deepl"', [("clir-qt", ["ru"])])
    with pytest.raises(
        ExperimentError, match=r"topics.jsonl:1: topic 't1' has no 'ru' entry from mt_source 'deepl'"
    ):
        build_tasks(load_config(path))


def test_native_mlir_documents_take_their_files_language(tmp_path: Path):
    (task,) = build_tasks(load_config(_experiment(tmp_path, "", [("mlir", None)])))
    langs = {doc_id: lang for source in task.docs.sources for doc_id, _, lang in iter_documents(source)}
    assert langs == {"zh-1": "zh", "ru-1": "ru"}
