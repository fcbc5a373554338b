"""Systems over inputs made elsewhere: document and query encodings given as files instead of a model
(``embeddings``/``query_embeddings`` for dense, ``vectors``/``query_vectors`` for impact,
``tokens``/``query_tokens`` for multi-vector systems).

Each key takes one input (a ``PREFIX`` or a path), or a table of them by language:

- documents: ``KEY = X`` is the encoding of every document the system searches; a table
  ``KEY = { zh = X, fa = Y }`` names the encoding of each language's documents file (a task's
  documents file is looked up by its language: the language it is analyzed in, or for a NeuCLIR MLIR
  task the key of the file). Where one input serves exactly a task's documents (the collection's only
  documents file, or a language's file through the table), it is read in place, every row in order, as
  the CLI reads it; otherwise (a language of a BEIR corpus, several files of an MLIR task served by one
  input) a task keeps the rows whose ids are its documents, in the input's order.
- queries: ``KEY = X`` or a table by query language (NeuCLIR's mono tasks ask the same topic ids in
  each language); a task searches the rows whose ids are its queries, in the input's order, and a query
  with no row is an error naming it and the file.

A stage over such inputs is identified by the files' content identity
(:func:`~clirkit.experiment.data.file_identity`), as corpora and runs are."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

from clirkit._native import ClirkitError
from clirkit.experiment.data import DocSource, file_identity, iter_documents
from clirkit.experiment.systems import system_error
from clirkit.experiment.toml_source import ExperimentError

#: An input given in the file: one path, or paths by language.
Given = Union[str, dict[str, str]]


def read_given(r: Any, key: str, base: str, resolve: Callable[[str], list[str]]) -> Optional[Given]:
    """The value of ``key`` (a string or a table of strings by language), each resolved against
    ``base``; ``resolve(path)`` lists the files the input is made of, and one that is missing is an
    error at the key's line."""
    value = r.get(key, (str, dict))
    if value is None:
        return None
    entries = {None: value} if isinstance(value, str) else value
    out: dict[str, str] = {}
    for lang, given in entries.items():
        where = (key,) if lang is None else (key, lang)
        if not isinstance(given, str):
            raise r.source.error((*r.path, *where), "must be a path")
        path = os.path.normpath(os.path.join(base, given))
        try:
            files = resolve(path)
        except ClirkitError as err:  # e.g. a directory that is no finished sharded encoding
            raise r.source.error((*r.path, *where), str(err)) from None
        missing = [f for f in files if not os.path.isfile(f)]
        if missing:
            raise r.source.error(
                (*r.path, *where), f"file not found: {missing[0]} (from {given}, resolved against {base})"
            )
        out[lang] = path
    return out[None] if isinstance(value, str) else out


def refuse_with(r: Any, given: str, keys: tuple[str, ...]) -> None:
    """An error at the first of ``keys`` set alongside the precomputed input ``given``."""
    for key in keys:
        if key in r.table:
            raise r.error(key, f"applies to encoding with a model; this system reads {given}")


def read_inputs(
    r: Any,
    base: str,
    keys: tuple[str, str],
    resolve: Callable[[str], list[str]],
    query_resolve: Callable[[str], list[str]],
    model_keys: tuple[str, ...],
) -> Optional[dict[str, Any]]:
    """The options of a system reading ``keys`` (documents key, queries key) instead of ``model``
    (those two inputs, ``model`` None, ``hits``), or None when it has a model; exactly one of the two
    ways must be given."""
    docs_key, query_key = keys
    documents = read_given(r, docs_key, base, resolve)
    queries = read_given(r, query_key, base, query_resolve)
    if documents is None and queries is None:
        if "model" not in r.table:
            raise r.source.error(r.path, f"needs model = DIR, or {docs_key} and {query_key}")
        return None
    if "model" in r.table:
        raise r.error("model", f"give model or {docs_key} and {query_key}, not both")
    if documents is None or queries is None:
        missing = docs_key if documents is None else query_key
        raise r.source.error(r.path, f"{docs_key} and {query_key} go together: missing {missing}")
    refuse_with(r, docs_key, model_keys)
    return {"model": None, docs_key: documents, query_key: queries, "hits": r.positive("hits")}


@dataclass(frozen=True)
class DocumentPart:
    """One input read for a task's documents: the input, and the ids kept (None: every row)."""

    path: str
    wanted: Optional[frozenset[str]]


def document_parts(plan: Any, spec_name: str, key: str, given: Given, task: Any) -> list[DocumentPart]:
    """The inputs serving ``task``'s documents, in the order of its documents files, each once."""
    sources: tuple[DocSource, ...] = task.docs.sources
    if isinstance(given, str):
        if task.docs.direct and _single_documents_file(plan.config.collections[task.collection]):
            return [DocumentPart(given, None)]
        wanted: set[str] = set()
        for source in sources:
            wanted.update(doc_id for doc_id, *_ in iter_documents(source))
        return [DocumentPart(given, frozenset(wanted))]
    parts: list[DocumentPart] = []
    for source in sources:
        lang = source.fixed_lang or source.default_lang or source.lang_filter
        if lang not in given:
            raise system_error(
                plan,
                spec_name,
                (key,),
                f"no entry for the '{lang}' documents of task {task.label} ({source.path}); "
                f"entries: {', '.join(sorted(given))}",
            )
        if any(p.path == given[lang] for p in parts):
            raise system_error(
                plan,
                spec_name,
                (key, lang),
                f"serves several documents files of task {task.label}: give one {key} = PATH for all",
            )
        keep = None
        if source.lang_filter is not None:
            keep = frozenset(doc_id for doc_id, *_ in iter_documents(source))
        parts.append(DocumentPart(given[lang], keep))
    return parts


def query_input(plan: Any, spec_name: str, key: str, given: Given, task: Any) -> str:
    """The input holding ``task``'s queries: the one given, or the entry of the queries' language."""
    if isinstance(given, str):
        return given
    langs = sorted({str(lang) for _, _, lang in task.queries})
    if len(langs) != 1 or langs[0] not in given:
        raise system_error(
            plan,
            spec_name,
            (key,),
            f"task {task.label} asks queries in {', '.join(langs)}; entries: {', '.join(sorted(given))}",
        )
    return given[langs[0]]


def query_rows(ids: list[str], task: Any, path: str) -> list[int]:
    """Rows of an input whose ids are ``task``'s queries, in the input's order; every query needs one."""
    asked = {q for q, _, _ in task.queries}
    rows = [n for n, q in enumerate(ids) if q in asked]
    found = {ids[n] for n in rows}
    missing = [q for q, _, _ in task.queries if q not in found]
    if missing:
        raise ExperimentError(
            f"{path}: no vector for query '{missing[0]}' of task {task.label}"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
        )
    return rows


def input_identity(files: list[str]) -> list[dict]:
    """The content identity of an input's files (stage digests)."""
    return [file_identity(f) for f in files]


def _single_documents_file(collection: Any) -> bool:
    paths = {collection.corpus, *collection.docs.values(), *collection.translations.values()}
    paths.discard(None)
    return len(paths) == 1
