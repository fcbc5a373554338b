"""Encode a JSONL corpus or query file to ``PREFIX.npy`` (one row per document, passage or query) and
``PREFIX.ids.txt`` (one id per row), streaming, in bounded memory, resumably.

The input is read in chunks (default 10,000 records). Each chunk is encoded (the encoder sorts it by
length and pads each batch to its own longest input) and appended to ``PREFIX.npy.partial`` — an ``.npy``
file whose header is rewritten with the final row count at the end — and its ids to
``PREFIX.ids.txt.partial``. After every chunk both are synced to disk and only then does
``PREFIX.encode-state.json`` record how far the input was read, so a process killed at any point leaves a
state that its files back up. An interrupted run started again with the same model and settings drops
whatever the killed run wrote after its last recorded chunk and continues from there; a different model or
different settings are refused. When all is done the state is marked complete before the partial files are
renamed into place (two renames cannot be one atomic step): a run killed between them finishes the renames
when started again instead of encoding anything, so ``PREFIX.npy`` and ``PREFIX.ids.txt`` always belong
together and an existing ``PREFIX.npy`` is always complete.

:func:`encode_sparse_file` does the same with a :class:`~clirkit.encoders.sparse.SparseEncoder`, writing
``PREFIX.vectors.jsonl`` (one ``{"id", "contents", "vector"}`` line per row, Anserini's JSON vector layout)
through ``PREFIX.vectors.jsonl.partial`` and the same state file.

With ``passages=(size, stride)`` every document is cut into windows of ``size`` tokens starting every
``stride`` tokens (see :meth:`OnnxEncoder.token_windows`), with ids ``docid#0``, ``docid#1``, ...; a
search over them is turned into a document run by :func:`clirkit.encoders.passages.maxp`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TextIO

import numpy as np

from clirkit._native import IndexFormatError, InvalidInputError
from clirkit._types import PathLike
from clirkit.datasets import CORPUS_FIELDS, ID_FIELDS, QUERY_FIELDS, QUERY_ID_FIELDS, iter_jsonl_from
from clirkit.encoders.onnx_encoder import OnnxEncoder
from clirkit.encoders.seen_ids import SeenIds
from clirkit.encoders.sparse import SparseEncoder

STATE_FORMAT = "clirkit-encode-state"
STATE_VERSION = 1
HEADER_BYTES = 128  # fixed .npy header size, so the final shape can be written in place
DTYPES = ("float32", "float16")
KINDS = ("passages", "queries")


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


def npy_header(dtype: np.dtype, rows: int, dim: int) -> bytes:
    """A version-1.0 ``.npy`` header of a ``(rows, dim)`` matrix padded to exactly :data:`HEADER_BYTES`
    bytes."""
    return npy_shape_header(dtype, (rows, dim))


def npy_shape_header(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    """A version-1.0 ``.npy`` header padded to exactly :data:`HEADER_BYTES` bytes: what ``np.save``
    writes for an array of that shape."""
    body = f"{{'descr': '{dtype.str}', 'fortran_order': False, 'shape': {shape!r}, }}"
    header_len = HEADER_BYTES - 10
    if len(body) + 1 > header_len:
        raise InvalidInputError(f"shape {shape} does not fit an .npy header of {HEADER_BYTES} bytes")
    body = body.ljust(header_len - 1) + "\n"
    return b"\x93NUMPY\x01\x00" + header_len.to_bytes(2, "little") + body.encode("latin1")


def prefixed_paths(prefix: PathLike, **suffixes: str) -> dict[str, Path]:
    """``{name: PREFIX + suffix}``: every encoding output is named by its prefix and a suffix."""
    p = os.fspath(prefix)
    return {name: Path(p + suffix) for name, suffix in suffixes.items()}


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


class Progress:
    """A one-line progress report on stderr, shown only on a terminal."""

    def __init__(self, total_bytes: int, quiet: bool, stream: TextIO = sys.stderr) -> None:
        self.total = max(total_bytes, 1)
        self.stream = stream
        self.enabled = not quiet and stream.isatty()
        self.start = time.monotonic()
        self.start_done: int | None = None

    def update(self, done_bytes: int, rows: int) -> None:
        if not self.enabled:
            return
        if self.start_done is None:
            self.start_done = done_bytes
        elapsed = time.monotonic() - self.start
        fraction = done_bytes / self.total
        rate = (done_bytes - self.start_done) / elapsed if elapsed > 0 else 0.0
        eta_text = f"{(self.total - done_bytes) / rate / 60:.1f} min left" if rate > 0 else "estimating"
        self.stream.write(f"\rencoding {fraction:6.1%}  {rows:,} rows  {eta_text}   ")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


def _settings(
    encoder: OnnxEncoder,
    kind: str,
    fields: Sequence[str],
    passages: tuple[int, int] | None,
    separator: str,
    dtype: str,
) -> dict[str, Any]:
    return {
        "encoder": encoder.fingerprint(),
        "model_dir": str(encoder.model_dir.resolve()),
        "kind": kind,
        "fields": list(fields),
        "passages": list(passages) if passages else None,
        "separator": separator,
        "dtype": dtype,
    }


def _input_identity(path: Path) -> dict[str, Any]:
    st = path.stat()
    return {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _write_state(path: Path, state: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _load_resumable_state(
    paths: dict[str, Path], outputs: Sequence[str], expected: dict[str, Any]
) -> dict[str, Any] | None:
    """The saved state if an earlier run writing ``outputs`` (keys of ``paths``, each with a
    ``_partial``) can be continued; :class:`InvalidInputError` if one was started
    with other settings (never silently mix vectors from two encoders), :class:`IndexFormatError` if the
    state file is unreadable."""
    if not paths["state"].exists():
        return None
    try:
        state = json.loads(paths["state"].read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise IndexFormatError(
            f"{paths['state']}: unreadable resume state ({err}); delete it to start over"
        ) from err
    if state.get("format") != STATE_FORMAT or state.get("version") != STATE_VERSION:
        raise IndexFormatError(f"{paths['state']}: not a clirkit encode state of version {STATE_VERSION}")
    for key in ("settings", "input"):
        if state.get(key) != expected[key]:
            changed = sorted(
                k
                for k in set(state.get(key, {})) | set(expected[key])
                if state.get(key, {}).get(k) != expected[key].get(k)
            )
            raise InvalidInputError(
                f"{paths['state']}: an interrupted encoding with a different {key} "
                f"({', '.join(changed)}) is in progress; rerun with the same {key}, or restart "
                f"(--restart / restart=True) to discard it"
            )
    if state.get("complete"):
        # Killed while renaming: each output is either still partial or already in place.
        if all(paths[f"{name}_partial"].exists() or paths[name].exists() for name in outputs):
            return state
        return None
    if not all(paths[f"{name}_partial"].exists() for name in outputs):
        return None
    return state


def _check_partial_sizes(paths: dict[str, Path], recorded_sizes: dict[str, int]) -> None:
    """The partial files must hold at least what the state says was synced (``recorded_sizes``: bytes
    per key of ``paths``); anything shorter was damaged after the fact (a crash of the machine before the
    sync reached the disk, or a hand edit), and padding it would silently add rows of zeros."""
    for key, recorded in recorded_sizes.items():
        size = paths[key].stat().st_size
        if size < recorded:
            raise IndexFormatError(
                f"{paths[key]}: holds {size} bytes but {paths['state']} records {recorded} bytes written; "
                "the interrupted output is damaged: restart (--restart / restart=True) to encode from scratch"
            )


def _fsync_directory(path: Path) -> None:
    """Make renames inside ``path`` durable (a rename lives in the directory, not in the file)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _move_into_place(paths: dict[str, Path], outputs: Sequence[str]) -> None:
    """Rename the completed partial files to their final names (each only if not done already: a run
    killed between two renames is finished by the next), then drop the state."""
    for name in outputs:
        if paths[f"{name}_partial"].exists():
            os.replace(paths[f"{name}_partial"], paths[name])
    _fsync_directory(paths["state"].parent)
    paths["state"].unlink()


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
    if dtype not in DTYPES:
        raise InvalidInputError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    reading = _reading_options(kind, fields, id_fields, passages, separator, chunk_size, quiet)
    source = _existing_file(input_path)
    paths = output_paths(output_prefix)
    np_dtype = np.dtype(dtype).newbyteorder("<")
    dim = encoder.dim

    def create_partials() -> None:
        with open(paths["npy_partial"], "wb") as f:
            f.write(npy_header(np_dtype, 0, dim))
        paths["ids_partial"].write_bytes(b"")

    counts = _encode_resumably(
        paths,
        ("npy", "ids"),
        _expected_state(encoder, source, reading, dtype),
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
    reading = _reading_options(kind, fields, id_fields, passages, separator, chunk_size, quiet)
    source = _existing_file(input_path)
    paths = sparse_output_paths(output_prefix)
    counts = _encode_resumably(
        paths,
        ("vectors",),
        # Weights are float32 values, whatever their decimal form.
        _expected_state(encoder, source, reading, "float32"),
        {"vectors_bytes": 0},
        lambda: paths["vectors_partial"].write_bytes(b""),
        lambda state: _encode_sparse_remaining(encoder, source, paths, state, **reading),
        restart,
    )
    return SparseEncodeResult(vectors_path=paths["vectors"], **counts)


def _reading_options(
    kind: str,
    fields: Sequence[str] | None,
    id_fields: Sequence[str] | None,
    passages: tuple[int, int] | None,
    separator: str,
    chunk_size: int,
    quiet: bool,
) -> dict[str, Any]:
    """The checked options on reading the input, with their defaults filled in."""
    if kind not in KINDS:
        raise InvalidInputError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if chunk_size < 1:
        raise InvalidInputError(f"chunk_size must be at least 1, got {chunk_size}")
    if passages is not None:
        if kind == "queries":
            raise InvalidInputError("passage windows apply to documents, not queries")
        size, stride = passages
        if size < 1 or stride < 1 or stride > size:
            raise InvalidInputError(f"passages need 1 <= stride <= size, got {size}:{stride}")
    if not separator:
        raise InvalidInputError("the passage id separator must not be empty")
    queries = kind == "queries"
    return {
        "kind": kind,
        "fields": tuple(fields) if fields else (QUERY_FIELDS if queries else CORPUS_FIELDS),
        "id_fields": tuple(id_fields) if id_fields else (QUERY_ID_FIELDS if queries else ID_FIELDS),
        "passages": passages,
        "separator": separator,
        "chunk_size": chunk_size,
        "quiet": quiet,
    }


def _existing_file(input_path: PathLike) -> Path:
    source = Path(input_path)
    if not source.is_file():
        raise FileNotFoundError(f"{source}: no such file")
    return source


def _expected_state(
    encoder: OnnxEncoder, source: Path, reading: dict[str, Any], dtype: str
) -> dict[str, Any]:
    """What a resumable state must match: the encoder and settings, and the input file."""
    return {
        "settings": _settings(
            encoder, reading["kind"], reading["fields"], reading["passages"], reading["separator"], dtype
        ),
        "input": _input_identity(source),
    }


def _encode_resumably(
    paths: dict[str, Path],
    outputs: Sequence[str],
    expected: dict[str, Any],
    output_fields: dict[str, int],
    create_partials: Callable[[], Any],
    encode_remaining: Callable[[dict[str, Any]], None],
    restart: bool,
) -> dict[str, Any]:
    """Continue the interrupted run whose state matches ``expected``, or start afresh (empty partial
    outputs made by ``create_partials``; ``output_fields``, what the output needs recorded such as bytes
    written so far, put in the state); ``encode_remaining(state)`` encodes what is left; then the
    ``outputs`` are moved into place. Returns the counts of an encoding result."""
    started = time.monotonic()
    paths["state"].parent.mkdir(parents=True, exist_ok=True)
    state = None if restart else _load_resumable_state(paths, outputs, expected)
    if state is None:
        state = {
            "format": STATE_FORMAT,
            "version": STATE_VERSION,
            **expected,
            **output_fields,
            "rows": 0,
            "offset": 0,
            "line": 0,
            "records": 0,
            "truncated": 0,
        }
        create_partials()
        _write_state(paths["state"], state)
    resumed_rows = int(state["rows"])
    if not state.get("complete"):
        encode_remaining(state)
    _move_into_place(paths, outputs)
    return {
        "rows": state["rows"],
        "records": state["records"],
        "truncated": state["truncated"],
        "resumed_rows": resumed_rows,
        "seconds": time.monotonic() - started,
    }


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
    row_bytes = dim * np_dtype.itemsize
    npy_bytes = HEADER_BYTES + state["rows"] * row_bytes
    _check_partial_sizes(paths, {"npy_partial": npy_bytes, "ids_partial": state["ids_bytes"]})
    with open(paths["npy_partial"], "r+b") as data, open(paths["ids_partial"], "r+b") as ids_out:
        # Drop whatever a crash left after the last completed chunk.
        data.truncate(npy_bytes)
        ids_out.truncate(state["ids_bytes"])
        data.seek(0, os.SEEK_END)
        ids_out.seek(0, os.SEEK_END)

        def append(chunk_ids: list[str], texts: list[str], vectors: np.ndarray) -> None:
            data.write(np.ascontiguousarray(vectors, dtype=np_dtype).tobytes())
            ids_out.write("".join(i + "\n" for i in chunk_ids).encode("utf-8"))
            for f in (data, ids_out):
                f.flush()
                os.fsync(f.fileno())
            state["ids_bytes"] = ids_out.tell()

        _encode_chunks(encoder, source, paths["state"], state, append, **reading)
        data.seek(0)
        data.write(npy_header(np_dtype, state["rows"], dim))
        data.flush()
        os.fsync(data.fileno())
    state["complete"] = True
    _write_state(paths["state"], state)


def _encode_sparse_remaining(
    encoder: SparseEncoder,
    source: Path,
    paths: dict[str, Path],
    state: dict[str, Any],
    **reading: Any,
) -> None:
    """Append the rest of the input to the partial vector JSONL; finally mark the state complete."""
    _check_partial_sizes(paths, {"vectors_partial": state["vectors_bytes"]})
    with open(paths["vectors_partial"], "r+b") as out:
        out.truncate(state["vectors_bytes"])
        out.seek(0, os.SEEK_END)

        def append(chunk_ids: list[str], texts: list[str], vectors: list[dict[str, float]]) -> None:
            lines = (
                json.dumps({"id": i, "contents": t, "vector": v}, ensure_ascii=False) + "\n"
                for i, t, v in zip(chunk_ids, texts, vectors)
            )
            out.write("".join(lines).encode("utf-8"))
            out.flush()
            os.fsync(out.fileno())
            state["vectors_bytes"] = out.tell()

        _encode_chunks(encoder, source, paths["state"], state, append, **reading)
    state["complete"] = True
    _write_state(paths["state"], state)


def _encode_chunks(
    encoder: OnnxEncoder,
    source: Path,
    state_path: Path,
    state: dict[str, Any],
    append: Callable[[list[str], list[str], Any], None],
    *,
    kind: str,
    fields: Sequence[str],
    id_fields: Sequence[str],
    passages: tuple[int, int] | None,
    separator: str,
    chunk_size: int,
    quiet: bool,
) -> None:
    """Encode the input from where ``state`` says the last run stopped, chunk by chunk:
    ``append(row ids, texts, vectors)`` writes a chunk's rows and syncs them (recording in ``state`` what
    it wrote), and only then does the state file record how far the input was read."""
    # Document ids (passage ids are derived from them) in 16 bytes each, whatever the corpus size.
    seen = SeenIds(source, id_fields)
    seen.add_input_before(state["offset"], chunk_size)

    progress = Progress(source.stat().st_size, quiet)
    truncated_before = encoder.truncated
    records = iter_jsonl_from(
        source,
        fields,
        id_fields,
        offset=state["offset"],
        line=state["line"],
        text_rule="first" if kind == "queries" else "join",
    )
    exhausted = False
    record_start = state["offset"]
    while not exhausted:
        chunk_ids: list[str] = []
        chunk_texts: list[str] = []
        record_ids: list[str] = []
        record_starts: list[int] = []
        record_lines: list[int] = []
        for positioned in records:
            rec = positioned.record
            record_ids.append(rec.id)
            record_starts.append(record_start)
            record_lines.append(positioned.line)
            record_start = positioned.end_offset
            if passages:
                for k, passage in enumerate(encoder.token_windows(rec.text, *passages)):
                    chunk_ids.append(f"{rec.id}{separator}{k}")
                    chunk_texts.append(passage)
            else:
                chunk_ids.append(rec.id)
                chunk_texts.append(rec.text)
            if len(record_ids) == chunk_size:
                break
        else:
            exhausted = True
        if not record_ids:
            break
        seen.add(record_ids, record_starts, record_lines)
        if kind == "queries":
            vectors = encoder.encode_queries(chunk_texts)
        else:
            vectors = encoder.encode_passages(chunk_texts)
        append(chunk_ids, chunk_texts, vectors)
        state["rows"] += len(chunk_ids)
        state["offset"], state["line"] = record_start, record_lines[-1]
        state["records"] += len(record_ids)
        state["truncated"] += encoder.truncated - truncated_before
        truncated_before = encoder.truncated
        _write_state(state_path, state)
        progress.update(state["offset"], state["rows"])
    progress.close()


def load_embeddings(prefix: PathLike) -> tuple[np.ndarray, list[str]]:
    """Memory-map ``PREFIX.npy`` and read ``PREFIX.ids.txt``; their row counts must agree."""
    paths = output_paths(prefix)
    matrix = np.load(paths["npy"], mmap_mode="r")
    ids = paths["ids"].read_text(encoding="utf-8").splitlines()
    if matrix.ndim != 2 or matrix.shape[0] != len(ids):
        raise IndexFormatError(
            f"{paths['npy']} has shape {matrix.shape} but {paths['ids']} lists {len(ids)} ids"
        )
    return matrix, ids
