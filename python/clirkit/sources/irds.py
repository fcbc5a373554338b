"""``irds:<id>``: a collection read through ``ir_datasets`` (extra ``clirkit[irds]``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from clirkit._extras import require
from clirkit._native import InvalidInputError
from clirkit.sources.export import checked_id
from clirkit.sources.names import SourceName

#: A query's text, when ``#query=FIELD`` does not choose: the first of these the dataset has.
QUERY_FIELDS = ("text", "title", "query", "description")


def _string_fields(record: Any, skip: str) -> dict[str, str]:
    return {k: v for k, v in record._asdict().items() if k != skip and isinstance(v, str)}


class IrdsSource:
    """One ``ir_datasets`` dataset: documents, queries (one chosen field) and qrels, each streamed."""

    def __init__(self, name: SourceName) -> None:
        irds = require("ir_datasets", "irds", f"'{name.text}'")
        self.name = name
        try:
            self.dataset = irds.load(name.target)
        except KeyError:
            raise InvalidInputError(f"{name.text}: ir_datasets has no dataset '{name.target}'") from None
        self.query_field = name.options.get("query")
        if self.dataset.has_queries():
            fields = self.dataset.queries_cls()._fields
            if self.query_field is None:
                self.query_field = next((f for f in QUERY_FIELDS if f in fields), None)
            if self.query_field not in fields:
                raise InvalidInputError(
                    f"{name.text}: queries have no field '{self.query_field}' "
                    f"(fields: {', '.join(fields[1:])}; choose one with #query=FIELD)"
                )
        self.identity = {
            "irds": name.target,
            "ir_datasets": irds.__version__,
            "query_field": self.query_field,
        }

    def _need(self, what: str) -> None:
        if not getattr(self.dataset, f"has_{what}")():
            raise InvalidInputError(f"{self.name.text}: this ir_datasets dataset has no {what}")

    def documents(self) -> Iterator[dict[str, str]]:
        self._need("docs")
        for doc in self.dataset.docs_iter():
            record = {"_id": checked_id(doc.doc_id, self.name.text)}
            record.update(_string_fields(doc, "doc_id"))
            yield record

    def queries(self) -> Iterator[dict[str, str]]:
        self._need("queries")
        for query in self.dataset.queries_iter():
            record = {
                "_id": checked_id(query.query_id, self.name.text),
                "text": getattr(query, self.query_field),
            }
            lang = getattr(query, "lang", None)
            if isinstance(lang, str):
                record["lang"] = lang
            yield record

    def qrels(self) -> Iterator[tuple[str, str, int]]:
        self._need("qrels")
        for qrel in self.dataset.qrels_iter():
            yield (
                checked_id(qrel.query_id, self.name.text),
                checked_id(qrel.doc_id, self.name.text),
                int(qrel.relevance),
            )
