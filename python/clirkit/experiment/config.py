"""The experiment model, read from a TOML file and checked before anything runs.

Sections: ``[experiment]`` (name, threads, hits per query), ``[collections.NAME]`` (BEIR directories
or NeuCLIR-style files), ``[[tasks]]`` (which settings and languages to run on which collection),
``[systems.NAME]`` (first-stage retrievers, one ``kind`` each from :mod:`clirkit.experiment.systems`),
``[fusion.NAME]``, ``[rerank.NAME]``, ``[evaluation]`` and the optional ``[posir]`` report. Every
problem (unknown key, wrong type, missing file, undefined or cyclic reference, unknown measure) is an
:class:`ExperimentError` naming the file, the line and the key."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from clirkit._native import InvalidInputError
from clirkit.experiment.toml_source import ExperimentError, KeyPath, TomlSource, load_toml
from clirkit.sources import is_name
from clirkit.sources.models import is_model_id

COLLECTION_FORMATS = ("beir", "beir-group", "neuclir")
#: Settings of a task: which documents are searched with which queries (see :mod:`.data`).
BEIR_SETTINGS = ("all", "mono", "clir", "mlir")
NEUCLIR_SETTINGS = ("mono", "clir-qt", "clir-dt", "clir", "mlir-dt", "mlir")
FUSION_METHODS = ("rrf", "combsum", "combmnz", "interpolate")
RERANK_BACKENDS = ("pointwise", "openai")
AVERAGES = ("macro", "query-weighted")
_NUMBER = (int, float)


@dataclass(frozen=True)
class Collection:
    name: str
    format: str
    group: str
    measures: Optional[tuple[str, ...]]
    drop_self_hits: bool
    lang: str
    query_language: str
    lang_field: Optional[str] = None
    # beir
    corpus: Optional[str] = None
    queries: Optional[str] = None
    qrels: Optional[str] = None
    mono_qrels: Optional[str] = None
    # neuclir: language -> file
    docs: Mapping[str, str] = field(default_factory=dict)
    translations: Mapping[str, str] = field(default_factory=dict)
    topics: Optional[str] = None
    topic_field: str = "topic_title"
    qrels_by_language: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskSpec:
    collection: str
    setting: str
    languages: tuple[Optional[str], ...]


@dataclass(frozen=True)
class SystemSpec:
    name: str
    kind: str
    options: Mapping[str, Any]
    settings: Optional[tuple[str, ...]]


@dataclass(frozen=True)
class FusionSpec:
    name: str
    inputs: tuple[str, ...]
    method: str
    k: float
    weights: Optional[tuple[float, ...]]
    depth: Optional[int]
    norm: str
    alpha: Optional[float]
    top: Optional[int]


@dataclass(frozen=True)
class RerankSpec:
    name: str
    input: str
    backend: str
    options: Mapping[str, Any]
    depth: int
    window: int
    stride: int


@dataclass(frozen=True)
class EvaluationSpec:
    measures: tuple[str, ...]
    baseline: Optional[str]
    test: str
    correction: str
    alpha: float
    averages: tuple[str, ...]
    correlations: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class PosirSpec:
    spans: str
    corpus: str
    tokenizer: Optional[str]
    measure: str
    bins: int
    edges: tuple[int, ...]
    min_queries: int
    plot: bool


@dataclass(frozen=True)
class ExperimentConfig:
    path: str
    name: str
    threads: int
    hits: int
    store: Optional[str]  # an artifact store shared with other experiments (None: WORKDIR/store)
    collections: Mapping[str, Collection]
    tasks: tuple[TaskSpec, ...]
    systems: Mapping[str, SystemSpec]
    fusion: Mapping[str, FusionSpec]
    rerank: Mapping[str, RerankSpec]
    evaluation: EvaluationSpec
    posir: Optional[PosirSpec]
    source: Optional[TomlSource] = field(default=None, compare=False, repr=False)

    @property
    def base_dir(self) -> str:
        return os.path.dirname(os.path.abspath(self.path))

    def node_names(self) -> list[str]:
        """Every system, fusion and rerank node, in file order within each section."""
        return [*self.systems, *self.fusion, *self.rerank]


def _named_tables(
    source: TomlSource, top: _Reader, section: str, allowed: tuple[str, ...], names_seen: dict[str, str]
) -> Iterator[tuple[str, _Reader]]:
    """Each ``[section.NAME]`` table as (NAME, its reader), refusing a NAME that an earlier section
    used; NAME is recorded in ``names_seen`` once the caller has read its table."""
    for name, table in top.get(section, dict, {}).items():
        reader = _Reader(source, (section, name), table, allowed)
        if name in names_seen:
            raise source.error((section, name), f"name already used in [{names_seen[name]}]")
        yield name, reader
        names_seen[name] = section


class _Reader:
    """Typed access to one table of the file, reporting errors at the key's line."""

    def __init__(self, source: TomlSource, path: KeyPath, table: Any, allowed: tuple[str, ...]) -> None:
        self.source, self.path = source, path
        if not isinstance(table, dict):
            raise source.error(path, f"must be a table, got {type(table).__name__}")
        self.table = table
        for key in table:
            if key not in allowed:
                raise source.error((*path, key), f"unknown key; expected one of {', '.join(allowed)}")

    def error(self, key: str, message: str) -> ExperimentError:
        return self.source.error((*self.path, key), message)

    def get(self, key: str, types: Any, default: Any = None, required: bool = False) -> Any:
        if key not in self.table:
            if required:
                raise self.source.error(self.path, f"missing required key '{key}'")
            return default
        value = self.table[key]
        bad_bool = isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,))
        if not isinstance(value, types) or bad_bool:
            want = " or ".join(t.__name__ for t in (types if isinstance(types, tuple) else (types,)))
            raise self.error(key, f"must be {want}, got {type(value).__name__} {value!r}")
        return value

    def choice(self, key: str, choices: tuple[str, ...], default: Optional[str] = None) -> str:
        value = self.get(key, str, default, required=default is None)
        if value not in choices:
            raise self.error(key, f"'{value}' is not one of {', '.join(choices)}")
        return value

    def positive(self, key: str, default: Optional[int] = None, allow_zero: bool = False) -> Any:
        value = self.get(key, int, default)
        if value is not None and (value < 0 or (value == 0 and not allow_zero)):
            raise self.error(key, f"must be {'>= 0' if allow_zero else '> 0'}, got {value}")
        return value

    def strings(self, key: str, default: Any = None) -> Any:
        value = self.get(key, list, default)
        if value is None:
            return None
        if not all(isinstance(v, str) for v in value):
            raise self.error(key, "must be a list of strings")
        return tuple(value)

    def file(self, key: str, base: str, required: bool = True, directory: bool = False) -> Optional[str]:
        value = self.get(key, str, None, required=required)
        return None if value is None else self.path_value(key, value, base, directory)

    def path_value(self, key: str, value: str, base: str, directory: bool = False, where: Any = None) -> str:
        if is_name(value):  # irds:... or hf:...: the exported files (clirkit.sources)
            return self.named(value, key, directory, where)
        if (
            key == "model"
            and directory
            and not os.path.exists(os.path.join(base, value))
            and is_model_id(value)
        ):
            return self.named(value, key, directory, where)
        resolved = os.path.normpath(os.path.join(base, value))
        ok = os.path.isdir(resolved) if directory else os.path.isfile(resolved)
        if not ok:
            what = "directory" if directory else "file"
            raise self.source.error(
                (*self.path, *(where or (key,))), f"{what} not found: {value} (resolved to {resolved})"
            )
        return resolved

    def named(self, value: str, key: str, directory: bool, where: Any) -> str:
        from clirkit.sources import resolve_collection, resolve_part
        from clirkit.sources.models import resolve_model

        part = {"queries": "queries", "qrels": "qrels", "mono_qrels": "qrels"}.get(key, "corpus")
        try:
            if not is_name(value):
                return resolve_model(value)
            return resolve_collection(value) if directory else resolve_part(value, part)
        except (InvalidInputError, ImportError) as err:
            raise self.source.error((*self.path, *(where or (key,))), str(err)) from None

    def file_map(self, key: str, base: str) -> dict[str, str]:
        table = self.get(key, dict, {})
        out = {}
        for lang, value in table.items():
            if not isinstance(value, str):
                raise self.source.error((*self.path, key, lang), "must be a file path")
            out[lang] = self.path_value(key, value, base, where=(key, lang))
        return out


