"""Distributed dense encoding with Ray Data: a JSONL corpus cut into shards of whole lines, read by
Ray tasks, encoded by a pool of actors each holding one ONNX session (the encoder ``clirkit encode``
uses, so the vectors are the same), written as one ``shard-NNNN.npy`` + ``shard-NNNN.ids.txt`` per
shard: what ``clirkit index dense`` (one shard) and the sharded builder (all of them) read.

Ray Data does not keep input order, so each row carries its shard, its position in the shard and
its id; a shard is written, in input order, as soon as all its rows are back, and recorded done in
``encode.json``: a rerun with the same settings encodes only the shards not done.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clirkit import _native
from clirkit._atomic import write_bytes_atomic
from clirkit._native import IndexFormatError, InvalidInputError
from clirkit._types import PathLike
from clirkit.datasets import BOM, CORPUS_FIELDS, ID_FIELDS, QUERY_FIELDS, QUERY_ID_FIELDS, parse_line
from clirkit.distributed.cluster import cluster_cpus, require_ray
from clirkit.encoders.npy import id_lines, npy_header
from clirkit.encoders.resumable import encoder_settings, input_identity, write_state

__all__ = ["EncodedShards", "encode_shards", "encoded_shard_files", "shard_files"]

STATE = "encode.json"
STATE_FORMAT = "clirkit-encoded-shards"
STATE_VERSION = 1


def shard_files(out_dir: PathLike, shard: int) -> tuple[Path, Path]:
    """The ``.npy`` and ids file of shard ``shard`` of an encoding directory."""
    stem = Path(out_dir) / f"shard-{shard:04d}"
    return stem.with_suffix(".npy"), stem.with_suffix(".ids.txt")


@dataclass
class EncodedShards:
    """What :func:`encode_shards` did: shards written now and found done before, rows, time."""

    out_dir: Path
    shards: int
    encoded: list[int]
    skipped: list[int]
    rows: int
    seconds: float

    def files(self) -> list[tuple[Path, Path]]:
        return [shard_files(self.out_dir, s) for s in range(self.shards)]


def _lines(corpus: str, start: int, end: int, line: int) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) of the non-blank lines starting in bytes ``start..end`` of ``corpus``,
    whose first line is line ``line + 1``."""
    with open(corpus, "rb") as f:
        f.seek(start)
        at = start
        for raw in f:
            if at >= end:
                break
            at += len(raw)
            line += 1
            if line == 1 and raw.startswith(BOM):
                raw = raw[len(BOM) :]
            if raw.strip():
                yield line, raw


def _read_range(
    corpus: str, start: int, end: int, line: int, fields: Sequence[str], id_fields: Sequence[str], rule: str
) -> Iterator[tuple[str, str]]:
    """(id, text) of the records whose lines start in bytes ``start..end`` of ``corpus``."""
    for number, raw in _lines(corpus, start, end, line):
        record = parse_line(corpus, number, raw, fields, id_fields, "lang", rule)
        yield record.id, record.text


class _ReadShard:
    """Ray Data ``flat_map``: a shard's byte range to one row per record (shard, position, id, text)."""

    def __init__(self, corpus: str, fields: Sequence[str], id_fields: Sequence[str], rule: str) -> None:
        self.args = (corpus, fields, id_fields, rule)

    def __call__(self, spec: dict[str, Any]) -> list[dict[str, Any]]:
        corpus, fields, id_fields, rule = self.args
        records = _read_range(corpus, spec["start"], spec["end"], spec["line"], fields, id_fields, rule)
        return [
            {"shard": spec["shard"], "pos": pos, "id": doc_id, "text": text}
            for pos, (doc_id, text) in enumerate(records)
        ]


class _EncodeBatch:
    """Ray Data ``map_batches`` actor: one ONNX session, texts in, vectors out, ids alongside."""

    def __init__(self, model: str, kind: str, options: dict[str, Any]) -> None:
        from clirkit.encoders import OnnxEncoder

        self.encoder = OnnxEncoder(model, **options)
        self.kind = kind

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        texts = [str(t) for t in batch["text"]]
        if self.kind == "queries":
            vectors = self.encoder.encode_queries(texts)
        else:
            vectors = self.encoder.encode_passages(texts)
        return {"shard": batch["shard"], "pos": batch["pos"], "id": batch["id"], "vector": vectors}


