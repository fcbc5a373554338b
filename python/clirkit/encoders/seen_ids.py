"""Exact duplicate-id detection for streamed JSONL input in 16 bytes per id.

A 10M-document corpus cannot keep every id string in a Python set (about 100 bytes each). :class:`SeenIds`
keeps a 64-bit hash of each id and the byte offset where its record starts, in a few sorted numpy runs (a
new run is merged into the one before it once it is as large, so there are at most log2(n) runs and each
id is merged log2(n) times). A hash already seen is only a candidate: the earlier record is read again
from the input and the real ids are compared, so a hash collision never reports a false duplicate and
every true duplicate is found.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Callable

import numpy as np

from clirkit._native import DuplicateIdError
from clirkit.datasets import ID_FIELDS, PositionedRecord, iter_jsonl_from

HASH_MASK = (1 << 64) - 1
LINE_COUNT_BLOCK = 1 << 20


def _count_newlines(path: Path, end: int) -> int:
    """Newlines in the first ``end`` bytes of ``path`` (only on the error path: it reads the prefix)."""
    count = 0
    with open(path, "rb") as f:
        while end > 0:
            block = f.read(min(end, LINE_COUNT_BLOCK))
            if not block:
                break
            count += block.count(b"\n")
            end -= len(block)
    return count


class SeenIds:
    """The ids of the records read so far from ``source``; :meth:`add` raises on a repeated id.

    ``hash_id`` maps an id to an integer (Python's string hash by default: the runs live only as long as
    the process; tests inject a colliding one).
    """

    def __init__(
        self,
        source: Path,
        id_fields: Sequence[str] = ID_FIELDS,
        hash_id: Callable[[str], int] = hash,
    ) -> None:
        self.source = source
        self.id_fields = tuple(id_fields)
        self.hash_id = hash_id
        # Sorted hashes (uint64) with the start offsets (int64) of their records, largest run first.
        self._runs: list[tuple[np.ndarray, np.ndarray]] = []

    def __len__(self) -> int:
        return sum(len(hashes) for hashes, _ in self._runs)

    def add_input_before(self, end_offset: int, batch: int) -> None:
        """Record every id of ``source`` up to byte ``end_offset`` (a resumed run re-reads what it had
        seen: ids only, in batches of ``batch`` records)."""
        ids: list[str] = []
        starts: list[int] = []
        lines: list[int] = []
        start = 0
        for positioned in iter_jsonl_from(self.source, (), self.id_fields):
            if positioned.end_offset > end_offset:
                break
            ids.append(positioned.record.id)
            starts.append(start)
            lines.append(positioned.line)
            start = positioned.end_offset
            if len(ids) == batch:
                self.add(ids, starts, lines)
                ids, starts, lines = [], [], []
        self.add(ids, starts, lines)

    def add(self, ids: Sequence[str], starts: Sequence[int], lines: Sequence[int]) -> None:
        """Record a batch of consecutive records: their ids, the offsets where each record's text starts
        (the end of the record before it; blank lines between are skipped when it is read again) and their
        line numbers. :class:`DuplicateIdError` names the first repeated id in file order, with both lines."""
        if not ids:
            return
        hashes = np.fromiter((self.hash_id(i) & HASH_MASK for i in ids), dtype=np.uint64, count=len(ids))
        # Batch position of a repeated id -> where it was first seen: an earlier batch's record start, or a
        # line of this batch (a batch is one chunk, so a plain dict of its ids stays small).
        first_start: dict[int, int] = {}
        for run_hashes, run_starts in self._runs:
            lo = np.searchsorted(run_hashes, hashes, side="left")
            hi = np.searchsorted(run_hashes, hashes, side="right")
            for pos in np.flatnonzero(hi > lo):
                for j in range(lo[pos], hi[pos]):
                    if self._record_at(int(run_starts[j])).record.id == ids[pos]:
                        first_start[int(pos)] = int(run_starts[j])
        first_line: dict[int, int] = {}
        in_batch: dict[str, int] = {}
        for pos, doc_id in enumerate(ids):
            if doc_id in in_batch:
                first_line[pos] = lines[in_batch[doc_id]]
            else:
                in_batch[doc_id] = pos
        repeated = sorted(first_start.keys() | first_line.keys())
        if repeated:
            pos = repeated[0]
            if pos in first_start:
                earlier = self._record_at(first_start[pos], _count_newlines(self.source, first_start[pos]))
                seen_at = earlier.line
            else:
                seen_at = first_line[pos]
            raise DuplicateIdError(
                f"{self.source}:{lines[pos]}: duplicate id '{ids[pos]}' (first seen at line {seen_at})"
            )
        order = np.argsort(hashes, kind="stable")
        self._push(hashes[order], np.asarray(starts, dtype=np.int64)[order])

    def _push(self, hashes: np.ndarray, starts: np.ndarray) -> None:
        self._runs.append((hashes, starts))
        while len(self._runs) > 1 and len(self._runs[-1][0]) >= len(self._runs[-2][0]):
            newer_hashes, newer_starts = self._runs.pop()
            older_hashes, older_starts = self._runs.pop()
            merged_hashes = np.concatenate([older_hashes, newer_hashes])
            merged_starts = np.concatenate([older_starts, newer_starts])
            # Two sorted runs back to back: NumPy's stable sort of 64-bit keys (timsort) merges them
            # in linear time.
            order = np.argsort(merged_hashes, kind="stable")
            self._runs.append((merged_hashes[order], merged_starts[order]))

    def _record_at(self, start: int, line_before: int = 0) -> PositionedRecord:
        """The first record at or after byte ``start`` (numbered from ``line_before``)."""
        return next(iter_jsonl_from(self.source, (), self.id_fields, offset=start, line=line_before))
