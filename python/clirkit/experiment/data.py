"""Collections turned into tasks: for each task, the documents searched, the queries and the qrels.

- BEIR directories (``corpus.jsonl``, ``queries.jsonl``, ``qrels/test.tsv``): setting ``all`` searches
  every document with the judged queries; with a ``lang_field``, ``mono`` pairs the queries and
  documents of one language, ``clir`` the queries of ``query_language`` with the documents of one
  language, ``mlir`` the queries of ``query_language`` (or of each of ``languages``) with every
  document.
- NeuCLIR-style files (``docs`` and ``translations`` per language, topics with one entry per language,
  qrels per language plus ``mlir``): ``mono`` and ``clir-qt`` search the native documents with the topic
  in their language, ``clir`` with the English topic, ``clir-dt`` the English translations with the
  English topic; ``mlir`` and ``mlir-dt`` search every native (or translated) document with the English
  topic against the ``mlir`` qrels.

Qrels are restricted to the searched documents and the task's queries whenever a task searches part
of a collection, so that an ideal ranking is reachable."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from clirkit._atomic import write_json_atomic
from clirkit._native import ParseError
from clirkit.bm25 import CorpusFile
from clirkit.datasets import ID_FIELDS, QUERY_FIELDS, QUERY_ID_FIELDS, iter_objects, plain_json, record_id
from clirkit.experiment.config import Collection, ExperimentConfig, TaskSpec
from clirkit.experiment.toml_source import ExperimentError
from clirkit.sources import identity_of

#: NeuCLIR topics name languages with ISO 639-3 codes; clirkit's analyzers use ISO 639-1.
ISO3_TO_1 = {"eng": "en", "zho": "zh", "rus": "ru", "fas": "fa", "ara": "ar", "deu": "de", "fra": "fr"}


def file_identity(path: str) -> dict:
    """What identifies an input file in stage digests: its path, size and content (a SHA-256 of its
    bytes, see :func:`content_digest`); for a file exported from a named collection (``irds:``,
    ``hf:``), the dataset id and revision."""
    named = identity_of(path)
    if named is not None:
        return named
    size, digest = content_digest(path)
    return {"path": os.path.abspath(path), "size": size, "sha256": digest}


#: Content digests already computed, by (device, inode, size, mtime, ctime): any write to a file, or a
#: restored modification time (``cp -p``, ``touch -r``), changes its ctime, so a changed file is
#: always hashed again and an unchanged one never is.
_DIGESTS: dict[tuple[int, ...], str] = {}


def _digest_cache() -> Optional[str]:
    """The file keeping digests across runs: ``$XDG_CACHE_HOME/clirkit/file-digests.json`` (or under
    ``~/.cache``); ``CLIRKIT_DIGEST_CACHE=off`` keeps them in memory only."""
    if os.environ.get("CLIRKIT_DIGEST_CACHE") == "off":
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "clirkit", "file-digests.json")


def content_digest(path: str) -> tuple[int, str]:
    """``(size, SHA-256 hex)`` of a file's bytes, streamed; reused while the file's device, inode,
    size, mtime and ctime are unchanged (kept across runs in :func:`_digest_cache`'s file)."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    cache = _digest_cache()
    if key not in _DIGESTS and cache is not None:
        try:
            with open(cache, encoding="utf-8") as f:
                stored = json.load(f)
            _DIGESTS.update({tuple(int(x) for x in k.split(":")): v for k, v in stored.items()})
        except (OSError, ValueError, AttributeError, TypeError):
            pass  # no cache yet, or an unreadable one: hash
    digest = _DIGESTS.get(key)
    if digest is None:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        digest = _DIGESTS[key] = h.hexdigest()
        if cache is not None:
            try:
                os.makedirs(os.path.dirname(cache), exist_ok=True)
                recent = dict(list(_DIGESTS.items())[-10000:])
                write_json_atomic(cache, {":".join(map(str, k)): v for k, v in recent.items()})
            except OSError:
                pass  # a read-only home: digests are kept for this process only
    return st.st_size, digest


def digest_of(value: object) -> str:
    blob = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:20]


