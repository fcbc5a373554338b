"""Type stubs for the Rust extension module ``clirkit._native``."""

from typing import Dict, List, Optional, Tuple

__version__: str

class ClirkitError(Exception): ...
class ParseError(ClirkitError): ...
class DuplicateIdError(ClirkitError): ...
class IndexFormatError(ClirkitError): ...
class UnknownLanguageError(ClirkitError): ...
class InvalidInputError(ClirkitError): ...

# --- runs and qrels -------------------------------------------------------------------------
def read_run(path: str) -> List[Tuple[str, List[Tuple[str, float]]]]: ...
def write_run(path: str, run: Dict[str, Dict[str, float]], tag: str = "clirkit") -> None: ...
def read_qrels(path: str) -> List[Tuple[str, List[Tuple[str, int]]]]: ...

# --- passages (MaxP) --------------------------------------------------------------------------
from typing import Optional  # noqa: E402

def maxp(
    run: Dict[str, Dict[str, float]], separator: str = "#", depth: Optional[int] = None
) -> List[Tuple[str, List[Tuple[str, float]]]]: ...
def passage_doc_id(passage_id: str, separator: str = "#") -> str: ...
# --- dense vector search (crates/clirkit-py/src/pq.rs) ---

import os

import numpy as _np
import numpy.typing as _npt

def fastscan_kernels() -> list[str]: ...

class DenseIndex:
    @staticmethod
    def build(
        embeddings: _npt.NDArray[_np.float32],
        ids: list[str],
        pq: int | None = None,
        nbits: int = 4,
        ivf: int | None = None,
        metric: str = "ip",
        train_size: int | None = None,
        seed: int = 0,
        threads: int = 0,
        keep_vectors: bool = True,
        quiet: bool = False,
    ) -> DenseIndex: ...
    @staticmethod
    def open(dir: os.PathLike[str] | str) -> DenseIndex: ...
    def save(self, dir: os.PathLike[str] | str) -> None: ...
    def search(
        self, queries: _npt.NDArray[_np.float32], k: int = 1000, nprobe: int = 1, refine: int = 0, threads: int = 0
    ) -> tuple[_npt.NDArray[_np.float32], _npt.NDArray[_np.int64]]: ...
    def search_run(
        self,
        queries: _npt.NDArray[_np.float32],
        qids: list[str],
        k: int = 1000,
        nprobe: int = 1,
        refine: int = 0,
        threads: int = 0,
    ) -> list[tuple[str, list[tuple[str, float]]]]: ...
    def search_trec(
        self,
        queries: _npt.NDArray[_np.float32],
        qids: list[str],
        path: os.PathLike[str] | str,
        k: int = 1000,
        tag: str = "clirkit-dense",
        nprobe: int = 1,
        refine: int = 0,
        threads: int = 0,
    ) -> None: ...
    def id(self, i: int) -> str: ...
    def find(self, id: str) -> int | None: ...
    @property
    def dim(self) -> int: ...
    @property
    def ntotal(self) -> int: ...
    @property
    def metric(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def has_vectors(self) -> bool: ...
# --- BM25 (clirkit.bm25 wraps these) --------------------------------------------------------
class SearchResults:
    def __len__(self) -> int: ...
    def __contains__(self, qid: str) -> bool: ...
    def __getitem__(self, qid: str) -> List[Tuple[str, float]]: ...
    def qids(self) -> List[str]: ...
    def to_trec(self, path: str, tag: str = "clirkit-bm25") -> None: ...
    def to_dict(self) -> Dict[str, Dict[str, float]]: ...

class Bm25Index:
    @staticmethod
    def build(
        corpus: str,
        index: str,
        *,
        lang: Optional[str] = None,
        lang_field: Optional[str] = None,
        fields: Optional[List[str]] = None,
        threads: int = 0,
        keep_first_duplicate: bool = False,
        quiet: bool = False,
        memory_budget_mb: int = 1024,
    ) -> Bm25Index: ...
    @staticmethod
    def open(index: str) -> Bm25Index: ...
    @property
    def num_docs(self) -> int: ...
    @property
    def num_terms(self) -> int: ...
    @property
    def languages(self) -> List[str]: ...
    @property
    def avgdl(self) -> float: ...
    @property
    def manifest_json(self) -> str: ...
    def verify(self) -> None: ...
    def search(
        self,
        query: str,
        k: int = 10,
        lang: Optional[str] = None,
        k1: float = 0.9,
        b: float = 0.4,
        exhaustive: bool = False,
    ) -> List[Tuple[str, float]]: ...
    def batch_search(
        self,
        queries: List[Tuple[str, str, Optional[str]]],
        k: int = 1000,
        threads: int = 0,
        lang: Optional[str] = None,
        k1: float = 0.9,
        b: float = 0.4,
        quiet: bool = False,
    ) -> SearchResults: ...
    def search_file(
        self,
        path: str,
        k: int = 1000,
        threads: int = 0,
        lang: Optional[str] = None,
        k1: float = 0.9,
        b: float = 0.4,
        quiet: bool = False,
    ) -> SearchResults: ...

# --- text analysis --------------------------------------------------------------------------
def analyze(text: str, lang: str) -> list[str]: ...
def analyzer_id(lang: str) -> str: ...
def supported_languages() -> list[str]: ...
