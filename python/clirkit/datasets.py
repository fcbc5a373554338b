"""Streaming readers for corpora and query files (JSONL, BEIR layout), with file:line errors."""

from __future__ import annotations

import io
import json
import os
import unicodedata
from collections.abc import Iterator, Sequence
from typing import IO, Any, NamedTuple

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


#: The UTF-8 byte-order mark some editors write first; it is never part of the first id.
BOM = b"\xef\xbb\xbf"
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


class _IntegerLiteral(str):
    """A JSON integer as written in the file (``99999999999999999999`` stays so)."""


class _FloatLiteral(str):
    """A JSON number with a fraction or an exponent, as written: never an id."""


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _loads(text: str) -> Any:
    """JSON with numbers kept as their literals, so ids follow the Rust reader's rules."""
    return json.loads(
        text, parse_int=_IntegerLiteral, parse_float=_FloatLiteral, parse_constant=_refuse_constant
    )


def plain_json(value: Any) -> Any:
    """A value read by :func:`iter_objects` with its number literals turned back into numbers, so
    it can be written as JSON again (big integers stay exact: Python's are unbounded)."""
    if isinstance(value, _IntegerLiteral):
        return int(value)
    if isinstance(value, _FloatLiteral):
        return float(value)
    if isinstance(value, dict):
        return {k: plain_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_json(v) for v in value]
    return value


def iter_objects(path: PathLike) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line of a JSONL file (gzip read as such, a
    byte-order mark skipped), numbers kept as their literals for :func:`record_id`; a line that is not
    UTF-8, not JSON or not an object is a :class:`ParseError` naming ``file:line``."""
    where = os.fspath(path)
    with open_input(where) as f:
        for line, raw in enumerate(f, 1):
            if line == 1 and raw.startswith(BOM):
                raw = raw[len(BOM) :]
            if not raw.strip():
                continue
            yield line, _parse_object(where, line, raw)


def _parse_object(path: str, line: int, raw: bytes) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ParseError(f"{path}:{line}: not valid UTF-8 (byte {err.start})") from None
    try:
        obj = _loads(text)
    except json.JSONDecodeError as err:
        raise ParseError(f"{path}:{line}: malformed JSON: {err.msg} at column {err.colno}") from None
    except ValueError as err:
        raise ParseError(f"{path}:{line}: malformed JSON: {err}") from None
    if not isinstance(obj, dict):
        raise ParseError(f"{path}:{line}: expected a JSON object, got {type(obj).__name__}")
    return obj


def id_problem(doc_id: str) -> str | None:
    """Why ``doc_id`` cannot be an id (empty, or holding white space or a control character that would
    break a TREC line or an id list), or ``None``: the rule of the Rust ``io::id_text::id_problem``."""
    if not doc_id:
        return "id is empty"
    if any(c.isspace() or unicodedata.category(c) == "Cc" for c in doc_id):
        shown = json.dumps(doc_id, ensure_ascii=False)
        return (
            f"id {shown} contains white space or a control character (TREC files and id lists cannot hold it)"
        )
    return None


#: Bytes read from a compressed input per call into the Rust decoder.
_STREAM_CHUNK = 1 << 20


class _DecodedInput(io.RawIOBase):
    """A gzip or zstd input decompressed as a stream by the Rust input layer
    (:class:`clirkit._native.InputStream`: the byte-order mark dropped, errors naming the file),
    so memory stays at a buffer whatever the file's size. Seeking forward reads on; seeking back
    reopens the file and reads from its start (a resumed reader seeks once, forward)."""

    def __init__(self, path: str) -> None:
        from clirkit._native import InputStream

        self._path = path
        self._stream = InputStream(path)
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._stream.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self._position += n
        return n

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset += self._position
        elif whence != io.SEEK_SET:
            raise io.UnsupportedOperation(f"{self._path}: a compressed input cannot seek from its end")
        if offset < 0:
            raise ValueError(f"{self._path}: negative seek position {offset}")
        if offset < self._position:
            from clirkit._native import InputStream

            self._stream.close()
            self._stream = InputStream(self._path)
            self._position = 0
        while self._position < offset:
            skipped = len(self._stream.read(min(_STREAM_CHUNK, offset - self._position)))
            if not skipped:
                break  # past the end: reads there return nothing, as for a plain file
            self._position += skipped
        return self._position

    def close(self) -> None:
        if not self.closed:
            self._stream.close()
        super().close()


def open_input(path: PathLike) -> IO[bytes]:
    """Open an input file for binary reading, decompressing gzip and zstd (recognised by their magic
    bytes, as the Rust reader does) as a stream through the Rust input layer (the byte-order mark
    dropped there; a damaged stream is an ``OSError`` naming the file). A plain file is opened as it
    is (its byte-order mark left to the line readers)."""
    where = os.fspath(path)
    if is_compressed(where):
        return io.BufferedReader(_DecodedInput(where), buffer_size=_STREAM_CHUNK)
    return open(where, "rb")  # noqa: SIM115 (returned to the caller, who closes it)


def is_compressed(path: PathLike) -> bool:
    """Whether ``path`` is gzip or zstd, by its magic bytes."""
    with open(path, "rb") as f:
        head = f.read(4)
    return head.startswith(_GZIP_MAGIC) or head.startswith(_ZSTD_MAGIC)


def is_decompressed(f: IO[bytes]) -> bool:
    """Whether ``f`` (from :func:`open_input`) reads a gzip or zstd file through its decoder."""
    return isinstance(getattr(f, "raw", None), _DecodedInput)


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

    ``text`` joins the present ``fields``, each stripped of white space (``str.strip()``, the rule the
    Rust reader shares), that are not empty with a space (missing fields count as empty),
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
    with open_input(where) as f:
        f.seek(offset)
        for raw in f:
            line += 1
            offset += len(raw)
            if line == 1 and raw.startswith(BOM):
                raw = raw[len(BOM) :]
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
    obj = _parse_object(path, line, raw)
    doc_id = record_id(path, line, obj, id_fields)
    parts = []
    present = False
    for name in fields:
        value = obj.get(name)
        if value is None:
            continue
        if type(value) is not str:
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
    return Record(doc_id, " ".join(parts), lang if type(lang) is str else None)


def record_id(path: str, line: int, obj: dict[str, Any], id_fields: Sequence[str]) -> str:
    """The first id field present decides (a null there is an error, not a reason to look further): a
    string, or an integer as written; the rules of the Rust reader, tested on one shared table."""
    field = next((k for k in id_fields if k in obj), None)
    if field is None:
        raise ParseError(f"{path}:{line}: no id field (looked for {', '.join(id_fields)})")
    value = obj[field]
    if value is None:
        raise ParseError(f"{path}:{line}: id field '{field}' is null")
    if isinstance(value, _IntegerLiteral) or type(value) is str:
        doc_id = str(value)
    else:
        shown = value if isinstance(value, _FloatLiteral) else json.dumps(value)
        raise ParseError(f"{path}:{line}: id {shown} is not a string or an integer")
    problem = id_problem(doc_id)
    if problem:
        raise ParseError(f"{path}:{line}: {problem}")
    return doc_id
