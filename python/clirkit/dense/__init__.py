"""Dense vector search: exact flat search, or product quantization with 4-bit fast-scan.

:class:`DenseIndex` (:mod:`~clirkit.dense.index`) indexes vectors; :class:`DenseRetriever`
(:mod:`~clirkit.dense.retriever`) pairs it with the ONNX encoder that made them; :mod:`~clirkit.dense.vectors`
reads ``.npy`` matrices and id files. Needs numpy (``import clirkit`` loads this package lazily).
"""

from clirkit.dense.index import DenseIndex, fastscan_kernels
from clirkit.dense.retriever import DenseRetriever
from clirkit.dense.vectors import load_matrix, load_vectors, read_ids

__all__ = [
    "DenseIndex",
    "DenseRetriever",
    "fastscan_kernels",
    "load_matrix",
    "load_vectors",
    "read_ids",
]