@dataclass(frozen=True)
class DocSource:
    """One documents file, optionally only the documents of one language (``lang_filter``, read
    from ``lang_field``), analyzed in ``fixed_lang`` or, when None, in each document's ``lang_field``
    (``default_lang`` for a document without one)."""

    path: str
    lang_filter: Optional[str]
    fixed_lang: Optional[str]
    lang_field: Optional[str]
    default_lang: Optional[str] = None  # for documents without ``lang_field``

    def identity(self) -> dict:
        out = {
            "file": file_identity(self.path),
            "lang_filter": self.lang_filter,
            "fixed_lang": self.fixed_lang,
            "lang_field": self.lang_field,
        }
        if self.default_lang is not None:
            out["default_lang"] = self.default_lang
        return out


#: A task's documents as its systems read them: one JSONL file, or several read in sequence.
Corpus = Union[Path, list[CorpusFile]]


@dataclass(frozen=True)
class DocSet:
    """The documents one task searches: one or more sources. Unfiltered sources are read in place
    (several in sequence, as one corpus); a language-filtered source, or sources whose documents name
    their language in different fields, are first written to one JSONL file (each record whole, with
    ``_id`` and ``lang`` set)."""

    sources: tuple[DocSource, ...]

    @property
    def direct(self) -> bool:
        """One source, used as it is."""
        return len(self.sources) == 1 and self.sources[0].lang_filter is None

    @property
    def language_field(self) -> Optional[str]:
        """The field naming a document's language in the sources that do not fix it ("lang" when
        every source fixes it); None when they differ."""
        fields = {s.lang_field for s in self.sources if s.fixed_lang is None}
        if not fields:
            return "lang"
        return fields.pop() if len(fields) == 1 and None not in fields else None

    @property
    def in_place(self) -> bool:
        """Whether the sources are read where they are: no language filter, and one language field."""
        return all(s.lang_filter is None for s in self.sources) and self.language_field is not None

    def identity(self) -> list:
        return [s.identity() for s in self.sources]

    def describe(self) -> str:
        parts = []
        for s in self.sources:
            name = os.path.basename(os.path.dirname(s.path)) + "/" + os.path.basename(s.path)
            parts.append(name + (f"[{s.lang_field}={s.lang_filter}]" if s.lang_filter else ""))
        return " + ".join(parts)


@dataclass(frozen=True)
class Task:
    """One column group of the table: a label (``mono/zh``, ``scifact``), its group for averages,
    the documents, the queries ``(qid, text, lang)``, the qrels and the measures."""

    label: str
    group: str
    collection: str
    setting: str
    language: Optional[str]
    docs: DocSet
    queries: tuple[tuple[str, str, Optional[str]], ...]
    qrels: str
    filter_qrels: bool
    measures: tuple[str, ...]
    drop_self_hits: bool

    @property
    def queries_digest(self) -> str:
        return digest_of(self.queries)


def _read_jsonl(path: str):
    """``(line, object)`` of a JSONL file by the one record reader (gzip read as such, a byte-order
    mark skipped); its errors as :class:`ExperimentError` naming file and line."""
    try:
        yield from iter_objects(path)
    except ParseError as err:
        raise ExperimentError(str(err)) from None


def _id_of(path: str, number: int, obj: dict, fields) -> str:
    """The record's id by the one id rule (``clirkit.datasets.record_id``)."""
    try:
        return record_id(path, number, obj, fields)
    except ParseError as err:
        raise ExperimentError(str(err)) from None


def _beir_queries(coll: Collection) -> list[tuple[str, str, Optional[str]]]:
    assert coll.queries is not None
    out = []
    for number, q in _read_jsonl(coll.queries):
        qid = _id_of(coll.queries, number, q, QUERY_ID_FIELDS)
        text = next((q[k] for k in QUERY_FIELDS if k in q), None)
        if type(text) is not str:
            raise ExperimentError(f"{coll.queries}:{number}: a query needs an id and a text")
        lang = q.get(coll.lang_field or "lang") if coll.lang_field else coll.lang
        out.append((qid, text, lang if lang is None or type(lang) is str else str(lang)))
    return out


def _qrels_qids(path: str) -> set[str]:
    from clirkit.runs import read_qrels

    return set(read_qrels(path))


