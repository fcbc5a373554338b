"""Long documents as passages: MaxP turns a passage run into a document run (in Rust).

Passage ids are ``docid`` + separator + anything (``clirkit encode --passages`` writes ``docid#0``,
``docid#1``, ...); the document id is everything before the LAST separator, so ``a#b#3`` belongs to
``a#b``. An id without the separator is a whole document.
"""

from __future__ import annotations

from collections.abc import Mapping

from clirkit import _native
from clirkit._native import InvalidInputError
from clirkit._types import PathLike, RunDict
from clirkit.runs import read_run, write_run


def maxp(run: Mapping[str, Mapping[str, float]], separator: str = "#", depth: int | None = None) -> RunDict:
    """Document run from a passage run: each document's score is the max over its passages.

    Each query's documents iterate in canonical order (score descending, then doc id descending);
    ``depth`` keeps the top documents per query (after aggregation).
    """
    if depth is not None and depth < 1:
        raise InvalidInputError(f"depth must be at least 1, got {depth}")
    native = _native.maxp({q: dict(d) for q, d in run.items()}, separator, depth)
    return {qid: dict(docs) for qid, docs in native}


def doc_id(passage_id: str, separator: str = "#") -> str:
    """The document a passage id belongs to."""
    return _native.passage_doc_id(passage_id, separator)


def maxp_file(
    passage_run: PathLike,
    output: PathLike,
    separator: str = "#",
    depth: int | None = None,
    tag: str = "clirkit-maxp",
) -> RunDict:
    """Read a TREC passage run, aggregate it with :func:`maxp`, write the document run atomically."""
    docs = maxp(read_run(passage_run), separator, depth)
    write_run(output, docs, tag)
    return docs
