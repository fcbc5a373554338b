"""Type stubs for the Rust extension module ``clirkit._native``."""

from typing import Dict, List, Optional, Tuple, Union, final

__all__ = [
    "__version__",
    "ShardedIndexBuild",
    "split_corpus",
    "sharded_index_kind",
    "read_bm25_queries",
    "merge_shard_hits",
    "ClirkitError",
    "ParseError",
    "DuplicateIdError",
    "IndexFormatError",
    "UnknownLanguageError",
    "InvalidInputError",
    "InternalError",
    "max_record_bytes",
    "InputStream",
    "ProgressCounter",
    "set_max_record_bytes",
    "read_run",
    "write_run",
    "read_qrels",
    "verify_index",
    "index_kinds",
    "index_format",
    "merge_indexes",
    "sharded_manifest",
    "analyze",
    "analyzer_id",
    "supported_languages",
    "Bm25Index",
    "SearchResults",
    "ImpactIndex",
    "ApproximateImpactIndex",
    "read_impact_queries",
    "VocabProjection",
    "quantized_attention",
    "attention_kernel",
    "audit_sample",
    "audit_shard_hits",
    "NativeRun",
    "FUSION_METHODS",
    "NORMALIZATIONS",
    "fuse",
    "fuse_to_file",
    "RerankState",
    "parse_permutation",
    "window_plan",
    "load_texts",
    "Evaluator",
    "measure_keys",
    "evaluate_files",
    "position_bias",
    "paired_t_test",
    "randomization_test",
    "CORRECTIONS",
    "adjust_p_values",
    "spearman",
    "kendall_tau",
    "DenseIndex",
    "fastscan_kernels",
    "METRICS",
    "merge_dense_shortlists",
    "dense_top_hits",
    "dense_training_rows",
    "ShardedDenseBuild",
    "write_run_pairs",
    "MultiVectorIndex",
    "MultiVectorSearchOptions",
    "maxsim_search",
    "maxp",
    "passage_doc_id",
]

__version__: str

# ClirkitError subclasses ValueError (bad input); I/O failures are OSError.
class ClirkitError(ValueError): ...
class ParseError(ClirkitError): ...
class DuplicateIdError(ClirkitError): ...
class IndexFormatError(ClirkitError): ...
class UnknownLanguageError(ClirkitError): ...
class InvalidInputError(ClirkitError): ...
class InternalError(ClirkitError): ...

# --- progress (a count the core adds to while a call runs; clirkit._progress.polled reads it) --
@final
class ProgressCounter:
    def __new__(cls) -> ProgressCounter: ...
    @property
    def done(self) -> int: ...
    @property
    def total(self) -> int: ...

# --- runs and qrels -------------------------------------------------------------------------
def max_record_bytes() -> int: ...

@final
class InputStream:
    def __new__(cls, path: str) -> InputStream: ...
    def read(self, size: int) -> bytes: ...
    def close(self) -> None: ...

def set_max_record_bytes(limit: int) -> None: ...
def read_run(path: str) -> List[Tuple[str, List[Tuple[str, float]]]]: ...
def write_run(path: str, run: Dict[str, Dict[str, float]], tag: str = "clirkit") -> None: ...
def read_qrels(path: str) -> List[Tuple[str, List[Tuple[str, int]]]]: ...

# --- index kinds (the core's one list: verify, merge, sharded manifests) ---------------------
def index_kinds() -> list[tuple[str, bool]]: ...
def index_format(path: str) -> str: ...
def verify_index(path: str) -> Tuple[str, int, int]: ...
def merge_indexes(
    inputs: list[str], index: str, memory_mb: int = 256, threads: int = 0
) -> tuple[str, int]: ...
def sharded_manifest(path: str) -> tuple[str, str]: ...

# --- text analysis --------------------------------------------------------------------------
def analyze(text: str, lang: str) -> list[str]: ...
def analyzer_id(lang: str) -> str: ...
def supported_languages() -> list[str]: ...