def _collection(source: TomlSource, name: str, table: Any, base: str) -> Collection:
    path: KeyPath = ("collections", name)
    fmt = table.get("format") if isinstance(table, dict) else None
    common = ("format", "group", "measures", "drop_self_hits", "lang", "lang_field", "query_language")
    beir_keys = ("path", "corpus", "queries", "qrels", "mono_qrels")
    neuclir_keys = ("docs", "translations", "topics", "topic_field", "qrels")
    allowed = common + (neuclir_keys if fmt == "neuclir" else beir_keys)
    r = _Reader(source, path, table, allowed)
    fmt = r.choice("format", COLLECTION_FORMATS, "beir")
    shared = dict(
        name=name,
        format=fmt,
        group=r.get("group", str, name if fmt == "beir" else "neuclir"),
        measures=r.strings("measures"),
        drop_self_hits=r.get("drop_self_hits", bool, False),
        lang=r.get("lang", str, "en"),
        query_language=r.get("query_language", str, "en"),
        lang_field=r.get("lang_field", str),
    )
    if fmt == "beir":
        root = r.file("path", base, required=True, directory=True)
        assert root is not None

        def inside(key: str, default: Optional[str]) -> Optional[str]:
            value = r.get(key, str, default)
            if value is None:
                return None
            return r.path_value(key, value, root)

        return Collection(
            **shared,
            corpus=inside("corpus", "corpus.jsonl"),
            queries=inside("queries", "queries.jsonl"),
            qrels=inside("qrels", "qrels/test.tsv"),
            mono_qrels=inside("mono_qrels", None),
        )
    qrels = r.file_map("qrels", base)
    docs = r.file_map("docs", base)
    if not docs:
        raise source.error(path, "a neuclir collection needs docs = { LANG = FILE, ... }")
    return Collection(
        **shared,
        docs=docs,
        translations=r.file_map("translations", base),
        topics=r.file("topics", base),
        topic_field=r.get("topic_field", str, "topic_title"),
        qrels_by_language=qrels,
    )