def _count_records(corpus: str, start: int, end: int, line: int) -> int:
    """Records starting in bytes ``start..end``: how many rows the shard gets."""
    return sum(1 for _ in _lines(corpus, start, end, line))


def _write_shard(out_dir: Path, shard: int, ids: list[str], vectors: np.ndarray, dtype: np.dtype) -> None:
    """Write one shard's ``.npy`` and ids atomically (each beside, then renamed)."""
    npy, ids_path = shard_files(out_dir, shard)
    rows = np.ascontiguousarray(vectors, dtype=dtype)
    write_bytes_atomic(npy, npy_header(dtype, rows.shape[0], rows.shape[1]) + rows.tobytes())
    write_bytes_atomic(ids_path, id_lines(ids))


def _plan(
    corpus: Path, out_dir: Path, shards: int, expected: dict[str, Any], restart: bool
) -> dict[str, Any]:
    """The saved state when it matches ``expected`` (settings and input), else a fresh one."""
    state_path = out_dir / STATE
    if state_path.exists() and not restart:
        try:
            state = json.loads(state_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise IndexFormatError(f"{state_path}: unreadable ({err}); delete it to start over") from None
        if state.get("format") != STATE_FORMAT or state.get("version") != STATE_VERSION:
            raise IndexFormatError(f"{state_path}: not a clirkit sharded encoding of version {STATE_VERSION}")
        for key in ("settings", "input"):
            if state.get(key) != expected[key]:
                raise InvalidInputError(
                    f"{state_path}: shards encoded with a different {key} are there; use the same "
                    f"{key}, or restart (--restart / restart=True) to encode every shard again"
                )
        if len(state["shards"]) != shards:
            raise InvalidInputError(
                f"{state_path}: the encoding there has {len(state['shards'])} shards, not {shards}; "
                "use the same number, or restart"
            )
        return state
    ranges = _native.split_corpus(corpus, shards)
    return {
        "format": STATE_FORMAT,
        "version": STATE_VERSION,
        **expected,
        "shards": [
            {"start": start, "end": end, "line": first_line - 1, "rows": None, "done": False}
            for start, end, first_line in ranges
        ],
    }


def _is_done(out_dir: Path, shard: int, record: dict[str, Any]) -> bool:
    """Recorded done, and both files there with the recorded rows (a removed file re-encodes it)."""
    if not record["done"]:
        return False
    npy, ids = shard_files(out_dir, shard)
    if not (npy.is_file() and ids.is_file()):
        return False
    return bool(np.load(npy, mmap_mode="r").shape[0] == record["rows"])


def encode_shards(
    model: PathLike,
    corpus: PathLike,
    out_dir: PathLike,
    *,
    shards: int,
    kind: str = "passages",
    fields: Sequence[str] | None = None,
    id_fields: Sequence[str] | None = None,
    dtype: str = "float32",
    encoder_options: dict[str, Any] | None = None,
    actors: int | None = None,
    restart: bool = False,
) -> EncodedShards:
    """Encode ``corpus`` with the ONNX model ``model`` into ``shards`` embedding shards in ``out_dir``
    with Ray Data, on the Ray cluster this process is connected to (``ray.init`` or
    :func:`clirkit.distributed.cluster.connected`). ``encoder_options`` are those of
    :class:`clirkit.encoders.OnnxEncoder` (``batch_size`` is also Ray Data's batch); ``actors``
    sessions run at once (default: one per GPU, else one per two CPUs, at least one), each asking
    for a GPU when the cluster has them, else for a fraction of a CPU so that read tasks still run."""
    import time

    from clirkit.encoders import OnnxEncoder

    ray = require_ray()
    if not ray.is_initialized():
        raise InvalidInputError("connect to a Ray cluster first (clirkit.distributed.cluster.connected)")
    started = time.monotonic()
    if kind not in ("passages", "queries"):
        raise InvalidInputError(f"kind must be passages or queries, got {kind!r}")
    queries = kind == "queries"
    fields = tuple(fields) if fields else (QUERY_FIELDS if queries else CORPUS_FIELDS)
    id_fields = tuple(id_fields) if id_fields else (QUERY_ID_FIELDS if queries else ID_FIELDS)
    rule = "first" if queries else "join"
    source = Path(corpus)
    if not source.is_file():
        raise FileNotFoundError(f"{source}: no such file")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    options = dict(encoder_options or {})
    gpus = int(ray.cluster_resources().get("GPU", 0))
    cpus = cluster_cpus(ray)
    pool = actors or (gpus if gpus else max(1, int(cpus) // 2))
    per_actor_threads = max(1, int(cpus) // pool) if not gpus else 1
    options.setdefault("threads", per_actor_threads)
    if gpus:
        options.setdefault("device", "cuda")
    # The driver's encoder only names the settings (the fingerprint clirkit encode records).
    probe = OnnxEncoder(model, **{**options, "device": "cpu", "threads": 1})
    np_dtype = np.dtype(dtype).newbyteorder("<")
    expected = {
        "settings": encoder_settings(probe, kind, fields, None, "#", dtype),
        "input": input_identity(source),
    }
    del probe
    state = _plan(source, out, shards, expected, restart)
    todo = [s for s, rec in enumerate(state["shards"]) if not _is_done(out, s, rec)]
    skipped = [s for s in range(shards) if s not in todo]
    for s in todo:
        rec = state["shards"][s]
        rec["rows"] = _count_records(str(source), rec["start"], rec["end"], rec["line"])
        rec["done"] = False
    write_state(out / STATE, state)
    pending = {s: state["shards"][s]["rows"] for s in todo}
    got: dict[int, tuple[list[int], list[str], list[np.ndarray]]] = {s: ([], [], []) for s in todo}
    for s in [s for s in todo if pending[s] == 0]:
        _finish(out, state, s, [], np.zeros((0, _dim(model, options)), np.float32), np_dtype)
        pending.pop(s)
    if pending:
        specs = [
            {"shard": s, **{k: state["shards"][s][k] for k in ("start", "end", "line")}} for s in pending
        ]
        ds = ray.data.from_items(specs, override_num_blocks=len(specs))
        ds = ds.flat_map(_ReadShard(str(source), fields, id_fields, rule))
        compute = {"num_gpus": 1} if gpus else {"num_cpus": min(1.0, cpus / (pool + 1))}
        ds = ds.map_batches(
            _EncodeBatch,
            fn_constructor_args=(str(model), kind, options),
            batch_size=int(options.get("batch_size", 32)),
            batch_format="numpy",
            concurrency=pool,
            **compute,
        )
        for batch in ds.iter_batches(batch_format="numpy", batch_size=None):
            for i, s in enumerate(batch["shard"].tolist()):
                positions, ids, vectors = got[s]
                positions.append(int(batch["pos"][i]))
                ids.append(str(batch["id"][i]))
                vectors.append(batch["vector"][i])
                if len(positions) == pending[s]:
                    order = np.argsort(positions, kind="stable")
                    _finish(out, state, s, [ids[j] for j in order], np.stack(vectors)[order], np_dtype)
                    got[s] = ([], [], [])
    rows = sum(int(r["rows"] or 0) for r in state["shards"])
    return EncodedShards(out, shards, todo, skipped, rows, time.monotonic() - started)


def _dim(model: PathLike, options: dict[str, Any]) -> int:
    from clirkit.encoders import OnnxEncoder

    return int(OnnxEncoder(model, **{**options, "device": "cpu", "threads": 1}).dim)


def _finish(
    out: Path,
    state: dict[str, Any],
    shard: int,
    ids: list[str],
    vectors: np.ndarray,
    dtype: np.dtype,
) -> None:
    """Write shard ``shard`` and record it done."""
    _write_shard(out, shard, ids, vectors, dtype)
    state["shards"][shard]["done"] = True
    write_state(out / STATE, state)


def encoded_shard_files(out_dir: PathLike) -> list[tuple[Path, Path]]:
    """The (``.npy``, ids) files of every shard of a finished sharded encoding, in order."""
    path = Path(out_dir) / STATE
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise IndexFormatError(f"{path}: not a sharded encoding ({err})") from None
    if state.get("format") != STATE_FORMAT:
        raise IndexFormatError(f"{path}: not a clirkit sharded encoding")
    unfinished = [s for s, rec in enumerate(state["shards"]) if not _is_done(Path(out_dir), s, rec)]
    if unfinished:
        raise InvalidInputError(
            f"{out_dir}: shards {', '.join(map(str, unfinished))} are not encoded yet; rerun the encoding"
        )
    return [shard_files(out_dir, s) for s in range(len(state["shards"]))]
