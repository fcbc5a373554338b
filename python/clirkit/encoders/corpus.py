"""Encode a JSONL corpus or query file to ``PREFIX.npy`` (one row per document, passage or query) and
``PREFIX.ids.txt`` (one id per row), streaming, in bounded memory, resumably (:mod:`.resumable`).

The input is read in chunks (default 10,000 records). Each chunk is encoded (the encoder sorts it by
length and pads each batch to its own longest input) and appended to ``PREFIX.npy.partial`` — an ``.npy``
file whose header (:mod:`.npy`) is rewritten with the final row count at the end — and its ids to
``PREFIX.ids.txt.partial``; ``PREFIX.encode-state.json`` records how far the input was read, so an
interrupted run continues where it stopped, and ``PREFIX.npy`` and ``PREFIX.ids.txt`` always belong
together.

:func:`encode_sparse_file` does the same with a :class:`~clirkit.encoders.sparse.SparseEncoder`, writing
``PREFIX.vectors.jsonl`` (one ``{"id", "contents", "vector"}`` line per row, Anserini's JSON vector layout)
through ``PREFIX.vectors.jsonl.partial`` and the same state file.

With ``passages=(size, stride)`` every document is cut into windows of ``size`` tokens starting every
``stride`` tokens (see :meth:`OnnxEncoder.token_windows`), with ids ``docid#0``, ``docid#1``, ...; a
search over them is turned into a document run by :func:`clirkit.encoders.passages.maxp`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clirkit._native import InvalidInputError
from clirkit._types import PathLike
from clirkit.encoders.npy import HEADER_BYTES, id_lines, npy_header
from clirkit.encoders.onnx_encoder import OnnxEncoder
from clirkit.encoders.resumable import (
    check_dtype,
    encode_chunks,
    encode_resumably,
    existing_file,
    expected_state,
    mark_complete,
    prefixed_paths,
    reading_options,
    reopened_partials,
    sync,
)
from clirkit.encoders.sparse import SparseEncoder


@dataclass
class EncodeResult:
    """What :func:`encode_file` wrote."""

    embeddings_path: Path
    ids_path: Path
    rows: int
    dim: int
    records: int
    truncated: int
    resumed_rows: int
    seconds: float


@dataclass
class SparseEncodeResult:
    """What :func:`encode_sparse_file` wrote."""

    vectors_path: Path
    rows: int
    records: int
    truncated: int
    resumed_rows: int
    seconds: float


def output_paths(prefix: PathLike) -> dict[str, Path]:
    """The files of an encoding run: final, partial and state."""
    return prefixed_paths(
        prefix,
        npy=".npy",
        ids=".ids.txt",
        npy_partial=".npy.partial",
        ids_partial=".ids.txt.partial",
        state=".encode-state.json",
    )


def sparse_output_paths(prefix: PathLike) -> dict[str, Path]:
    """The files of a sparse encoding run: final, partial and state."""
    return prefixed_paths(
        prefix,
        vectors=".vectors.jsonl",
        vectors_partial=".vectors.jsonl.partial",
        state=".encode-state.json",
    )


def encode_file(
    encoder: OnnxEncoder,
    input_path: PathLike,
    output_prefix: PathLike,
    *,
    kind: str = "passages",
    fields: Sequence[str] | None = None,
    id_fields: Sequence[str] | None = None,
    passages: tuple[int, int] | None = None,
    separator: str = "#",
    dtype: str = "float32",
    chunk_size: int = 10_000,
    restart: bool = False,
    quiet: bool = False,
) -> EncodeResult:
    """Encode every record of ``input_path`` (JSONL) into ``PREFIX.npy`` + ``PREFIX.ids.txt``.

    ``kind="passages"`` encodes documents with the encoder's passage prefix (optionally cut into
    ``passages=(size, stride)`` token windows); ``kind="queries"`` encodes with the query prefix.
    ``fields`` defaults to title + text (joined) for documents and, for queries, the first present
    of text, query and title; ``id_fields`` to ``ID_FIELDS`` / ``QUERY_ID_FIELDS``. ``dtype`` is the
    storage type (float32 or float16). Duplicate ids are an error naming both lines.
    """
    if isinstance(encoder, SparseEncoder):
        raise InvalidInputError("a SparseEncoder writes term-weight vectors: use encode_sparse_file")
    check_dtype(dtype)
    reading = reading_options(kind, fields, id_fields, passages, separator, chunk_size, quiet)
    source = existing_file(input_path)
    paths = output_paths(output_prefix)
    np_dtype = np.dtype(dtype).newbyteorder("<")
    dim = encoder.dim

    def create_partials() -> None:
        with open(paths["npy_partial"], "wb") as f:
            f.write(npy_header(np_dtype, 0, dim))
        paths["ids_partial"].write_bytes(b"")

    counts = encode_resumably(
        paths,
        ("npy", "ids"),
        expected_state(encoder, source, reading, dtype),
        {"dim": dim, "ids_bytes": 0},
        create_partials,
        lambda state: _encode_remaining(encoder, source, paths, state, np_dtype=np_dtype, **reading),
        restart,
    )
    return EncodeResult(embeddings_path=paths["npy"], ids_path=paths["ids"], dim=dim, **counts)


def encode_sparse_file(
    encoder: SparseEncoder,
    input_path: PathLike,
    output_prefix: PathLike,
    *,
    kind: str = "passages",
    fields: Sequence[str] | None = None,
    id_fields: Sequence[str] | None = None,
    passages: tuple[int, int] | None = None,
    separator: str = "#",
    chunk_size: int = 10_000,
    restart: bool = False,
    quiet: bool = False,
) -> SparseEncodeResult:
    """Encode every record of ``input_path`` (JSONL) into ``PREFIX.vectors.jsonl``: one line
    ``{"id": ..., "contents": ..., "vector": {term: weight, ...}}`` per document, passage or query, in
    input order (``contents`` is the encoded text, without prefix). Options, resuming and errors as for
    :func:`encode_file`."""
    reading = reading_options(kind, fields, id_fields, passages, separator, chunk_size, quiet)
    source = existing_file(input_path)
    paths = sparse_output_paths(output_prefix)
    counts = encode_resumably(
        paths,
        ("vectors",),
        # Weights are float32 values, whatever their decimal form.
        expected_state(encoder, source, reading, "float32"),
        {"vectors_bytes": 0},
        lambda: paths["vectors_partial"].write_bytes(b""),
        lambda state: _encode_sparse_remaining(encoder, source, paths, state, **reading),
        restart,
    )
    return SparseEncodeResult(vectors_path=paths["vectors"], **counts)


def _encode_remaining(
    encoder: OnnxEncoder,
    source: Path,
    paths: dict[str, Path],
    state: dict[str, Any],
    *,
    np_dtype: np.dtype,
    **reading: Any,
) -> None:
    """Append the rest of the input to the partial ``.npy`` and ids; finally write the row count into
    the header and mark the state complete."""
    dim = int(state["dim"])
    recorded = {
        "npy_partial": HEADER_BYTES + state["rows"] * dim * np_dtype.itemsize,
        "ids_partial": state["ids_bytes"],
    }
    with reopened_partials(paths, recorded) as (data, ids_out):

        def append(chunk_ids: list[str], texts: list[str], vectors: np.ndarray) -> None:
            data.write(np.ascontiguousarray(vectors, dtype=np_dtype).tobytes())
            ids_out.write(id_lines(chunk_ids))
            sync(data, ids_out)
            state["ids_bytes"] = ids_out.tell()

        encode_chunks(encoder, source, paths["state"], state, append, **reading)
        data.seek(0)
        data.write(npy_header(np_dtype, state["rows"], dim))
        sync(data)
    mark_complete(paths, state)


def _encode_sparse_remaining(
    encoder: SparseEncoder,
    source: Path,
    paths: dict[str, Path],
    state: dict[str, Any],
    **reading: Any,
) -> None:
    """Append the rest of the input to the partial vector JSONL; finally mark the state complete."""
    with reopened_partials(paths, {"vectors_partial": state["vectors_bytes"]}) as (out,):

        def append(chunk_ids: list[str], texts: list[str], vectors: list[dict[str, float]]) -> None:
            lines = (
                json.dumps({"id": i, "contents": t, "vector": v}, ensure_ascii=False) + "\n"
                for i, t, v in zip(chunk_ids, texts, vectors)
            )
            out.write("".join(lines).encode("utf-8"))
            sync(out)
            state["vectors_bytes"] = out.tell()

        encode_chunks(encoder, source, paths["state"], state, append, **reading)
    mark_complete(paths, state)


def load_embeddings(prefix: PathLike) -> tuple[np.ndarray, list[str]]:
    """Memory-map ``PREFIX.npy`` and read ``PREFIX.ids.txt`` (:func:`clirkit.dense.vectors.load_vectors`:
    the ids checked by the one id rule, one per row)."""
    from clirkit.dense.vectors import load_vectors

    paths = output_paths(prefix)
    return load_vectors(paths["npy"], paths["ids"], mapped=True)