# --- BM25 (clirkit.bm25 wraps these) --------------------------------------------------------
@final
class SearchResults:
    def __len__(self) -> int: ...
    def __contains__(self, qid: str, /) -> bool: ...
    def __getitem__(self, qid: str, /) -> List[Tuple[str, float]]: ...
    def qids(self) -> List[str]: ...
    def expansion(self, qid: str) -> Optional[List[Tuple[str, float]]]: ...
    def shard_hits(self) -> bytes: ...
    def to_trec(self, path: str, tag: str = "clirkit-bm25") -> None: ...
    def to_dict(self) -> Dict[str, Dict[str, float]]: ...

@final
class Bm25Index:
    @staticmethod
    def build(
        corpus: Union[str, List[Tuple[str, Optional[str], Optional[str]]]],
        index: str,
        *,
        lang: Optional[str] = None,
        lang_field: Optional[str] = None,
        fields: Optional[List[str]] = None,
        threads: int = 0,
        keep_first_duplicate: bool = False,
        progress: Optional[ProgressCounter] = None,
        memory_budget_mb: int = 1024,
        store_docvectors: bool = False,
        range: Optional[Tuple[int, int, int]] = None,
    ) -> Bm25Index: ...
    @staticmethod
    def merge(inputs: list[str], index: str) -> Bm25Index: ...
    @staticmethod
    def open_shard(index: str, shard: int) -> Bm25Index: ...
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
    @property
    def has_docvectors(self) -> bool: ...
    def search_rm3(
        self,
        query: str,
        rm3: Tuple[int, int, float, bool],
        k: int = 10,
        lang: Optional[str] = None,
        k1: float = ...,  # clirkit.bm25.DEFAULT_K1
        b: float = ...,  # clirkit.bm25.DEFAULT_B
    ) -> Tuple[List[Tuple[str, float]], List[Tuple[str, float]]]: ...
    def search(
        self,
        query: str,
        k: int = 10,
        lang: Optional[str] = None,
        k1: float = ...,  # clirkit.bm25.DEFAULT_K1
        b: float = ...,  # clirkit.bm25.DEFAULT_B
        strategy: str = "auto",
    ) -> List[Tuple[str, float]]: ...
    def batch_search(
        self,
        queries: List[Tuple[str, str, Optional[str]]],
        k: int = 1000,
        threads: int = 0,
        lang: Optional[str] = None,
        k1: float = ...,  # clirkit.bm25.DEFAULT_K1
        b: float = ...,  # clirkit.bm25.DEFAULT_B
        progress: Optional[ProgressCounter] = None,
        rm3: Optional[Tuple[int, int, float, bool]] = None,
    ) -> SearchResults: ...
    def search_file(
        self,
        path: str,
        k: int = 1000,
        threads: int = 0,
        lang: Optional[str] = None,
        k1: float = ...,  # clirkit.bm25.DEFAULT_K1
        b: float = ...,  # clirkit.bm25.DEFAULT_B
        progress: Optional[ProgressCounter] = None,
        rm3: Optional[Tuple[int, int, float, bool]] = None,
        output: Optional[str] = None,
        tag: str = "clirkit",
    ) -> Optional[SearchResults]: ...

@final
class ImpactIndex:
    @staticmethod
    def build(
        vectors: list[str],
        index: str,
        *,
        quantize: int = ...,  # clirkit.impact.DEFAULT_QUANTIZE
        threads: int = 0,
        progress: Optional[ProgressCounter] = None,
        memory_budget_mb: int = 1024,
        range: Optional[Tuple[int, int, int]] = None,
    ) -> ImpactIndex: ...
    @staticmethod
    def open(index: str) -> ImpactIndex: ...
    @staticmethod
    def open_shard(index: str, shard: int) -> ImpactIndex: ...
    @property
    def num_docs(self) -> int: ...
    @property
    def num_terms(self) -> int: ...
    @property
    def quantize(self) -> int: ...
    @property
    def manifest_json(self) -> str: ...
    def verify(self) -> None: ...
    def search(
        self,
        query: List[Tuple[str, float]],
        k: int = 10,
        strategy: str = "auto",
    ) -> List[Tuple[str, float]]: ...
    def batch_search(
        self,
        queries: List[Tuple[str, List[Tuple[str, float]]]],
        k: int = 1000,
        threads: int = 0,
        progress: Optional[ProgressCounter] = None,
    ) -> SearchResults: ...
    def search_file(
        self,
        path: str,
        k: int = 1000,
        threads: int = 0,
        progress: Optional[ProgressCounter] = None,
    ) -> SearchResults: ...
    def search_file_to_trec(
        self,
        path: str,
        output: str,
        k: int = 1000,
        tag: str = "clirkit-impact",
        threads: int = 0,
        progress: Optional[ProgressCounter] = None,
    ) -> int: ...

