"""``[[tasks]]``: which setting and languages run on which collection (or group of collections)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clirkit.experiment.config.model import BEIR_SETTINGS, NEUCLIR_SETTINGS, Collection, TaskSpec
from clirkit.experiment.config.reader import TableReader
from clirkit.experiment.toml_source import TomlSource

#: The keys of a ``[[tasks]]`` entry.
TASK_KEYS = ("collection", "setting", "languages")


def read_tasks(source: TomlSource, raw: Any, collections: Mapping[str, Collection]) -> tuple[TaskSpec, ...]:
    if raw is None:
        if any(c.format == "neuclir" for c in collections.values()):
            raise source.error(("tasks",), "a neuclir collection needs [[tasks]] naming its settings")
        return tuple(TaskSpec(name, "all", (None,)) for name in collections)
    if not isinstance(raw, list):
        raise source.error(("tasks",), "must be an array of tables ([[tasks]])")
    tasks = []
    for i, table in enumerate(raw):
        r = TableReader(source, ("tasks", i), table, TASK_KEYS)
        group_or_name = r.get("collection", str, required=True)
        members = [
            c.name for c in collections.values() if c.group == group_or_name and c.name != group_or_name
        ]
        if group_or_name not in collections and not members:
            raise r.error("collection", f"collection '{group_or_name}' is not defined in [collections]")
        for name in [group_or_name] if group_or_name in collections else members:
            tasks.append(_task(source, r, i, name, collections[name]))
    return tuple(tasks)


def _task(source: TomlSource, r: TableReader, i: int, name: str, coll: Collection) -> TaskSpec:
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