@dataclass(frozen=True)
class TopicEntry:
    """One language's version of a NeuCLIR topic: its ``source`` ("original", "human translation",
    a machine translation's name, or None when the file gives none), the query text composed from the
    collection's ``topic_fields``, and the line it came from."""

    source: Optional[str]
    text: str
    line: int


#: topic id -> ISO 639-1 language -> every entry of that language, in file order.
Topics = dict[str, dict[str, list[TopicEntry]]]


def _neuclir_topics(coll: Collection) -> Topics:
    """Every entry of every topic, its text the collection's ``topic_fields`` joined by a space (as
    NeuCLIRBench's title + description queries); which entry a task uses is :func:`topic_text`'s choice."""
    assert coll.topics is not None
    topics: Topics = {}
    for number, t in _read_jsonl(coll.topics):
        tid = t.get("topic_id")
        entries = t.get("topics")
        if tid is None or not isinstance(entries, list):
            raise ExperimentError(f"{coll.topics}:{number}: a topic needs topic_id and topics: [...]")
        by_lang: dict[str, list[TopicEntry]] = {}
        for entry in entries:
            lang = ISO3_TO_1.get(entry.get("lang"), entry.get("lang"))
            parts = []
            for name in coll.topic_fields:
                text = entry.get(name)
                if not isinstance(text, str):
                    raise ExperimentError(f"{coll.topics}:{number}: topic '{tid}' ({lang}) has no '{name}'")
                parts.append(text.strip())
            by_lang.setdefault(lang, []).append(TopicEntry(entry.get("source"), " ".join(parts), number))
        topics[str(tid)] = by_lang
    return topics


def topic_text(coll: Collection, tid: str, lang: str, entries: list[TopicEntry], setting: str) -> str:
    """The query text of topic ``tid`` in ``lang`` for a task of ``setting``: with query translation
    (``clir-qt``) the entry of the collection's ``mt_source`` when one is named, else (and in every other
    setting, which use human topics) the only entry, or the one from a source in ``human_sources``.
    Entries of one language that disagree with no source chosen are an error naming the topic."""
    if setting == "clir-qt" and coll.mt_source is not None:
        chosen = [e for e in entries if e.source == coll.mt_source]
        if not chosen:
            found = ", ".join(str(e.source) for e in entries)
            raise ExperimentError(
                f"{coll.topics}:{entries[0].line}: topic '{tid}' has no '{lang}' entry from mt_source "
                f"'{coll.mt_source}' (sources: {found})"
            )
    elif setting == "clir-qt" or len(entries) == 1:
        chosen = entries
    else:
        chosen = [e for e in entries if e.source in coll.human_sources] or entries
    if len({e.text for e in chosen}) > 1:
        sources = ", ".join(f"{e.source} (line {e.line})" for e in chosen)
        hint = (
            "name the translation with mt_source"
            if setting == "clir-qt"
            else "list the human one in human_sources"
        )
        raise ExperimentError(
            f"{coll.topics}: topic '{tid}' has {len(chosen)} different '{lang}' entries ({sources}) and "
            f"no source is chosen for setting '{setting}': {hint}"
        )
    return chosen[0].text


def _label(config: ExperimentConfig, spec: TaskSpec, lang: Optional[str]) -> str:
    coll = config.collections[spec.collection]
    parts = []
    if len(config.collections) > 1 or spec.setting == "all":
        parts.append(spec.collection)
    if spec.setting != "all":
        parts.append(spec.setting)
    if lang is not None:
        parts.append(lang)
    del coll
    return "/".join(parts)


def _group(config: ExperimentConfig, spec: TaskSpec) -> str:
    coll = config.collections[spec.collection]
    if spec.setting == "all":
        return coll.group
    return spec.setting if len(config.collections) == 1 else f"{spec.collection}/{spec.setting}"


