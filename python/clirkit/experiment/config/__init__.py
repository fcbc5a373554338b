"""The experiment model, read from a TOML file and checked before anything runs.

Sections, one parser each: ``[experiment]`` (name, threads, hits per query; read here),
``[collections.NAME]`` (BEIR directories or NeuCLIR-style files; :mod:`.collection`), ``[[tasks]]``
(which settings and languages to run on which collection; :mod:`.task`), ``[systems.NAME]``
(first-stage retrievers, one ``kind`` each from :mod:`clirkit.experiment.systems`), ``[fusion.NAME]``
and ``[rerank.NAME]`` (:mod:`.nodes`), ``[evaluation]`` and the optional ``[posir]`` report
(:mod:`.evaluation`). The model itself is :mod:`.model`; :mod:`.reader` gives typed access to a table.
Every problem (unknown key, wrong type, missing file, undefined or cyclic reference, unknown measure)
is an :class:`ExperimentError` naming the file, the line and the key."""

from __future__ import annotations

import os

from clirkit.experiment.config.collection import read_collections
from clirkit.experiment.config.evaluation import read_evaluation, read_posir
from clirkit.experiment.config.model import (
    AVERAGES,
    BEIR_SETTINGS,
    COLLECTION_FORMATS,
    FUSION_METHODS,
    NEUCLIR_SETTINGS,
    RERANK_BACKENDS,
    AverageSpec,
    Collection,
    EvaluationSpec,
    ExperimentConfig,
    ExternalSpec,
    FusionSpec,
    PosirSpec,
    RerankSpec,
    SubsampleSpec,
    SystemSpec,
    TaskSpec,
)
from clirkit.experiment.config.nodes import check_graph, read_fusion, read_rerank, read_systems
from clirkit.experiment.config.reader import TableReader
from clirkit.experiment.config.task import read_tasks
from clirkit.experiment.toml_source import load_toml

__all__ = [
    "AVERAGES",
    "BEIR_SETTINGS",
    "COLLECTION_FORMATS",
    "FUSION_METHODS",
    "NEUCLIR_SETTINGS",
    "RERANK_BACKENDS",
    "AverageSpec",
    "Collection",
    "EvaluationSpec",
    "ExperimentConfig",
    "ExternalSpec",
    "FusionSpec",
    "PosirSpec",
    "RerankSpec",
    "SubsampleSpec",
    "SystemSpec",
    "TaskSpec",
    "load_config",
]

#: The sections of an experiment file, and the keys of ``[experiment]``.
TOP_KEYS = ("experiment", "collections", "tasks", "systems", "fusion", "rerank", "evaluation", "posir")
EXPERIMENT_KEYS = ("name", "threads", "hits", "store")


def load_config(path: str | os.PathLike) -> ExperimentConfig:
    """Read and check an experiment file; raises :class:`ExperimentError` on any problem."""
    from clirkit.experiment.checks import check_config

    source = load_toml(path)
    base = os.path.dirname(os.path.abspath(source.path))
    top = TableReader(source, (), source.data, TOP_KEYS)
    exp = TableReader(source, ("experiment",), top.get("experiment", dict, {}), EXPERIMENT_KEYS)
    name = exp.get("name", str, os.path.splitext(os.path.basename(source.path))[0])
    threads = exp.positive("threads", 0, allow_zero=True)
    hits = exp.positive("hits", 1000)
    store = exp.get("store", str)

    collections = read_collections(source, top, base)
    tasks = read_tasks(source, top.get("tasks", list), collections)
    names_seen: dict[str, str] = {}  # node name -> the section that defined it
    systems = read_systems(source, top, base, names_seen)
    fusion = read_fusion(source, top, names_seen)
    rerank = read_rerank(source, top, base, names_seen)
    evaluation = read_evaluation(source, top, collections, names_seen, base)
    check_graph(source, {"systems": systems, "fusion": fusion, "rerank": rerank})
    posir = read_posir(source, base)
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