def _beir_group(source: TomlSource, name: str, table: Any, base: str) -> list[Collection]:
    """``format = "beir-group"``: every BEIR dataset under ``path`` (a directory with corpus.jsonl,
    queries.jsonl and qrels/test.tsv), or the ``datasets`` named; each becomes a collection named
    after its directory, in group ``name``. ``drop_self_hits`` may list the datasets it applies to."""
    key: KeyPath = ("collections", name)
    allowed = (
        "format",
        "path",
        "datasets",
        "measures",
        "drop_self_hits",
        "lang",
        "lang_field",
        "query_language",
    )
    r = _Reader(source, key, table, allowed)
    root = r.file("path", base, directory=True)
    assert root is not None
    found = sorted(
        d
        for d in os.listdir(root)
        if all(
            os.path.isfile(os.path.join(root, d, f))
            for f in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv")
        )
    )
    chosen = r.strings("datasets")
    for dataset in chosen or ():
        if dataset not in found:
            raise r.error(
                "datasets", f"'{dataset}' is not a BEIR dataset under {root} (found: {', '.join(found)})"
            )
    drop = r.get("drop_self_hits", (bool, list), False)
    if isinstance(drop, list) and not all(isinstance(d, str) and d in found for d in drop):
        raise r.error("drop_self_hits", "must be true, false or a list of the group's datasets")
    measures = r.strings("measures")
    out = []
    for dataset in chosen or found:
        path = os.path.join(root, dataset)
        out.append(
            Collection(
                name=dataset,
                format="beir",
                group=name,
                measures=measures,
                drop_self_hits=drop is True or (isinstance(drop, list) and dataset in drop),
                lang=r.get("lang", str, "en"),
                query_language=r.get("query_language", str, "en"),
                lang_field=r.get("lang_field", str),
                corpus=os.path.join(path, "corpus.jsonl"),
                queries=os.path.join(path, "queries.jsonl"),
                qrels=os.path.join(path, "qrels", "test.tsv"),
            )
        )
    if not out:
        raise r.error("path", f"no BEIR dataset (corpus.jsonl, queries.jsonl, qrels/test.tsv) under {root}")
    return out


