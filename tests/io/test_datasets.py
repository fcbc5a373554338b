"""JSONL readers: documents join their text fields, queries take the first one present."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from clirkit._native import InvalidInputError, ParseError
from clirkit.datasets import CORPUS_FIELDS, ID_FIELDS, QUERY_FIELDS, QUERY_ID_FIELDS, iter_jsonl, parse_line
from clirkit.dense import read_ids


def test_query_text_is_the_first_field_present(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(
        '{"_id": "a", "text": "from text", "title": "t"}\n'
        '{"qid": "b", "query": "from query"}\n'
        '{"query_id": "c", "title": "from title"}\n'
        '{"id": "d", "text": "", "title": "ignored"}\n',
        encoding="utf-8",
    )
    records = list(iter_jsonl(path, QUERY_FIELDS, QUERY_ID_FIELDS, text_rule="first"))
    assert [(r.id, r.text) for r in records] == [
        ("a", "from text"),
        ("b", "from query"),
        ("c", "from title"),
        ("d", ""),
    ]
    # Documents join every present field instead.
    assert next(iter_jsonl(path, ("text", "title"))).text == "from text t"


def test_a_query_without_text_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"_id": "a", "text": "x"}\n{"_id": "b", "question": "y"}\n', encoding="utf-8")
    with pytest.raises(
        ValueError, match=r"q\.jsonl:2: 'b' has no text field \(looked for text, query, title\)"
    ):
        list(iter_jsonl(path, QUERY_FIELDS, text_rule="first"))
    with pytest.raises(ValueError, match="text_rule must be one of join, first"):
        list(iter_jsonl(path, text_rule="any"))


CASES = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "reader_cases.json").read_text(encoding="utf-8")
)["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_shared_reader_cases(case):
    """The table the Rust reader is tested on too: both read every line alike."""
    queries = case["kind"] == "queries"
    fields = QUERY_FIELDS if queries else CORPUS_FIELDS
    id_fields = QUERY_ID_FIELDS if queries else ID_FIELDS
    text_rule = "first" if queries else "join"

    def read():
        return parse_line("c.jsonl", 3, case["line"].encode(), fields, id_fields, "lang", text_rule)

    if "error" in case:
        with pytest.raises(ParseError) as err:
            read()
        assert str(err.value).startswith("c.jsonl:3: ") and case["error"] in str(err.value)
    else:
        record = read()
        assert record.id == case["id"]
        if "text" in case:
            assert record.text == case["text"]


def test_byte_order_marks_and_gzip(tmp_path):
    text = '\ufeff{"_id": 99999999999999999999, "text": "x"}\n{"_id": "d2"}\n'.encode()
    plain, packed = tmp_path / "c.jsonl", tmp_path / "c.jsonl.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text))
    for path in (plain, packed):
        assert [r.id for r in iter_jsonl(path)] == ["99999999999999999999", "d2"]
    ids = tmp_path / "ids.txt"
    ids.write_bytes("\ufeffd1\nd2\n".encode())
    assert read_ids(ids) == ["d1", "d2"]
    for bad, message in [("d1\nd 2\n", ':2: id "d 2" contains white space'), ("d1\n\n", ":2: id is empty")]:
        ids.write_text(bad, encoding="utf-8")
        with pytest.raises(InvalidInputError, match=message):
            read_ids(ids)
