"""Experiments: one TOML file describes collections, tasks, systems, fusion, reranking and
evaluation; :class:`Experiment` plans the stages, runs what is not in the artifact store yet and
writes the tables (``clirkit experiment run|plan|table`` on the command line)."""

from clirkit.experiment.config import ExperimentConfig, load_config
from clirkit.experiment.correlation import kendall_tau, spearman
from clirkit.experiment.results import Results
from clirkit.experiment.runner import Experiment, load_results
from clirkit.experiment.systems import register_system_kind, system_kinds
from clirkit.experiment.toml_source import ExperimentError

__all__ = [
    "Experiment",
    "ExperimentConfig",
    "ExperimentError",
    "Results",
    "kendall_tau",
    "load_config",
    "load_results",
    "register_system_kind",
    "spearman",
    "system_kinds",
]
