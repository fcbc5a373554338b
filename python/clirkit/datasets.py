"""Streaming readers for corpora and query files (JSONL, BEIR layout), with file:line errors."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from clirkit._native import InvalidInputError, ParseError
from clirkit._types import PathLike

ID_FIELDS = ("_id", "id", "docid", "doc_id")
QUERY_ID_FIELDS = ("_id", "id", "qid", "query_id")
CORPUS_FIELDS = ("title", "text")
#: Query files name their text differently: the first of these present is the query.
QUERY_FIELDS = ("text", "query", "title")
#: How a record's text comes from its fields: ``"join"`` the present ones (documents; none
#: present is an empty document) or take the ``"first"`` present one (queries; none is an error).
TEXT_RULES = ("join", "first")


class Record(NamedTuple):
    """One JSONL record: its id, its text fields joined by a space, its language (or None)."""

    id: str
    text: str
    lang: str | None


class PositionedRecord(NamedTuple):
    """A record with where it ends in the file (byte offset after its line, and its line number),
    so a reader can resume after it."""

    record: Record
    end_offset: int
    line: int


def iter_jsonl(
    path: PathLike,
    fields: Sequence[str] = CORPUS_FIELDS,
    id_fields: Sequence[str] = ID_FIELDS,
    lang_field: str = "lang",
    text_rule: str = "join",
) -> Iterator[Record]:
    """Yield ``(id, text, lang)`` for every non-blank line of a JSONL file, streaming.

    ``text`` joins the present, non-empty ``fields`` with a space (missing fields count as empty),
    or with ``text_rule="first"`` is the first of ``fields`` present (queries: ``QUERY_FIELDS``);
    the id is the first of ``id_fields`` present (numbers are accepted and turned into strings).
    Raises :class:`ParseError` naming ``file:line`` for non-UTF-8 bytes, malformed JSON, a non-object,
    a missing id, a non-string text field, or (``"first"``) no text field at all.
    """
    for positioned in iter_jsonl_from(path, fields, id_fields, lang_field, text_rule=text_rule):
        yield positioned.record


def iter_jsonl_from(
    path: PathLike,
    fields: Sequence[str] = CORPUS_FIELDS,
    id_fields: Sequence[str] = ID_FIELDS,
    lang_field: str = "lang",
    offset: int = 0,
    line: int = 0,
    text_rule: str = "join",
) -> Iterator[PositionedRecord]:
    """Like :func:`iter_jsonl`, starting at byte ``offset`` (the start of line ``line + 1``) and
    yielding each record with the position just after it."""
    if text_rule not in TEXT_RULES:
        raise InvalidInputError(f"text_rule must be one of {', '.join(TEXT_RULES)}, not {text_rule!r}")
    where = os.fspath(path)
    with open(where, "rb") as f:
        f.seek(offset)
        for raw in f:
            line += 1
            offset += len(raw)
            if not raw.strip():
                continue
            record = parse_line(where, line, raw, fields, id_fields, lang_field, text_rule)
            yield PositionedRecord(record, offset, line)


def parse_line(
    path: str,
    line: int,
    raw: bytes,
    fields: Sequence[str],
    id_fields: Sequence[str],
    lang_field: str,
    text_rule: str = "join",
) -> Record:
    """Parse one JSONL line into a :class:`Record` (errors name ``path:line``)."""
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise ParseError(f"{path}:{line}: not valid UTF-8 (byte {err.start})") from None
    except json.JSONDecodeError as err:
        raise ParseError(f"{path}:{line}: malformed JSON: {err.msg} at column {err.colno}") from None
    if not isinstance(obj, dict):
        raise ParseError(f"{path}:{line}: expected a JSON object, got {type(obj).__name__}")
    doc_id = next((obj[k] for k in id_fields if obj.get(k) is not None), None)
    if doc_id is None:
        raise ParseError(f"{path}:{line}: no id field (looked for {', '.join(id_fields)})")
    if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)):
        raise ParseError(f"{path}:{line}: id must be a string or an integer, got {doc_id!r}")
    doc_id = str(doc_id)
    if not doc_id or any(c.isspace() for c in doc_id):
        raise ParseError(f"{path}:{line}: id {doc_id!r} is empty or contains whitespace")
    parts = []
    present = False
    for name in fields:
        value = obj.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise ParseError(f"{path}:{line}: field '{name}' of '{doc_id}' must be a string")
        present = True
        value = value.strip()
        if value:
            parts.append(value)
        if text_rule == "first":
            break
    if text_rule == "first" and not present:
        raise ParseError(f"{path}:{line}: '{doc_id}' has no text field (looked for {', '.join(fields)})")
    lang = obj.get(lang_field)
    return Record(doc_id, " ".join(parts), lang if isinstance(lang, str) else None)
