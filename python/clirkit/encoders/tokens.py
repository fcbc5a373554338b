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

The three are written under temporary names while encoding (the token matrix streamed chunk by chunk,
its ``.npy`` header written last) and renamed into place at the end, the ids file last.
"""

from __future__ import annotations

import os
import string
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clirkit._native import DuplicateIdError, IndexFormatError, InvalidInputError
from clirkit._types import PathLike
from clirkit.datasets import CORPUS_FIELDS, ID_FIELDS, QUERY_FIELDS, QUERY_ID_FIELDS, iter_jsonl
from clirkit.encoders.corpus import HEADER_BYTES, npy_header, prefixed_paths

__all__ = ["TokenEncoder", "TokenFiles", "encode_tokens_file", "load_tokens", "token_paths"]


def token_paths(prefix: PathLike) -> dict[str, Path]:
    """The files of a token encoding: ``tokens``, ``offsets``, ``ids``."""
    return prefixed_paths(prefix, tokens=".tokens.npy", offsets=".offsets.npy", ids=".ids.txt")


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

    def encode_documents(self, texts: Sequence[str]) -> list[np.ndarray]:
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
        order = sorted(range(len(inputs)), key=lambda i: -len(inputs[i][0]))
        batches = [order[s : s + size] for s in range(0, len(order), size)]
        out: list[np.ndarray] = [np.empty((0, 0), dtype=np.float32)] * len(texts)

        def run(batch: list[int]) -> None:
            width = len(inputs[batch[0]][0])
            ids = np.full((len(batch), width), enc.pad_id, dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                tids, tmask = inputs[i]
                ids[row, : len(tids)] = tids
                mask[row, : len(tmask)] = tmask
            hidden = enc._run(ids, mask).astype(np.float32, copy=False)
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
    seconds: float


def _items(
    encoder: Any,
    path: PathLike,
    query: bool,
    fields: Sequence[str] | None,
    passages: tuple[int, int] | None,
    separator: str,
) -> Iterator[tuple[str, str, bool]]:
    """(item id, text, first item of its record) for every query, document or passage."""
    records = iter_jsonl(
        path,
        tuple(fields) if fields else (QUERY_FIELDS if query else CORPUS_FIELDS),
        QUERY_ID_FIELDS if query else ID_FIELDS,
        text_rule="first" if query else "join",
    )
    for rec in records:
        if passages and not query:
            for k, passage in enumerate(encoder.token_windows(rec.text, *passages)):
                yield f"{rec.id}{separator}{k}", passage, k == 0
        else:
            yield rec.id, rec.text, True


def encode_tokens_file(
    encoder: Any,
    path: PathLike,
    prefix: PathLike,
    *,
    kind: str = "documents",
    fields: Sequence[str] | None = None,
    passages: tuple[int, int] | None = None,
    separator: str = "#",
    dtype: str = "float32",
    chunk_size: int = 1000,
) -> TokenFiles:
    """Encode a JSONL corpus (``kind="documents"``) or query file (``"queries"``) with a
    :class:`TokenEncoder` (or an ``OnnxEncoder``, wrapped) into the files of :func:`token_paths`,
    ``chunk_size`` items at a time."""
    if kind not in ("documents", "queries"):
        raise InvalidInputError(f"kind must be 'documents' or 'queries', got {kind!r}")
    if dtype not in ("float32", "float16"):
        raise InvalidInputError(f"dtype must be float32 or float16, got {dtype!r}")
    start = time.perf_counter()
    token_encoder = encoder if isinstance(encoder, TokenEncoder) else TokenEncoder(encoder)
    query = kind == "queries"
    np_dtype = np.dtype(dtype)
    final = token_paths(prefix)
    partial = {name: p.with_name(p.name + ".partial") for name, p in final.items()}
    final["tokens"].parent.mkdir(parents=True, exist_ok=True)
    offsets = [0]
    records = 0
    seen: set[str] = set()
    dim = 0
    with open(partial["tokens"], "wb") as data, open(partial["ids"], "w", encoding="utf-8") as ids_out:
        data.write(b"\0" * HEADER_BYTES)
        items = _items(token_encoder.encoder, path, query, fields, passages, separator)
        done = False
        while not done:
            chunk: list[tuple[str, str]] = []
            for item_id, text, first in items:
                if first:
                    records += 1
                if item_id in seen:
                    raise DuplicateIdError(f"{path}: duplicate id {item_id!r}")
                seen.add(item_id)
                chunk.append((item_id, text))
                if len(chunk) == chunk_size:
                    break
            else:
                done = True
            if not chunk:
                break
            texts = [t for _, t in chunk]
            matrices = token_encoder.encode_queries(texts) if query else token_encoder.encode_documents(texts)
            for (item_id, _), m in zip(chunk, matrices):
                if len(m) == 0:
                    raise InvalidInputError(f"{path}: {item_id!r} has no tokens left to store")
                dim = m.shape[1]
                data.write(np.ascontiguousarray(m, dtype=np_dtype).tobytes())
                offsets.append(offsets[-1] + len(m))
                ids_out.write(item_id + "\n")
        data.seek(0)
        data.write(npy_header(np_dtype, offsets[-1], dim))
        for f in (data, ids_out):
            f.flush()
            os.fsync(f.fileno())
    np.save(partial["offsets"], np.asarray(offsets, dtype=np.int64), allow_pickle=False)
    # np.save appends ".npy" to a name without it.
    saved = partial["offsets"].with_name(partial["offsets"].name + ".npy")
    if saved.exists():
        saved.replace(partial["offsets"])
    for name in ("tokens", "offsets", "ids"):
        partial[name].replace(final[name])
    return TokenFiles(
        final["tokens"],
        final["offsets"],
        final["ids"],
        items=len(offsets) - 1,
        tokens=offsets[-1],
        dim=dim,
        records=records,
        truncated=token_encoder.truncated,
        seconds=time.perf_counter() - start,
    )


def load_tokens(prefix: PathLike) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(tokens float32 (rows, dim), offsets uint64 (items + 1,), ids) of ``prefix``; the token
    matrix is memory-mapped when stored as float32. The offsets are checked when an index is built or
    searched; here only the id count against them."""
    paths = token_paths(prefix)
    tokens = np.load(paths["tokens"], mmap_mode="r")
    if tokens.ndim != 2:
        raise IndexFormatError(
            f"{paths['tokens']}: expected a 2-D (tokens, dim) matrix, got shape {tokens.shape}"
        )
    if tokens.dtype != np.float32:
        tokens = np.asarray(tokens, dtype=np.float32)
    offsets = np.load(paths["offsets"])
    if offsets.ndim != 1 or not np.issubdtype(offsets.dtype, np.integer) or (offsets < 0).any():
        raise IndexFormatError(f"{paths['offsets']}: expected a 1-D array of non-negative integer offsets")
    ids = paths["ids"].read_text(encoding="utf-8").splitlines()
    if len(ids) != len(offsets) - 1:
        raise IndexFormatError(
            f"{paths['ids']} lists {len(ids)} ids but {paths['offsets']} has {len(offsets)} offsets "
            f"(one more than items)"
        )
    return tokens, np.ascontiguousarray(offsets, dtype=np.uint64), ids
