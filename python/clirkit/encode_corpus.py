"""Old import path of :mod:`clirkit.encoders.corpus`, kept so that existing code keeps working (the
``.npy`` header and the resume state now live in :mod:`clirkit.encoders.npy` and
:mod:`clirkit.encoders.resumable`, still importable from here)."""

from clirkit.encoders.corpus import EncodeResult, encode_file, load_embeddings, output_paths
from clirkit.encoders.npy import HEADER_BYTES, npy_header  # noqa: F401
from clirkit.encoders.resumable import DTYPES, KINDS, STATE_FORMAT, STATE_VERSION, Progress  # noqa: F401

__all__ = ["EncodeResult", "encode_file", "load_embeddings", "output_paths"]
