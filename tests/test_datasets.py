"""JSONL readers: documents join their text fields, queries take the first one present."""

from __future__ import annotations

import pytest
from clirkit.datasets import QUERY_FIELDS, QUERY_ID_FIELDS, iter_jsonl


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
