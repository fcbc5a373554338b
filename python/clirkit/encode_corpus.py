"""Old import path of :mod:`clirkit.encoders.corpus`, kept so that existing code keeps working."""

from clirkit.encoders.corpus import (
    DTYPES,
    HEADER_BYTES,
    KINDS,
    STATE_FORMAT,
    STATE_VERSION,
    EncodeResult,
    Progress,
    encode_file,
    load_embeddings,
    npy_header,
    output_paths,
)

__all__ = [
    "DTYPES",
    "HEADER_BYTES",
    "KINDS",
    "STATE_FORMAT",
    "STATE_VERSION",
    "EncodeResult",
    "Progress",
    "encode_file",
    "load_embeddings",
    "npy_header",
    "output_paths",
]
