"""Token-level (multi-vector) encoding with an ONNX model: one vector per token, as ColBERT scores them.

The model directory is the one :class:`clirkit.encoders.OnnxEncoder` takes; its output must be per token
(``(batch, sequence, hidden)``). Optional, in the same directory:

``projection.npy``
    A linear projection applied to every token vector, shaped ``(dim, hidden)`` as PyTorch stores a
    ``Linear(hidden, dim, bias=False)`` weight (ColBERT's ``linear`` layer), so a token becomes ``W @ h``.
a ``"colbert"`` object in ``config.json``
    ColBERT's conventions: ``query_marker`` / ``doc_marker`` (tokens inserted after ``[CLS]``, e.g.
    ``"[unused0]"`` / ``"[unused1]"`` for ColBERT's ``[Q]`` / ``[D]``), ``query_maxlen`` (queries are
    cut to it, then padded to it with ``[MASK]`` tokens whose outputs count: query augmentation; the
    mask tokens are attended only with ``attend_to_mask_tokens``), ``doc_maxlen`` and
    ``mask_punctuation`` (document tokens that are punctuation are not stored).

Every token vector is L2-normalized. Without the ``"colbert"`` object every non-padding token of the
input (special tokens included) is kept, for queries and documents alike.

Files written for a prefix ``PREFIX`` (documents, passages or queries alike):

``PREFIX.tokens.npy``
    ``(total tokens, dim)``, float32 or float16: every item's token vectors, item after item.
``PREFIX.offsets.npy``
    ``(items + 1,)`` int64: item ``i`` owns rows ``offsets[i]:offsets[i + 1]``; starts at 0, ends at
    the row count.
``PREFIX.ids.txt``
    one id per item (passages: ``docid#k``).

The three are written under temporary names while encoding (streamed chunk by chunk, the ``.npy``
headers written last) and renamed into place at the end, resumably: the state file and the resume rules
are :mod:`clirkit.encoders.resumable`'s.
"""

from __future__ import annotations

import hashlib
import string
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clirkit._native import IndexFormatError, InvalidInputError
from clirkit._types import PathLike
from clirkit.encoders import resumable
from clirkit.encoders.npy import HEADER_BYTES, id_lines, npy_shape_header
from clirkit.encoders.tokenization import length_batches

__all__ = ["TokenEncoder", "TokenFiles", "encode_tokens_file", "load_tokens", "token_paths"]


OFFSETS_DTYPE = np.dtype("<i8")


def token_paths(prefix: PathLike) -> dict[str, Path]:
    """The files of a token encoding: ``tokens``, ``offsets``, ``ids``."""
    return resumable.prefixed_paths(prefix, tokens=".tokens.npy", offsets=".offsets.npy", ids=".ids.txt")


def token_output_paths(prefix: PathLike) -> dict[str, Path]:
    """The files of a token encoding run: final, partial and state."""
    final = token_paths(prefix)
    partial = {f"{name}_partial": p.with_name(p.name + ".partial") for name, p in final.items()}
    return {**final, **partial, **resumable.prefixed_paths(prefix, state=".encode-state.json")}


