"""Resumable encoding of a JSONL file, shared by the dense (:mod:`.corpus`), sparse (:mod:`.corpus`) and
token (:mod:`.tokens`) drivers, and the settings identity the Ray driver (:mod:`clirkit.distributed.encode`)
records.

The input is read in chunks. Each chunk is encoded and appended to the driver's partial outputs
(``NAME.partial`` beside each final file); after every chunk they are synced to disk and only then does
``PREFIX.encode-state.json`` record how far the input was read, so a process killed at any point leaves a
state that its files back up. An interrupted run started again with the same model and settings drops
whatever the killed run wrote after its last recorded chunk and continues from there; a different model or
different settings are refused. When all is done the state is marked complete before the partial files are
renamed into place (several renames cannot be one atomic step): a run killed between them finishes the
renames when started again instead of encoding anything, so the outputs always belong together and an
existing final output is always complete.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, Any, Callable

from clirkit._atomic import fsync_directory, write_json_atomic
from clirkit._native import IndexFormatError, InvalidInputError
from clirkit._progress import ProgressBar
from clirkit._types import PathLike
from clirkit.datasets import CORPUS_FIELDS, ID_FIELDS, QUERY_FIELDS, QUERY_ID_FIELDS, iter_jsonl_from
from clirkit.encoders.seen_ids import SeenIds

__all__ = [
    "DTYPES",
    "KINDS",
    "STATE_FORMAT",
    "STATE_VERSION",
    "check_dtype",
    "encode_chunks",
    "encode_resumably",
    "encoder_settings",
    "existing_file",
    "expected_state",
    "input_identity",
    "mark_complete",
    "prefixed_paths",
    "reading_options",
    "reopened_partials",
    "sync",
    "write_state",
]

STATE_FORMAT = "clirkit-encode-state"
STATE_VERSION = 1
DTYPES = ("float32", "float16")
KINDS = ("passages", "queries")


def prefixed_paths(prefix: PathLike, **suffixes: str) -> dict[str, Path]:
    """``{name: PREFIX + suffix}``: every encoding output is named by its prefix and a suffix."""
    p = os.fspath(prefix)
    return {name: Path(p + suffix) for name, suffix in suffixes.items()}


def encoder_settings(
    encoder: Any,
    kind: str,
    fields: Sequence[str],
    passages: tuple[int, int] | None,
    separator: str,
    dtype: str,
) -> dict[str, Any]:
    """What identifies an encoding's settings in its state: the encoder's fingerprint and model
    directory, what is read, how passages are cut, the storage type."""
    return {
        "encoder": encoder.fingerprint(),
        "model_dir": str(encoder.model_dir.resolve()),
        "kind": kind,
        "fields": list(fields),
        "passages": list(passages) if passages else None,
        "separator": separator,
        "dtype": dtype,
    }


def input_identity(path: Path) -> dict[str, Any]:
    """What identifies the input file in a state: its resolved path, size and modification time."""
    st = path.stat()
    return {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def write_state(path: Path, state: dict[str, Any]) -> None:
    """Write a state file whole (:mod:`clirkit._atomic`)."""
    write_json_atomic(path, state, indent=1)


def check_dtype(dtype: str) -> None:
    if dtype not in DTYPES:
        raise InvalidInputError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")


def reading_options(
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


def existing_file(input_path: PathLike) -> Path:
    source = Path(input_path)
    if not source.is_file():
        raise FileNotFoundError(f"{source}: no such file")
    return source


def expected_state(encoder: Any, source: Path, reading: dict[str, Any], dtype: str) -> dict[str, Any]:
    """What a resumable state must match: the encoder and settings, and the input file."""
    return {
        "settings": encoder_settings(
            encoder, reading["kind"], reading["fields"], reading["passages"], reading["separator"], dtype
        ),
        "input": input_identity(source),
    }


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


@contextmanager
def reopened_partials(paths: dict[str, Path], recorded_sizes: dict[str, int]) -> Iterator[list[IO[bytes]]]:
    """The partial files named by ``recorded_sizes`` (keys of ``paths``, in that order), opened for
    appending after the bytes the state records as synced: shorter files are refused (see
    :func:`_check_partial_sizes`), whatever a crash left after the last completed chunk is dropped."""
    _check_partial_sizes(paths, recorded_sizes)
    with ExitStack() as stack:
        files = [stack.enter_context(open(paths[key], "r+b")) for key in recorded_sizes]
        for f, size in zip(files, recorded_sizes.values()):
            f.truncate(size)
            f.seek(0, os.SEEK_END)
        yield files


def sync(*files: IO[bytes]) -> None:
    """Flush ``files`` and make their contents durable."""
    for f in files:
        f.flush()
        os.fsync(f.fileno())


def mark_complete(paths: dict[str, Path], state: dict[str, Any]) -> None:
    """Record that every output is whole: from here a rerun only finishes the renames."""
    state["complete"] = True
    write_state(paths["state"], state)


def _move_into_place(paths: dict[str, Path], outputs: Sequence[str]) -> None:
    """Rename the completed partial files to their final names (each only if not done already: a run
    killed between two renames is finished by the next), then drop the state."""
    for name in outputs:
        if paths[f"{name}_partial"].exists():
            os.replace(paths[f"{name}_partial"], paths[name])
    fsync_directory(paths["state"].parent)
    paths["state"].unlink()


def encode_resumably(
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
    written so far, put in the state); ``encode_remaining(state)`` encodes what is left and marks the
    state complete; then the ``outputs`` are moved into place. Returns the counts of an encoding result."""
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
        write_state(paths["state"], state)
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


def encode_chunks(
    encoder: Any,
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

    # Counted in KiB of the input read (records have no known total), the rows written as a note.
    progress = ProgressBar(-(-source.stat().st_size // 1024), "encoding", "KiB", enabled=not quiet)
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
        write_state(state_path, state)
        progress.update(state["offset"] // 1024, f"{state['rows']:,} rows")
    progress.close()
