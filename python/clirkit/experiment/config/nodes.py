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
from clirkit.rerank.templates import TEMPLATES


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
    for fname, r in named_tables(source, top, "fusion", FUSION_KEYS, names_seen):
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


#: The keys of ``[fusion.NAME]``.
FUSION_KEYS = ("inputs", "method", "k", "weights", "depth", "norm", "alpha", "top")
#: ``[rerank.NAME]`` keys every backend takes.
RERANK_COMMON_KEYS = ("input", "backend", "depth", "fields")
#: How a server is asked: these change no answer, so they are left out of the stage's key (changing
#: them keeps the answers cached in the stage's partial directory).
RERANK_TRANSPORT_KEYS = ("concurrency", "timeout", "retries", "max_response_mb")
_SERVER_KEYS = ("model", "base_url", "extra_body", "passage_tokens", "query_tokens", "tokenizer")
#: The keys of each backend beyond :data:`RERANK_COMMON_KEYS` (``clirkit rerank``'s options).
RERANK_BACKEND_KEYS: dict[str, tuple[str, ...]] = {
    "openai": (
        *_SERVER_KEYS,
        "template",
        "temperature",
        "max_tokens",
        "max_words",
        "window",
        "stride",
        *RERANK_TRANSPORT_KEYS,
    ),
    "query-likelihood": (*_SERVER_KEYS, *RERANK_TRANSPORT_KEYS),
    "yes-no": (*_SERVER_KEYS, "instruction", *RERANK_TRANSPORT_KEYS),
    "cross-encoder": ("model", "max_length", "batch_size"),
    "pointwise": ("model", "max_length", "batch_size"),
}


def read_rerank(
    source: TomlSource, top: TableReader, base: str, names_seen: dict[str, str]
) -> dict[str, RerankSpec]:
    """Each ``[rerank.NAME]``: its input node, a backend (:data:`RERANK_BACKENDS`, default
    ``pointwise``) and that backend's options, with ``clirkit rerank``'s defaults
    (:class:`~clirkit.rerank.settings.RerankerSettings`). ``model`` is the server's model name for the
    server backends and an ONNX model directory for ``cross-encoder`` and ``pointwise``."""
    from clirkit.rerank.settings import LISTWISE_BACKENDS, ONNX_BACKENDS, RerankerSettings

    defaults = RerankerSettings()
    every_key = tuple(dict.fromkeys(k for keys in RERANK_BACKEND_KEYS.values() for k in keys))
    rerank: dict[str, RerankSpec] = {}
    for rname, r in named_tables(source, top, "rerank", (*RERANK_COMMON_KEYS, *every_key), names_seen):
        backend = r.choice("backend", RERANK_BACKENDS, "pointwise")
        allowed = RERANK_BACKEND_KEYS[backend]
        for key in r.table:
            if key not in RERANK_COMMON_KEYS and key not in allowed:
                takers = [b for b, keys in RERANK_BACKEND_KEYS.items() if key in keys]
                raise r.error(key, f"does not apply to backend '{backend}' (only to {', '.join(takers)})")
        options: dict[str, Any] = {"fields": list(r.strings("fields", ("title", "text")))}
        if backend in ONNX_BACKENDS:
            options["model"] = r.file("model", base, directory=True)
            options["max_length"] = r.positive("max_length")
            options["batch_size"] = r.positive("batch_size", defaults.batch_size)
        else:
            options["model"] = r.get("model", str, required=True)
            options["base_url"] = r.get("base_url", str, required=True)
            options["extra_body"] = json_table(r, "extra_body")
            options["passage_tokens"] = r.positive("passage_tokens")
            options["query_tokens"] = r.positive("query_tokens")
            options["tokenizer"] = r.file("tokenizer", base, required=False)
            if options["tokenizer"] is not None and not (
                options["passage_tokens"] or options["query_tokens"]
            ):
                raise r.error("tokenizer", "is used only with passage_tokens or query_tokens")
            options["concurrency"] = r.positive("concurrency", defaults.concurrency)
            options["retries"] = r.positive("retries", defaults.retries, allow_zero=True)
            options["timeout"] = finite_positive(r, "timeout", defaults.timeout)
            options["max_response_mb"] = finite_positive(r, "max_response_mb", defaults.max_response_mb)
        if backend == "openai":
            options["template"] = r.choice("template", tuple(sorted(TEMPLATES)), defaults.template)
            temperature = float(r.get("temperature", NUMBER, defaults.temperature))
            if not 0.0 <= temperature < float("inf"):
                raise r.error("temperature", f"must be a finite number >= 0, got {temperature}")
            options["temperature"] = temperature
            options["max_tokens"] = r.positive("max_tokens")
            options["max_words"] = r.positive("max_words", defaults.max_words)
        if backend == "yes-no":
            options["instruction"] = r.get("instruction", str)
        listwise = backend in LISTWISE_BACKENDS
        rerank[rname] = RerankSpec(
            rname,
            r.get("input", str, required=True),
            backend,
            options,
            r.positive("depth", 100),
            r.positive("window", 20) if listwise else 20,
            r.positive("stride", 10) if listwise else 10,
        )
    return rerank


def json_table(r: TableReader, key: str) -> dict[str, Any]:
    """A table sent as JSON (``extra_body``): strings, numbers, booleans, arrays and tables only."""
    import json

    value = r.get(key, dict, {})

    def plain(v: Any) -> bool:
        if isinstance(v, dict):
            return all(plain(x) for x in v.values())
        if isinstance(v, list):
            return all(plain(x) for x in v)
        return isinstance(v, (str, int, float, bool))

    if not plain(value):
        raise r.error(
            key, "must hold only strings, numbers, booleans, arrays and tables (it is sent as JSON)"
        )
    try:
        json.dumps(value, allow_nan=False)
    except ValueError as err:
        raise r.error(key, f"cannot be sent as JSON: {err}") from None
    return value


def finite_positive(r: TableReader, key: str, default: float) -> float:
    value = float(r.get(key, NUMBER, default))
    if not 0.0 < value < float("inf"):
        raise r.error(key, f"must be a finite number > 0, got {value}")
    return value


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
