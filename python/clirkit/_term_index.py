"""What the BM25 and impact indexes share: the opened native index and its statistics."""

from __future__ import annotations

import json
from typing import Any, Generic, TypeVar, Union

from clirkit import _native
from clirkit._native_value import NativeValue

NativeTermIndex = TypeVar("NativeTermIndex", bound=Union[_native.Bm25Index, _native.ImpactIndex])


class TermIndex(Generic[NativeTermIndex]):
    """An opened inverted index over terms (the base of :class:`~clirkit.bm25.BM25Index` and
    :class:`~clirkit.impact.ImpactIndex`)."""

    def __init__(self, native: NativeTermIndex) -> None:
        self.native = native

    num_docs = NativeValue(int, "Number of documents, empty ones included.")
    num_terms = NativeValue(int, "Number of distinct terms.")

    @property
    def manifest(self) -> dict[str, Any]:
        """The index's ``meta.json``: format, statistics and build parameters."""
        return json.loads(self.native.manifest_json)

    def verify(self) -> None:
        """Check every file's checksum (reads the whole index); raises IndexFormatError if corrupt."""
        self.native.verify()
