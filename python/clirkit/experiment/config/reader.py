"""Typed access to the tables of an experiment file: every wrong type, unknown key, missing file or
unknown measure is an :class:`ExperimentError` naming the file, the line and the key."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, Optional

from clirkit._native import InvalidInputError
from clirkit.experiment.toml_source import ExperimentError, KeyPath, TomlSource
from clirkit.sources import is_name
from clirkit.sources.models import is_model_id

#: The types a TOML number may have.
NUMBER = (int, float)


class TableReader:
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


def named_tables(
    source: TomlSource, top: TableReader, section: str, allowed: tuple[str, ...], names_seen: dict[str, str]
) -> Iterator[tuple[str, TableReader]]:
    """Each ``[section.NAME]`` table as (NAME, its reader), refusing a NAME that an earlier section
    used; NAME is recorded in ``names_seen`` once the caller has read its table."""
    for name, table in top.get(section, dict, {}).items():
        reader = TableReader(source, (section, name), table, allowed)
        if name in names_seen:
            raise source.error((section, name), f"name already used in [{names_seen[name]}]")
        yield name, reader
        names_seen[name] = section


def check_measures(source: TomlSource, key: KeyPath, measures: tuple[str, ...]) -> None:
    from clirkit.evaluation import measure_keys

    for i, m in enumerate(measures):
        try:
            measure_keys([m])
        except InvalidInputError as err:  # the evaluator's message names the measure and the known ones
            raise source.error((*key, i) if len(measures) > 1 else key, str(err)) from None