class TokenEncoder:
    """Per-token vectors from an :class:`clirkit.encoders.OnnxEncoder` (see the module docstring)."""

    def __init__(self, encoder: Any) -> None:
        self.encoder = encoder
        tokenizer = encoder.tokenizer
        config = encoder.config.get("colbert") or {}
        if not isinstance(config, dict):
            raise InvalidInputError(f"{encoder.model_dir / 'config.json'}: 'colbert' must be an object")
        self.colbert = bool(config)

        def token_id(key: str) -> int | None:
            token = config.get(key)
            if token is None:
                return None
            found = tokenizer.token_to_id(token)
            if found is None:
                raise InvalidInputError(
                    f"{encoder.model_dir}: config.json colbert.{key} {token!r} is not in the vocabulary"
                )
            return int(found)

        self.query_marker = token_id("query_marker")
        self.doc_marker = token_id("doc_marker")
        self.query_maxlen = int(config.get("query_maxlen", encoder.max_length))
        self.doc_maxlen = int(config.get("doc_maxlen", encoder.max_length))
        self.attend_to_mask_tokens = bool(config.get("attend_to_mask_tokens", False))
        self.mask_id: int | None = None
        if "query_maxlen" in config:
            mask = tokenizer.token_to_id("[MASK]")
            if mask is None:
                raise InvalidInputError(f"{encoder.model_dir}: query augmentation needs a [MASK] token")
            self.mask_id = int(mask)
        self.skip: set[int] = set()
        if config.get("mask_punctuation"):
            for ch in string.punctuation:
                self.skip.update(tokenizer.encode(ch, add_special_tokens=False).ids)
        projection = encoder.model_dir / "projection.npy"
        self.projection: np.ndarray | None = None
        if projection.is_file():
            self.projection = np.ascontiguousarray(np.load(projection), dtype=np.float32)
            if self.projection.ndim != 2:
                raise InvalidInputError(f"{projection}: a projection must be a 2-D (dim, hidden) matrix")
        self.truncated = 0

    def encode_queries(self, texts: Sequence[str]) -> list[np.ndarray]:
        """One ``(tokens, dim)`` float32 matrix per query (with the query prefix and augmentation)."""
        return self._encode([self.encoder.query_prefix + t for t in texts], query=True)

    @property
    def model_dir(self) -> Path:
        return self.encoder.model_dir

    @property
    def dim(self) -> int:
        """Dimension of the stored token vectors (the projection's output, if any)."""
        return self.encoder.dim if self.projection is None else int(self.projection.shape[0])

    def fingerprint(self) -> str:
        """The model's fingerprint with every per-token setting (for resumable encoding)."""
        h = hashlib.sha256(b"multivector;" + self.encoder.fingerprint().encode())
        if self.projection is not None:
            h.update(self.projection.tobytes())
        return h.hexdigest()

    def token_windows(self, text: str, size: int, stride: int) -> list[str]:
        return self.encoder.token_windows(text, size, stride)

    def encode_passages(self, texts: Sequence[str]) -> list[np.ndarray]:
        """One ``(tokens, dim)`` float32 matrix per document or passage."""
        return self._encode([self.encoder.passage_prefix + t for t in texts], query=False)

    def _token_ids(self, text_ids: list[int], query: bool) -> tuple[list[int], list[int]]:
        """(input ids, attention mask) of one text: marker after [CLS], cut to the length limit keeping
        the final [SEP], queries padded with [MASK] to ``query_maxlen``."""
        marker = self.query_marker if query else self.doc_marker
        ids = list(text_ids)
        if marker is not None:
            ids.insert(1, marker)
        limit = self.query_maxlen if query else self.doc_maxlen
        if len(ids) > limit:
            self.truncated += 1
            ids = ids[: limit - 1] + ids[-1:]
        mask = [1] * len(ids)
        if query and self.mask_id is not None and len(ids) < limit:
            pad = limit - len(ids)
            ids += [self.mask_id] * pad
            mask += [1 if self.attend_to_mask_tokens else 0] * pad
        return ids, mask

    def _encode(self, texts: list[str], query: bool) -> list[np.ndarray]:
        enc = self.encoder
        encodings = enc.tokenizer.encode_batch(texts)
        self.truncated += sum(1 for e in encodings if e.overflowing)
        inputs = [self._token_ids(e.ids, query) for e in encodings]
        size = 1 if enc.one_text_per_call else enc.batch_size
        batches = [b.tolist() for b in length_batches([len(i[0]) for i in inputs], size, enc.batch_tokens)]
        out: list[np.ndarray] = [np.empty((0, 0), dtype=np.float32)] * len(texts)

        def run(batch: list[int]) -> None:
            width = len(inputs[batch[0]][0])
            ids = np.full((len(batch), width), enc.pad_id, dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                tids, tmask = inputs[i]
                ids[row, : len(tids)] = tids
                mask[row, : len(tmask)] = tmask
            hidden = enc.run_graph(ids, mask, "query" if query else "passage").astype(np.float32, copy=False)
            if hidden.ndim != 3:
                raise InvalidInputError(
                    f"{enc.model_dir / 'model.onnx'}: multi-vector encoding needs per-token outputs "
                    f"(batch, sequence, hidden); this model outputs shape {hidden.shape}"
                )
            for row, i in enumerate(batch):
                tids, tmask = inputs[i]
                # Queries keep every position (augmentation tokens count); documents their real tokens.
                keep = [p for p, t in enumerate(tids) if query or (tmask[p] and t not in self.skip)]
                out[i] = self._finish(hidden[row, keep])

        if enc.workers > 1 and len(batches) > 1:
            with ThreadPoolExecutor(min(enc.workers, len(batches))) as pool:
                list(pool.map(run, batches))
        else:
            for batch in batches:
                run(batch)
        return out

    def _finish(self, tokens: np.ndarray) -> np.ndarray:
        if self.projection is not None:
            if self.projection.shape[1] != tokens.shape[1]:
                raise InvalidInputError(
                    f"projection.npy has shape {self.projection.shape}, the model's tokens have "
                    f"{tokens.shape[1]} dimensions (expected (dim, {tokens.shape[1]}))"
                )
            tokens = tokens @ self.projection.T
        norms = np.linalg.norm(tokens, axis=1, keepdims=True)
        return np.ascontiguousarray(tokens / np.maximum(norms, 1e-12), dtype=np.float32)


@dataclass
class TokenFiles:
    """What :func:`encode_tokens_file` wrote."""

    tokens_path: Path
    offsets_path: Path
    ids_path: Path
    items: int
    tokens: int
    dim: int
    records: int
    truncated: int
    resumed_items: int
    seconds: float


def encode_tokens_file(
    encoder: Any,
    path: PathLike,
    prefix: PathLike,
    *,
    kind: str = "passages",
    fields: Sequence[str] | None = None,
    id_fields: Sequence[str] | None = None,
    passages: tuple[int, int] | None = None,
    separator: str = "#",
    dtype: str = "float32",
    chunk_size: int = 1000,
    restart: bool = False,
    quiet: bool = False,
) -> TokenFiles:
    """Encode a JSONL corpus (``kind="passages"``: documents, or their ``passages=(size, stride)``
    windows) or query file (``"queries"``) with a :class:`TokenEncoder` (or an ``OnnxEncoder``, wrapped)
    into the files of :func:`token_paths`, ``chunk_size`` records at a time.

    Resumable as :func:`clirkit.encoders.encode_file` (the same state file, ``PREFIX.encode-state.json``):
    a run killed at any point and started again with the same encoder and settings continues after the
    last chunk it synced and writes the same bytes as an uninterrupted run."""
    resumable.check_dtype(dtype)
    reading = resumable.reading_options(kind, fields, id_fields, passages, separator, chunk_size, quiet)
    source = resumable.existing_file(path)
    token_encoder = encoder if isinstance(encoder, TokenEncoder) else TokenEncoder(encoder)
    paths = token_output_paths(prefix)
    np_dtype = np.dtype(dtype).newbyteorder("<")
    dim = token_encoder.dim

    def create_partials() -> None:
        with open(paths["tokens_partial"], "wb") as f:
            f.write(npy_shape_header(np_dtype, (0, dim)))
        with open(paths["offsets_partial"], "wb") as f:
            f.write(npy_shape_header(OFFSETS_DTYPE, (1,)) + np.zeros(1, dtype=OFFSETS_DTYPE).tobytes())
        paths["ids_partial"].write_bytes(b"")

    def encode_remaining(state: dict[str, Any]) -> None:
        """Append the rest of the input to the partial token matrix, offsets and ids; finally write
        the shapes into the ``.npy`` headers and mark the state complete."""
        recorded = {
            "tokens_partial": HEADER_BYTES + state["tokens"] * dim * np_dtype.itemsize,
            "offsets_partial": HEADER_BYTES + (state["rows"] + 1) * OFFSETS_DTYPE.itemsize,
            "ids_partial": state["ids_bytes"],
        }
        with resumable.reopened_partials(paths, recorded) as files:
            data, offsets_out, ids_out = files

            def append(chunk_ids: list[str], texts: list[str], matrices: list[np.ndarray]) -> None:
                ends, end = [], state["tokens"]
                for item_id, m in zip(chunk_ids, matrices):
                    if len(m) == 0:
                        raise InvalidInputError(f"{source}: {item_id!r} has no tokens left to store")
                    if m.shape[1] != dim:
                        raise InvalidInputError(
                            f"{source}: {item_id!r} has {m.shape[1]}-dimensional tokens, expected {dim}"
                        )
                    data.write(np.ascontiguousarray(m, dtype=np_dtype).tobytes())
                    end += len(m)
                    ends.append(end)
                offsets_out.write(np.asarray(ends, dtype=OFFSETS_DTYPE).tobytes())
                ids_out.write(id_lines(chunk_ids))
                resumable.sync(*files)
                state["tokens"] = end
                state["ids_bytes"] = ids_out.tell()

            resumable.encode_chunks(token_encoder, source, paths["state"], state, append, **reading)
            data.seek(0)
            data.write(npy_shape_header(np_dtype, (state["tokens"], dim)))
            offsets_out.seek(0)
            offsets_out.write(npy_shape_header(OFFSETS_DTYPE, (state["rows"] + 1,)))
            resumable.sync(data, offsets_out)
        resumable.mark_complete(paths, state)

    counts = resumable.encode_resumably(
        paths,
        ("tokens", "offsets", "ids"),
        resumable.expected_state(token_encoder, source, reading, dtype),
        {"dim": dim, "tokens": 0, "ids_bytes": 0},
        create_partials,
        encode_remaining,
        restart,
    )
    return TokenFiles(
        paths["tokens"],
        paths["offsets"],
        paths["ids"],
        items=counts["rows"],
        tokens=int(np.load(paths["offsets"], mmap_mode="r")[-1]),
        dim=dim,
        records=counts["records"],
        truncated=counts["truncated"],
        resumed_items=counts["resumed_rows"],
        seconds=counts["seconds"],
    )


def load_tokens(prefix: PathLike) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(tokens float32 (rows, dim), offsets uint64 (items + 1,), ids) of ``prefix``; the token
    files are read (never mapped; gzip-compressed or not) and the ids checked by the one id rule. The
    offsets are checked when an index is built or searched; here only the id count against them."""
    tokens = load_token_matrix(token_paths(prefix)["tokens"])
    offsets, ids = token_items(prefix)
    return tokens, offsets, ids


def load_token_matrix(path: PathLike) -> np.ndarray:
    """A token vectors file ``PREFIX.tokens.npy`` read whole (gzip-compressed or not) as a float32
    ``(tokens, dim)`` matrix."""
    from clirkit.dense.vectors import load_npy

    tokens = load_npy(path)
    if tokens.ndim != 2:
        raise IndexFormatError(f"{path}: expected a 2-D (tokens, dim) matrix, got shape {tokens.shape}")
    return tokens if tokens.dtype == np.float32 else np.asarray(tokens, dtype=np.float32)


def token_items(prefix: PathLike) -> tuple[np.ndarray, list[str]]:
    """(offsets uint64 (items + 1,), ids) of the token files ``prefix``, as :func:`load_tokens` reads
    them, without the token vectors."""
    from clirkit.dense.vectors import load_npy, read_ids

    paths = token_paths(prefix)
    offsets = load_npy(paths["offsets"])
    if offsets.ndim != 1 or not np.issubdtype(offsets.dtype, np.integer) or (offsets < 0).any():
        raise IndexFormatError(f"{paths['offsets']}: expected a 1-D array of non-negative integer offsets")
    ids = read_ids(paths["ids"])
    if len(ids) != len(offsets) - 1:
        raise IndexFormatError(
            f"{paths['ids']} lists {len(ids)} ids but {paths['offsets']} has {len(offsets)} offsets "
            f"(one more than items)"
        )
    return np.ascontiguousarray(offsets, dtype=np.uint64), ids
