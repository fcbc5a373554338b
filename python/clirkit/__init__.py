"""clirkit: Rust-accelerated retrieval and evaluation for monolingual, cross-language (CLIR) and
multilingual (MLIR) experiments.

The heavy lifting happens in the Rust core (``clirkit._native``); this package is the typed face
users see. Every stage speaks the same currencies: runs (per query, doc ids with scores in
canonical order: score descending, then doc id descending) and qrels.
"""

from typing import TYPE_CHECKING

from clirkit._native import (
    ClirkitError,
    DuplicateIdError,
    IndexFormatError,
    InternalError,
    InvalidInputError,
    ParseError,
    UnknownLanguageError,
    __version__,
)
from clirkit.analysis import analyze, analyzer_id, supported_languages
from clirkit.bm25 import BM25Index, SearchResults
from clirkit.evaluation import RelevanceEvaluator, evaluate
from clirkit.fusion import NativeRun, fuse
from clirkit.impact import ImpactIndex
from clirkit.runs import read_qrels, read_run, write_run

if TYPE_CHECKING:
    from clirkit.dense import DenseIndex, DenseRetriever
    from clirkit.experiment import Experiment
    from clirkit.multivector import MultiVectorIndex

__all__ = [
    "__version__",
    # errors
    "ClirkitError",
    "DuplicateIdError",
    "IndexFormatError",
    "InternalError",
    "InvalidInputError",
    "ParseError",
    "UnknownLanguageError",
    # analysis and retrieval
    "analyze",
    "analyzer_id",
    "supported_languages",
    "BM25Index",
    "SearchResults",
    "ImpactIndex",
    "DenseIndex",
    "DenseRetriever",
    "MultiVectorIndex",
    # runs, fusion, evaluation
    "read_qrels",
    "read_run",
    "write_run",
    "NativeRun",
    "fuse",
    "RelevanceEvaluator",
    "evaluate",
    # experiments
    "Experiment",
]


def __getattr__(name: str):
    # The dense API needs numpy; importing it lazily keeps `import clirkit` and the CLI light.
    if name in ("DenseIndex", "DenseRetriever"):
        from clirkit import dense

        return getattr(dense, name)
    if name == "MultiVectorIndex":
        from clirkit import multivector

        return multivector.MultiVectorIndex
    if name == "Experiment":
        from clirkit.experiment import Experiment

        return Experiment
    raise AttributeError(f"module 'clirkit' has no attribute {name!r}")
