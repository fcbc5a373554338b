"""``[systems.NAME]``, ``[fusion.NAME]`` and ``[rerank.NAME]``: the nodes producing runs, and the
check that every reference between them exists and that they form no cycle."""

from __future__ import annotations

from typing import Any

from clirkit.experiment.config.model import (
    BEIR_SETTINGS,
    FUSION_METHODS,
    NEUCLIR_SETTINGS,
    NORMALIZATIONS,
    RERANK_BACKENDS,
    FusionSpec,
    RerankSpec,
    SystemSpec,
)
from clirkit.experiment.config.reader import NUMBER, TableReader, named_tables
from clirkit.experiment.toml_source import KeyPath, TomlSource


def read_systems(
    source: TomlSource, top: TableReader, base: str, names_seen: dict[str, str]
) -> dict[str, SystemSpec]:
    """Each ``[systems.NAME]``, its options checked by its kind (:mod:`clirkit.experiment.systems`)."""
    from clirkit.experiment.systems import system_kind

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
        r = TableReader(source, key, table, allowed)
        options = kind.validate(r, base)
        settings = r.strings("settings")
        for setting in settings or ():
            if setting not in BEIR_SETTINGS + NEUCLIR_SETTINGS:
                raise r.error("settings", f"'{setting}' is not a task setting")
        systems[sys_name] = SystemSpec(sys_name, kind_name, options, settings)
        names_seen[sys_name] = "systems"
    if not systems:
        raise source.error(("systems",), "at least one system is needed")
    return systems


def read_fusion(source: TomlSource, top: TableReader, names_seen: dict[str, str]) -> dict[str, FusionSpec]:
    """Each ``[fusion.NAME]``: at least two inputs, a method and its parameters."""
    fusion: dict[str, FusionSpec] = {}
    fusion_keys = ("inputs", "method", "k", "weights", "depth", "norm", "alpha", "top")
    for fname, r in named_tables(source, top, "fusion", fusion_keys, names_seen):
        inputs = r.strings("inputs")
        if not inputs or len(inputs) < 2:
            raise source.error(("fusion", fname), "needs inputs = [at least two system names]")
        weights = r.get("weights", list)
        if weights is not None:
            if len(weights) != len(inputs) or not all(isinstance(w, NUMBER) for w in weights):
                raise r.error("weights", f"must be {len(inputs)} numbers, one per input")
            weights = tuple(float(w) for w in weights)
        alpha = r.get("alpha", NUMBER)
        fusion[fname] = FusionSpec(
            fname,
            inputs,
            r.choice("method", FUSION_METHODS, "rrf"),
            float(r.get("k", NUMBER, 60.0)),
            weights,
            r.positive("depth"),
            r.choice("norm", NORMALIZATIONS, "minmax"),
            None if alpha is None else float(alpha),
            r.positive("top"),
        )
    return fusion


def read_rerank(
    source: TomlSource, top: TableReader, base: str, names_seen: dict[str, str]
) -> dict[str, RerankSpec]:
    """Each ``[rerank.NAME]``: its input node, a backend and that backend's options."""
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
    for rname, r in named_tables(source, top, "rerank", rerank_keys, names_seen):
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
    return rerank


def check_graph(source: TomlSource, config: dict[str, Any]) -> None:
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