_ImpactQueries = Union[str, List[Tuple[str, List[Tuple[str, float]]]]]

@final
class ApproximateImpactIndex:
    @staticmethod
    def build(
        index: ImpactIndex,
        *,
        postings_per_term: int = ...,  # clirkit.impact.DEFAULT_POSTINGS_PER_TERM
        threads: int = 0,
    ) -> ApproximateImpactIndex: ...
    @property
    def postings_per_term(self) -> int: ...
    @property
    def kept_postings(self) -> int: ...
    @property
    def memory_bytes(self) -> int: ...
    # settings: (query_terms, candidates), clirkit.impact.ApproximateSettings's fields
    def search(
        self, query: List[Tuple[str, float]], k: int, settings: Tuple[int, int]
    ) -> List[Tuple[str, float]]: ...
    def batch_search(
        self,
        queries: _ImpactQueries,
        k: int,
        settings: Tuple[int, int],
        threads: int,
        progress: Optional[ProgressCounter] = None,
    ) -> SearchResults: ...
    def search_file_to_trec(
        self,
        path: str,
        output: str,
        k: int,
        tag: str,
        settings: Tuple[int, int],
        threads: int,
        progress: Optional[ProgressCounter] = None,
    ) -> int: ...
    def audit(
        self, queries: _ImpactQueries, n: int, seed: int, k: int, settings: Tuple[int, int], threads: int
    ) -> str: ...
    def calibrate(
        self,
        queries: _ImpactQueries,
        target: float,
        n: int,
        seed: int,
        k: int,
        threads: int,
    ) -> str: ...

@final
class VocabProjection:
    def __new__(
        cls, weight: _npt.NDArray[_np.float32], bias: _npt.NDArray[_np.float32]
    ) -> VocabProjection: ...
    @property
    def shape(self) -> Tuple[int, int]: ...
    @property
    def kernel(self) -> str: ...
    def max_logits(
        self, states: _npt.NDArray[_np.float32], lengths: _npt.NDArray[_np.int64], *, positive: bool = False
    ) -> _npt.NDArray[_np.float32]: ...

def quantized_attention(
    query: _npt.NDArray[_np.float32],
    key: _npt.NDArray[_np.float32],
    value: _npt.NDArray[_np.float32],
    num_heads: int,
    scale: float,
) -> _npt.NDArray[_np.float32]: ...
def attention_kernel(head_dim: int) -> str: ...
def read_impact_queries(path: str) -> List[Tuple[str, List[Tuple[str, float]]]]: ...
def audit_sample(count: int, n: int, seed: int) -> List[int]: ...
def audit_shard_hits(
    parts: Tuple[List[bytes], List[bytes]],
    qids: List[str],
    sample: Tuple[int, int, int],
    settings: Tuple[int, int],
) -> str: ...

# --- fusion ----------------------------------------------------------------------------------
from typing import Any, Sequence, Union  # noqa: E402

#: Fusion method names, as ``fuse`` takes them (the core's list).
FUSION_METHODS: Tuple[str, ...]
#: Per-query score normalizations of the score-based fusion methods (the core's list).
NORMALIZATIONS: Tuple[str, ...]

@final
class NativeRun:
    """A run held in Rust: queries in first-appearance order, documents in canonical order."""
    @staticmethod
    def read(path: str, threads: Optional[int] = None) -> NativeRun: ...
    @staticmethod
    def from_dict(run: Dict[str, Dict[str, float]]) -> NativeRun: ...
    def to_list(self) -> List[Tuple[str, List[Tuple[str, float]]]]: ...
    def write(self, path: str, tag: str = "clirkit", threads: Optional[int] = None) -> None: ...
    @property
    def num_queries(self) -> int: ...
    @property
    def num_entries(self) -> int: ...
    def __len__(self) -> int: ...

