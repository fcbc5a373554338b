"""Named collections exported to the files clirkit's readers take, streamed record by record."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any, Protocol

from clirkit._atomic import atomic_text_output
from clirkit._native import InvalidInputError
from clirkit.datasets import id_problem
from clirkit.sources.names import IDENTITY_FILE, PART_FILES


class Source(Protocol):
    """What an adapter (``ir_datasets``, the Hub) gives: its identity and each part's records."""

    identity: dict[str, Any]

    def documents(self) -> Iterator[dict[str, str]]: ...

    def queries(self) -> Iterator[dict[str, str]]: ...

    def qrels(self) -> Iterator[tuple[str, str, int]]: ...


def checked_id(value: Any, where: str) -> str:
    """An id from a record as a string (integers as written); anything else names the source."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidInputError(f"{where}: id {value!r} is not a string or an integer")
    text = str(value)
    problem = id_problem(text)
    if problem:
        raise InvalidInputError(f"{where}: {problem}")
    return text


def _write_records(f, records: Iterator[dict[str, str]]) -> None:
    for record in records:
        f.write(json.dumps(record, ensure_ascii=False))
        f.write("\n")


def _write_qrels(f, rows: Iterator[tuple[str, str, int]]) -> None:
    f.write("query-id\tcorpus-id\tscore\n")
    for qid, docid, label in rows:
        f.write(f"{qid}\t{docid}\t{label}\n")


def export_parts(source: Source, folder: str, parts: tuple[str, ...]) -> None:
    """Write each of ``parts`` not yet in ``folder`` (each file renamed into place when complete, so an
    interrupted export is never taken for a finished one); ``source.json`` records the identity."""
    os.makedirs(os.path.join(folder, "qrels"), exist_ok=True)
    identity_path = os.path.join(folder, IDENTITY_FILE)
    if not os.path.exists(identity_path):
        with atomic_text_output(identity_path) as f:
            json.dump(source.identity, f, sort_keys=True, ensure_ascii=False)
    for part in parts:
        target = os.path.join(folder, PART_FILES[part])
        if os.path.exists(target):
            continue
        with atomic_text_output(target) as f:
            if part == "corpus":
                _write_records(f, source.documents())
            elif part == "queries":
                _write_records(f, source.queries())
            else:
                _write_qrels(f, source.qrels())