def _tasks(source: TomlSource, raw: Any, collections: Mapping[str, Collection]) -> tuple[TaskSpec, ...]:
    if raw is None:
        if any(c.format == "neuclir" for c in collections.values()):
            raise source.error(("tasks",), "a neuclir collection needs [[tasks]] naming its settings")
        return tuple(TaskSpec(name, "all", (None,)) for name in collections)
    if not isinstance(raw, list):
        raise source.error(("tasks",), "must be an array of tables ([[tasks]])")
    tasks = []
    for i, table in enumerate(raw):
        r = _Reader(source, ("tasks", i), table, ("collection", "setting", "languages"))
        group_or_name = r.get("collection", str, required=True)
        members = [
            c.name for c in collections.values() if c.group == group_or_name and c.name != group_or_name
        ]
        if group_or_name not in collections and not members:
            raise r.error("collection", f"collection '{group_or_name}' is not defined in [collections]")
        for name in [group_or_name] if group_or_name in collections else members:
            tasks.append(_task(source, r, i, name, collections[name]))
    return tuple(tasks)


def _task(source: TomlSource, r: _Reader, i: int, name: str, coll: Collection) -> TaskSpec:
    settings = NEUCLIR_SETTINGS if coll.format == "neuclir" else BEIR_SETTINGS
    setting = r.choice("setting", settings, "all" if coll.format == "beir" else None)
    languages = r.strings("languages")
    beir_mlir_by_query_language = coll.format == "beir" and setting == "mlir" and languages
    if setting in ("all", "mlir", "mlir-dt") and not beir_mlir_by_query_language:
        if languages:
            raise r.error("languages", f"setting '{setting}' covers every language; leave languages out")
        languages = (None,)
    elif not languages:
        raise source.error(("tasks", i), f"setting '{setting}' needs languages = [...]")
    if coll.format == "neuclir":
        needed = {
            "mono": coll.docs,
            "clir-qt": coll.docs,
            "clir": coll.docs,
            "clir-dt": coll.translations,
        }.get(setting)
        for lang in languages:
            if needed is not None and lang not in needed:
                which = "translations" if setting == "clir-dt" else "docs"
                raise r.error("languages", f"language '{lang}' has no file in {which} of '{name}'")
            qrels_key = "mlir" if lang is None else lang
            if qrels_key not in coll.qrels_by_language:
                raise r.error("languages", f"'{name}' has no qrels.{qrels_key} file")
        if setting == "mlir-dt" and not coll.translations:
            raise r.error("setting", f"'{name}' has no translations for mlir-dt")
    if coll.format == "beir" and setting in ("mono", "clir") and coll.lang_field is None:
        raise r.error(
            "setting", f"setting '{setting}' picks documents by language: give '{name}' a lang_field"
        )
    return TaskSpec(name, setting, tuple(languages))


def _check_measures(source: TomlSource, key: KeyPath, measures: tuple[str, ...]) -> None:
    from clirkit.evaluation import measure_keys

    for i, m in enumerate(measures):
        try:
            measure_keys([m])
        except InvalidInputError as err:  # the evaluator's message names the measure and the known ones
            raise source.error((*key, i) if len(measures) > 1 else key, str(err)) from None