# options: clirkit.fusion.fuse's keyword options, every one present (method, k, weights, depth,
# norm, alpha, top, threads), as clirkit.fusion builds them.
def fuse(runs: Sequence[Union[NativeRun, str]], options: Dict[str, Any]) -> NativeRun: ...
def fuse_to_file(
    runs: Sequence[Union[NativeRun, str]], output: str, tag: str, options: Dict[str, Any]
) -> None: ...

# --- reranking -------------------------------------------------------------------------------
@final
class RerankState:
    """Batched sliding-window reranking state (see clirkit.rerank)."""
    def __new__(
        cls, candidates: List[Tuple[str, List[str]]], depth: int = 100, window: int = 20, stride: int = 10
    ) -> RerankState: ...
    def pending(self) -> List[Tuple[int, int, int, List[str]]]: ...
    def apply(self, query: int, answer: Union[str, Sequence[int], None]) -> Tuple[str, int, int, int]: ...
    @property
    def qids(self) -> List[str]: ...
    @property
    def total_windows(self) -> int: ...
    @property
    def applied_windows(self) -> int: ...
    def is_finished(self) -> bool: ...
    def result(self) -> List[Tuple[str, List[Tuple[str, float]]]]: ...

def parse_permutation(text: str, n: int) -> Optional[Tuple[List[int], Tuple[int, int, int]]]: ...
def window_plan(
    length: int, depth: int = 100, window: int = 20, stride: int = 10
) -> List[Tuple[int, int]]: ...
def load_texts(path: str, ids: Optional[set] = None, queries: bool = False) -> Dict[str, str]: ...

# --- evaluation (clirkit.evaluation, clirkit.position, clirkit.significance) -------------------

_Evaluation = Tuple[List[str], List[Tuple[str, List[float]]], List[float], int, int]
_Bucket = Tuple[str, List[int], List[Optional[float]], Optional[float], Optional[float]]

@final
class Evaluator:
    def __new__(
        cls,
        qrels: Union[str, Dict[str, Dict[str, int]]],
        measures: List[str],
        relevance_level: int = 1,
        judged_docs_only: bool = False,
        complete: bool = False,
        doc_languages: Union[str, Dict[str, str], None] = None,
    ) -> Evaluator: ...
    def keys(self) -> List[str]: ...
    def evaluate_dict(self, run: Dict[str, Dict[str, float]]) -> _Evaluation: ...
    def evaluate_file(self, run: str) -> _Evaluation: ...

def measure_keys(measures: List[str], mlir: bool = False) -> List[str]: ...
def evaluate_files(
    qrels: str,
    run: str,
    measures: List[str],
    relevance_level: int = 1,
    judged_docs_only: bool = False,
    complete: bool = False,
) -> _Evaluation: ...
def position_bias(
    positions: str,
    run: Union[str, Dict[str, Dict[str, float]]],
    measure: str = ...,  # "ndcg_cut.10"
    bins: int = 20,
    edges: List[int] = ...,  # clirkit.position.DEFAULT_EDGES
    complete: bool = False,
    doc_tokens: Optional[Dict[str, int]] = None,
    min_queries: int = 1,
) -> Tuple[str, _Bucket, List[_Bucket], _Evaluation]: ...
def paired_t_test(a: List[float], b: List[float]) -> Tuple[float, float, float, int]: ...
def randomization_test(
    a: List[float], b: List[float], permutations: int = 10000, seed: int = 0
) -> Tuple[float, float, float, int]: ...

#: Corrections for multiple comparisons, as ``adjust_p_values`` takes them (the core's list).
CORRECTIONS: Tuple[str, ...]

def adjust_p_values(p: List[float], method: str) -> List[float]: ...
def spearman(x: List[float], y: List[float]) -> Tuple[float, float, int]: ...
def kendall_tau(x: List[float], y: List[float]) -> Tuple[float, float, int]: ...

# --- dense vector search (crates/clirkit-py/src/dense.rs) ---

import os

import numpy as _np
import numpy.typing as _npt

def fastscan_kernels() -> list[str]: ...

#: Dense similarity names, as ``DenseIndex.build`` takes them (the core's list).
METRICS: Tuple[str, ...]

