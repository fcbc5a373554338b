"""The experiment model: what a checked experiment file describes (collections, tasks, systems,
fusion and rerank nodes, evaluation, the PosIR report), and the choices each key accepts."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from clirkit import _native
from clirkit.experiment.toml_source import TomlSource
from clirkit.rerank.settings import BACKENDS

COLLECTION_FORMATS = ("beir", "beir-group", "neuclir")
#: Settings of a task: which documents are searched with which queries (see :mod:`.data`).
BEIR_SETTINGS = ("all", "mono", "clir", "mlir")
NEUCLIR_SETTINGS = ("mono", "clir-qt", "clir-dt", "clir", "mlir-dt", "mlir")
#: Fusion methods, score normalizations and p-value corrections: the core's lists, as bound.
FUSION_METHODS = _native.FUSION_METHODS
NORMALIZATIONS = _native.NORMALIZATIONS
CORRECTIONS = _native.CORRECTIONS
AVERAGES = ("macro", "query-weighted")
#: NeuCLIR topic entries written by people (the English original and human translations).
HUMAN_SOURCES = ("original", "human translation")
LENGTH_UNITS = ("tokens", "chars")
#: ``clirkit rerank``'s backends (:mod:`clirkit.rerank.settings`).
RERANK_BACKENDS = BACKENDS


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
    #: the topic fields a query is composed of, joined by a space (NeuCLIRBench: title + description)
    topic_fields: tuple[str, ...] = ("topic_title",)
    #: sources of human topics (mono and English-topic settings) and the MT source of clir-qt
    human_sources: tuple[str, ...] = HUMAN_SOURCES
    mt_source: Optional[str] = None
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
class AverageSpec:
    """``[evaluation.average.NAME]``: over ``columns``, macro or query-weighted; or over ``groups``,
    query-weighted within each group, then the macro average of the groups."""

    name: str
    columns: tuple[str, ...]
    weighting: str
    groups: Optional[Mapping[str, tuple[str, ...]]]


@dataclass(frozen=True)
class ExternalSpec:
    """``[evaluation.external.NAME]``: scores per system from a CSV or JSON file."""

    name: str
    file: str
    column: Optional[str]


@dataclass(frozen=True)
class SubsampleSpec:
    """``subsample``: ``samples`` seeded random samples of ``queries`` queries per correlation."""

    samples: int
    queries: int
    seed: int = 0


@dataclass(frozen=True)
class EvaluationSpec:
    measures: tuple[str, ...]
    baseline: Optional[str]
    test: str
    correction: str
    alpha: float
    averages: tuple[str, ...]
    correlations: tuple[tuple[str, str], ...]
    named_averages: tuple[AverageSpec, ...] = ()
    external: Mapping[str, ExternalSpec] = field(default_factory=dict)
    subsample: Optional[SubsampleSpec] = None


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
    length_unit: str = "tokens"


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