def _check_graph(source: TomlSource, config: dict[str, Any]) -> None:
    """Every referenced node exists and the fusion/rerank graph has no cycle."""
    edges: dict[str, list[tuple[str, KeyPath]]] = {}
    for name, spec in config["fusion"].items():
        edges[name] = [(n, ("fusion", name, "inputs")) for n in spec.inputs]
    for name, spec in config["rerank"].items():
        edges[name] = [(spec.input, ("rerank", name, "input"))]
    known = set(config["systems"]) | set(edges)
    for targets in edges.values():
        for target, key in targets:
            if target not in known:
                raise source.error(key, f"system '{target}' is referenced but not defined")
    state: dict[str, int] = {}

    def visit(name: str, trail: list[str]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            cycle = trail[trail.index(name) :] + [name]
            key = next(k for t, k in edges[trail[-1]] if t == name)
            raise source.error(key, f"cycle: {' -> '.join(cycle)}")
        state[name] = 1
        for target, _ in edges.get(name, []):
            visit(target, trail + [name])
        state[name] = 2

    for name in edges:
        visit(name, [])


def load_config(path: str | os.PathLike) -> ExperimentConfig:
    """Read and check an experiment file; raises :class:`ExperimentError` on any problem."""
    from clirkit.experiment.checks import check_config
    from clirkit.experiment.systems import system_kind

    source = load_toml(path)
    base = os.path.dirname(os.path.abspath(source.path))
    top = _Reader(
        source,
        (),
        source.data,
        ("experiment", "collections", "tasks", "systems", "fusion", "rerank", "evaluation", "posir"),
    )
    exp = _Reader(
        source, ("experiment",), top.get("experiment", dict, {}), ("name", "threads", "hits", "store")
    )
    name = exp.get("name", str, os.path.splitext(os.path.basename(source.path))[0])
    threads = exp.positive("threads", 0, allow_zero=True)
    hits = exp.positive("hits", 1000)
    store = exp.get("store", str)

    raw_collections = top.get("collections", dict, {})
    if not raw_collections:
        raise source.error(("collections",), "at least one collection is needed")
    collections: dict[str, Collection] = {}
    for cname, table in raw_collections.items():
        is_group = isinstance(table, dict) and table.get("format") == "beir-group"
        for coll in (
            _beir_group(source, cname, table, base) if is_group else [_collection(source, cname, table, base)]
        ):
            if coll.name in collections:
                raise source.error(("collections", cname), f"collection '{coll.name}' is defined twice")
            collections[coll.name] = coll
    tasks = _tasks(source, top.get("tasks", list), collections)

    names_seen: dict[str, str] = {}
    systems: dict[str, SystemSpec] = {}
    for sys_name, table in top.get("systems", dict, {}).items():
        key: KeyPath = ("systems", sys_name)
        if not isinstance(table, dict):
            raise source.error(key, "must be a table")
        kind_name = table.get("kind")
        if not isinstance(kind_name, str):
            raise source.error(key, "missing required key 'kind' (e.g. kind = \"bm25\")")
        try:
            kind = system_kind(kind_name)
        except KeyError as err:
            raise source.error((*key, "kind"), str(err.args[0])) from None
        allowed = ("kind", "settings", *kind.options)
        r = _Reader(source, key, table, allowed)
        options = kind.validate(r, base)
        settings = r.strings("settings")
        for setting in settings or ():
            if setting not in BEIR_SETTINGS + NEUCLIR_SETTINGS:
                raise r.error("settings", f"'{setting}' is not a task setting")
        systems[sys_name] = SystemSpec(sys_name, kind_name, options, settings)
        names_seen[sys_name] = "systems"
    if not systems:
        raise source.error(("systems",), "at least one system is needed")

    fusion: dict[str, FusionSpec] = {}
    fusion_keys = ("inputs", "method", "k", "weights", "depth", "norm", "alpha", "top")
    for fname, r in _named_tables(source, top, "fusion", fusion_keys, names_seen):
        inputs = r.strings("inputs")
        if not inputs or len(inputs) < 2:
            raise source.error(("fusion", fname), "needs inputs = [at least two system names]")
        weights = r.get("weights", list)
        if weights is not None:
            if len(weights) != len(inputs) or not all(isinstance(w, _NUMBER) for w in weights):
                raise r.error("weights", f"must be {len(inputs)} numbers, one per input")
            weights = tuple(float(w) for w in weights)
        alpha = r.get("alpha", _NUMBER)
        fusion[fname] = FusionSpec(
            fname,
            inputs,
            r.choice("method", FUSION_METHODS, "rrf"),
            float(r.get("k", _NUMBER, 60.0)),
            weights,
            r.positive("depth"),
            r.choice("norm", ("minmax", "zscore", "none"), "minmax"),
            None if alpha is None else float(alpha),
            r.positive("top"),
        )

    rerank: dict[str, RerankSpec] = {}
    rerank_keys = (
        "input",
        "backend",
        "model",
        "base_url",
        "depth",
        "window",
        "stride",
        "max_words",
        "fields",
        "max_length",
    )
    for rname, r in _named_tables(source, top, "rerank", rerank_keys, names_seen):
        backend = r.choice("backend", RERANK_BACKENDS, "pointwise")
        options: dict[str, Any] = {"fields": list(r.strings("fields", ("title", "text")))}
        if backend == "pointwise":
            options["model"] = r.file("model", base, directory=True)
            options["max_length"] = r.positive("max_length")
        else:
            options["model"] = r.get("model", str, required=True)
            options["base_url"] = r.get("base_url", str, required=True)
            options["max_words"] = r.positive("max_words", 300)
        rerank[rname] = RerankSpec(
            rname,
            r.get("input", str, required=True),
            backend,
            options,
            r.positive("depth", 100),
            r.positive("window", 20),
            r.positive("stride", 10),
        )

    ev = _Reader(
        source,
        ("evaluation",),
        top.get("evaluation", dict, {}),
        ("measures", "baseline", "test", "correction", "alpha", "averages", "correlations"),
    )
    measures = ev.strings("measures", ("nDCG@10",))
    _check_measures(source, ("evaluation", "measures"), measures)
    for cname, coll in collections.items():
        if coll.measures:
            _check_measures(source, ("collections", cname, "measures"), coll.measures)
    baseline = ev.get("baseline", str)
    graph = {"systems": systems, "fusion": fusion, "rerank": rerank}
    if baseline is not None and baseline not in names_seen:
        raise ev.error("baseline", f"system '{baseline}' is referenced but not defined")
    averages = ev.strings("averages", ("macro",))
    for a in averages:
        if a not in AVERAGES:
            raise ev.error("averages", f"'{a}' is not one of {', '.join(AVERAGES)}")
    correlations = ev.get("correlations", list, [])
    pairs = []
    for i, pair in enumerate(correlations):
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
            raise source.error(("evaluation", "correlations", i), "must be a pair of task labels")
        pairs.append((pair[0], pair[1]))
    alpha = ev.get("alpha", _NUMBER, 0.05)
    evaluation = EvaluationSpec(
        measures,
        baseline,
        ev.choice("test", ("t", "perm"), "t"),
        ev.choice("correction", ("holm", "bonferroni", "none"), "holm"),
        float(alpha),
        averages,
        tuple(pairs),
    )
    _check_graph(source, graph)

    posir = None
    if "posir" in source.data:
        p = _Reader(
            source,
            ("posir",),
            source.data["posir"],
            ("spans", "corpus", "tokenizer", "measure", "bins", "edges", "min_queries", "plot"),
        )
        measure = p.get("measure", str, "nDCG@10")
        _check_measures(source, ("posir", "measure"), (measure,))
        edges = p.get("edges", list, [0, 512, 1024, 1536, 2048])
        if not all(isinstance(e, int) and not isinstance(e, bool) for e in edges):
            raise p.error("edges", "must be a list of integers")
        tokenizer = p.get("tokenizer", str)
        posir = PosirSpec(
            p.file("spans", base),  # type: ignore[arg-type]
            p.file("corpus", base),  # type: ignore[arg-type]
            None if tokenizer is None else p.path_value("tokenizer", tokenizer, base),
            measure,
            p.positive("bins", 20),
            tuple(edges),
            p.positive("min_queries", 1),
            p.get("plot", bool, True),
        )
    config = ExperimentConfig(
        source.path,
        name,
        threads,
        hits,
        None if store is None else os.path.normpath(os.path.join(base, store)),
        collections,
        tasks,
        systems,
        fusion,
        rerank,
        evaluation,
        posir,
        source,
    )
    check_config(config)  # names and numbers across sections, before anything runs
    return config