@final
class DenseIndex:
    # options: clirkit.dense.DenseIndex.build's keyword options, every one present (pq, nbits, ivf,
    # metric, train_size, seed, threads, keep_vectors, vector_dtype) and progress (a ProgressCounter
    # or None), as clirkit.dense.index builds them.
    @staticmethod
    def build(
        embeddings: _npt.NDArray[_np.float32], ids: list[str], options: Dict[str, Any]
    ) -> DenseIndex: ...
    @staticmethod
    def build_npy(
        npy: list[tuple[os.PathLike[str] | str, list[int] | None]],
        ids: list[str],
        dir: os.PathLike[str] | str,
        options: Dict[str, Any],
        memory_mb: int = 256,
    ) -> DenseIndex: ...
    def write_combined(
        self,
        dir: os.PathLike[str] | str,
        indexes: list[DenseIndex],
        ids: list[str] | None = None,
        embeddings: _npt.NDArray[_np.float32] | None = None,
        npy: list[tuple[os.PathLike[str] | str, Sequence[int] | None]] | None = None,
        memory_mb: int = 256,
        threads: int = 0,
        progress: Optional[ProgressCounter] = None,
    ) -> DenseIndex: ...
    @staticmethod
    def open(dir: os.PathLike[str] | str) -> DenseIndex: ...
    @staticmethod
    def open_shard(dir: os.PathLike[str] | str, shard: int) -> DenseIndex: ...
    def save(self, dir: os.PathLike[str] | str) -> None: ...
    def search(
        self,
        queries: _npt.NDArray[_np.float32],
        k: int = 1000,
        nprobe: int = 1,
        refine: int = 0,
        threads: int = 0,
        progress: ProgressCounter | None = None,
    ) -> tuple[_npt.NDArray[_np.float32], _npt.NDArray[_np.int64]]: ...
    def search_run(
        self,
        queries: _npt.NDArray[_np.float32],
        qids: list[str],
        k: int = 1000,
        nprobe: int = 1,
        refine: int = 0,
        threads: int = 0,
        maxp: str | None = None,
        progress: ProgressCounter | None = None,
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
        maxp: str | None = None,
        progress: ProgressCounter | None = None,
    ) -> None: ...
    def shortlist(
        self,
        queries: _npt.NDArray[_np.float32],
        k: int = 1000,
        nprobe: int = 1,
        refine: int = 0,
        threads: int = 0,
        progress: Optional[ProgressCounter] = None,
    ) -> tuple[int, bool, _Shortlist]: ...
    def rescore(
        self,
        queries: _npt.NDArray[_np.float32],
        offsets: _npt.NDArray[_np.int64],
        rows: _npt.NDArray[_np.uint32],
        threads: int = 0,
    ) -> _npt.NDArray[_np.float32]: ...
    def ids_of(self, rows: _npt.NDArray[_np.uint32]) -> list[str]: ...
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
    @property
    def vector_dtype(self) -> str | None: ...

# A shard's shortlist: offsets (q + 1), keys, IVF lists, rows, scores.
_Shortlist = tuple[
    _npt.NDArray[_np.int64],
    _npt.NDArray[_np.uint32],
    _npt.NDArray[_np.uint32],
    _npt.NDArray[_np.uint32],
    _npt.NDArray[_np.float32],
]
# Hits by query: offsets (q + 1), shards, rows, scores.
_ShardHits = tuple[
    _npt.NDArray[_np.int64],
    _npt.NDArray[_np.uint32],
    _npt.NDArray[_np.uint32],
    _npt.NDArray[_np.float32],
]

def merge_dense_shortlists(parts: list[_Shortlist], row_offsets: list[int], len: int) -> _ShardHits: ...
def dense_top_hits(hits: _ShardHits, row_offsets: list[int], k: int) -> _ShardHits: ...
def dense_training_rows(n: int, train_size: int | None = None, seed: int = 0) -> _npt.NDArray[_np.uint64]: ...

@final
class ShardedDenseBuild:
    def __new__(cls, index: os.PathLike[str] | str, shards: int) -> ShardedDenseBuild: ...
    @property
    def shards(self) -> int: ...
    def codebook_dir(self) -> os.PathLike[str]: ...
    def shard_dir(self, i: int) -> os.PathLike[str]: ...
    def finish(self) -> str: ...
    def abort(self) -> None: ...

def write_run_pairs(
    path: os.PathLike[str] | str, run: list[tuple[str, list[tuple[str, float]]]], tag: str = "clirkit"
) -> None: ...

