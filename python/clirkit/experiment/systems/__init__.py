"""Retriever kinds an experiment's ``[systems.NAME]`` can use, by their ``kind`` key.

A kind declares its option keys, checks them (``validate(reader, base_dir) -> options``) and adds
the stages that produce its run for a task (``plan_search(plan, spec, task) -> Stage``: index stages
shared across tasks and systems through their digests, then a search stage whose output directory
holds ``run.trec``). New retrievers register with :func:`register_system_kind`."""

from __future__ import annotations

import importlib
from typing import Any, Protocol

#: Modules defining the built-in kinds, imported on first lookup.
BUILTIN_KINDS = (
    "clirkit.experiment.systems.bm25",
    "clirkit.experiment.systems.dense",
    "clirkit.experiment.systems.multivector",
    "clirkit.experiment.systems.impact",
    "clirkit.experiment.systems.run",
)

_KINDS: dict[str, SystemKind] = {}


class SystemKind(Protocol):
    name: str
    options: tuple[str, ...]

    def validate(self, reader: Any, base: str) -> dict[str, Any]: ...

    def plan_search(self, plan: Any, spec: Any, task: Any) -> Any: ...


def register_system_kind(kind: SystemKind) -> SystemKind:
    """Make ``kind`` available as ``kind = "<kind.name>"`` in experiment files."""
    _KINDS[kind.name] = kind
    return kind


def _load_builtins() -> None:
    for module in BUILTIN_KINDS:
        importlib.import_module(module)


def system_kind(name: str) -> SystemKind:
    """The kind called ``name``; KeyError with the known kinds otherwise."""
    _load_builtins()
    if name not in _KINDS:
        raise KeyError(f"unknown system kind '{name}'; known kinds: {', '.join(sorted(_KINDS))}")
    return _KINDS[name]


def system_kinds() -> list[str]:
    _load_builtins()
    return sorted(_KINDS)


def system_error(plan: Any, system: str, key: tuple, message: str) -> Exception:
    """An error at ``[systems.SYSTEM]``'s ``key`` (a key path), found while planning."""
    config = plan.config
    where = ("systems", system, *key)
    if config.source is not None:
        return config.source.error(where, message)
    from clirkit.experiment.toml_source import ExperimentError

    return ExperimentError(f"{config.path}: {'.'.join(where)}: {message}")