def build_tasks(config: ExperimentConfig) -> list[Task]:
    """Every task of the experiment, in file order (queries read now: they are part of digests)."""
    tasks: list[Task] = []
    topic_cache: dict[str, Topics] = {}
    query_cache: dict[str, list] = {}
    for spec in config.tasks:
        coll = config.collections[spec.collection]
        measures = coll.measures or config.evaluation.measures
        for lang in spec.languages:
            label = _label(config, spec, lang)
            if coll.format == "beir":
                task = _beir_task(coll, spec, lang, query_cache)
            else:
                if coll.name not in topic_cache:
                    topic_cache[coll.name] = _neuclir_topics(coll)
                task = _neuclir_task(coll, spec, lang, topic_cache[coll.name])
            docs, queries, qrels, filter_qrels = task
            if not queries:
                raise ExperimentError(f"{config.path}: task {label}: no queries (check the languages)")
            tasks.append(
                Task(
                    label,
                    _group(config, spec),
                    coll.name,
                    spec.setting,
                    lang,
                    docs,
                    tuple(queries),
                    qrels,
                    filter_qrels,
                    tuple(measures),
                    coll.drop_self_hits,
                )
            )
    labels = [t.label for t in tasks]
    duplicated = sorted({label for label in labels if labels.count(label) > 1})
    if duplicated:
        raise ExperimentError(f"{config.path}: tasks repeat {', '.join(duplicated)}")
    return tasks


def _beir_task(coll: Collection, spec: TaskSpec, lang: Optional[str], cache: dict):
    assert coll.corpus is not None and coll.qrels is not None
    if coll.name not in cache:
        cache[coll.name] = _beir_queries(coll)
    queries = cache[coll.name]
    fixed = None if coll.lang_field else coll.lang
    if spec.setting == "all":
        judged = _qrels_qids(coll.qrels)
        chosen = [q for q in queries if q[0] in judged]
        return DocSet((DocSource(coll.corpus, None, fixed, coll.lang_field),)), chosen, coll.qrels, False
    if spec.setting == "mlir":  # every document; `languages` (if any) are query languages
        chosen = [q for q in queries if q[2] == (lang or coll.query_language)]
        return DocSet((DocSource(coll.corpus, None, fixed, coll.lang_field),)), chosen, coll.qrels, False
    query_lang = lang if spec.setting == "mono" else coll.query_language
    chosen = [q for q in queries if q[2] == query_lang]
    qrels = coll.mono_qrels if spec.setting == "mono" and coll.mono_qrels else coll.qrels
    docs = DocSet((DocSource(coll.corpus, lang, fixed, coll.lang_field),))
    return docs, chosen, qrels, True


def _neuclir_task(coll: Collection, spec: TaskSpec, lang: Optional[str], topics: dict):
    setting = spec.setting
    if setting in ("mlir", "mlir-dt"):
        files = coll.docs if setting == "mlir" else coll.translations
        # Native documents keep their own `lang` where they have one, else their file's key (NeuCLIR-1's
        # documents carry no language); translations are English.
        sources = tuple(
            DocSource(path, None, "en", None)
            if setting == "mlir-dt"
            else DocSource(path, None, None, "lang", default_lang=lang_key)
            for lang_key, path in files.items()
        )
        query_lang = coll.query_language
        qrels = coll.qrels_by_language["mlir"]
    else:
        assert lang is not None
        translated = setting == "clir-dt"
        path = coll.translations[lang] if translated else coll.docs[lang]
        sources = (DocSource(path, None, "en" if translated else lang, None),)
        query_lang = lang if setting in ("mono", "clir-qt") else coll.query_language
        qrels = coll.qrels_by_language[lang]
    queries = []
    for tid, by_lang in topics.items():
        if query_lang in by_lang:
            queries.append((tid, topic_text(coll, tid, query_lang, by_lang[query_lang], setting), query_lang))
    return DocSet(sources), queries, qrels, False


def iter_documents(source: DocSource):
    """``(id, record, lang)`` of a source's documents, its language filter applied: the id by the one
    id rule, the record whole (every field, numbers as numbers), so a rewritten document keeps every
    field a system may index."""
    for number, doc in _read_jsonl(source.path):
        doc_id = _id_of(source.path, number, doc, ID_FIELDS)
        doc_lang = doc.get(source.lang_field) if source.lang_field else None
        if source.lang_filter is not None and doc_lang != source.lang_filter:
            continue
        lang = source.fixed_lang or doc_lang or source.default_lang
        if lang is None:
            raise ExperimentError(f"{source.path}:{number}: document '{doc_id}' has no '{source.lang_field}'")
        yield doc_id, plain_json(doc), str(lang)