@final
class MultiVectorSearchOptions:
    def __new__(
        cls,
        k: int = 1000,
        ncells: int | None = None,
        centroid_score_threshold: float | None = None,
        ndocs: int | None = None,
        rerank: int | None = None,
        refine: bool = False,
        exact: bool = False,
        threads: int = 0,
    ) -> MultiVectorSearchOptions: ...

@final
class MultiVectorIndex:
    # options: clirkit.multivector.MultiVectorIndex.build's keyword options, every one present (nbits,
    # centroids, kmeans_sample, kmeans_iterations, seed, threads, keep_vectors), as it builds them.
    # parts: (tokens: a .npy file read in place or a float32 (rows, d) array, offsets, ids, items kept).
    @staticmethod
    def build(
        parts: Sequence[
            tuple[
                os.PathLike[str] | str | _npt.NDArray[_np.float32],
                _npt.NDArray[_np.uint64],
                list[str],
                list[int] | None,
            ]
        ],
        dir: os.PathLike[str] | str,
        options: Dict[str, Any],
        progress: ProgressCounter | None = None,
    ) -> MultiVectorIndex: ...
    @staticmethod
    def open(dir: os.PathLike[str] | str) -> MultiVectorIndex: ...
    def search(
        self,
        tokens: _npt.NDArray[_np.float32],
        offsets: _npt.NDArray[_np.uint64],
        options: MultiVectorSearchOptions,
        progress: ProgressCounter | None = None,
    ) -> tuple[_npt.NDArray[_np.float32], _npt.NDArray[_np.int64]]: ...
    def search_run(
        self,
        tokens: _npt.NDArray[_np.float32],
        offsets: _npt.NDArray[_np.uint64],
        qids: list[str],
        options: MultiVectorSearchOptions,
        maxp: str | None = None,
        path: os.PathLike[str] | str | None = None,
        tag: str = "clirkit-multivector",
        progress: ProgressCounter | None = None,
    ) -> list[tuple[str, list[tuple[str, float]]]] | None: ...
    def id(self, i: int) -> str: ...
    def find(self, id: str) -> int | None: ...
    def compressed_bytes(self) -> int: ...
    @property
    def dim(self) -> int: ...
    @property
    def ndocs(self) -> int: ...
    @property
    def ntotal(self) -> int: ...
    @property
    def ntokens(self) -> int: ...
    @property
    def ncentroids(self) -> int: ...
    @property
    def nbits(self) -> int: ...
    @property
    def has_vectors(self) -> bool: ...

def maxsim_search(
    doc_tokens: _npt.NDArray[_np.float32],
    doc_offsets: _npt.NDArray[_np.uint64],
    query_tokens: _npt.NDArray[_np.float32],
    query_offsets: _npt.NDArray[_np.uint64],
    k: int = 1000,
    threads: int = 0,
    progress: ProgressCounter | None = None,
) -> tuple[_npt.NDArray[_np.float32], _npt.NDArray[_np.int64]]: ...

# --- passages (MaxP) --------------------------------------------------------------------------

def maxp(
    run: Dict[str, Dict[str, float]], separator: str = "#", depth: Optional[int] = None
) -> List[Tuple[str, List[Tuple[str, float]]]]: ...
def passage_doc_id(passage_id: str, separator: str = "#") -> str: ...

# --- sharded BM25 (clirkit.distributed) ---

def split_corpus(corpus: str, parts: int) -> List[Tuple[int, int, int]]: ...
def sharded_index_kind(index: str) -> Optional[str]: ...
def read_bm25_queries(path: str) -> List[Tuple[str, str, Optional[str]]]: ...
def merge_shard_hits(
    parts: List[bytes], qids: List[str], k: int, output: Optional[str] = None, tag: str = "clirkit-bm25"
) -> Optional[Dict[str, List[Tuple[str, float]]]]: ...

@final
class ShardedIndexBuild:
    def __new__(cls, kind: str, index: str, shards: int) -> ShardedIndexBuild: ...
    @property
    def kind(self) -> str: ...
    @property
    def shards(self) -> int: ...
    def shard_dir(self, i: int) -> os.PathLike[str]: ...
    def finish(self) -> str: ...
    def abort(self) -> None: ...
