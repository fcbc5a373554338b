"""``[collections.NAME]``: BEIR directories, groups of BEIR datasets and NeuCLIR-style files."""

from __future__ import annotations

import os
from typing import Any, Optional

from clirkit.experiment.config.model import COLLECTION_FORMATS, HUMAN_SOURCES, Collection
from clirkit.experiment.config.reader import TableReader
from clirkit.experiment.toml_source import KeyPath, TomlSource

#: The keys of every ``[collections.NAME]``, then those of each format.
COLLECTION_KEYS = ("format", "group", "measures", "drop_self_hits", "lang", "lang_field", "query_language")
BEIR_KEYS = ("path", "corpus", "queries", "qrels", "mono_qrels", "split")
NEUCLIR_KEYS = (
    "docs",
    "translations",
    "topics",
    "topic_field",
    "topic_fields",
    "human_sources",
    "mt_source",
    "qrels",
)
BEIR_GROUP_KEYS = (
    "format",
    "path",
    "datasets",
    "measures",
    "drop_self_hits",
    "lang",
    "lang_field",
    "query_language",
    "split",
)


def _collection(source: TomlSource, name: str, table: Any, base: str) -> Collection:
    path: KeyPath = ("collections", name)
    fmt = table.get("format") if isinstance(table, dict) else None
    allowed = COLLECTION_KEYS + (NEUCLIR_KEYS if fmt == "neuclir" else BEIR_KEYS)
    r = TableReader(source, path, table, allowed)
    fmt = r.choice("format", COLLECTION_FORMATS, "beir")
    shared = dict(
        name=name,
        format=fmt,
        group=r.get("group", str, name if fmt == "beir" else "neuclir"),
        measures=r.strings("measures"),
        drop_self_hits=r.get("drop_self_hits", bool, False),
        lang=r.get("lang", str, "en"),
        query_language=r.get("query_language", str, "en"),
        lang_field=r.get("lang_field", str),
    )
    if fmt == "beir":
        root = r.file("path", base, required=True, directory=True)
        assert root is not None

        def inside(key: str, default: Optional[str]) -> Optional[str]:
            value = r.get(key, str, default)
            if value is None:
                return None
            return r.path_value(key, value, root)

        return Collection(
            **shared,
            corpus=inside("corpus", "corpus.jsonl"),
            queries=inside("queries", "queries.jsonl"),
            qrels=inside("qrels", f"qrels/{_split(r)}.tsv"),
            mono_qrels=inside("mono_qrels", None),
        )
    qrels = r.file_map("qrels", base)
    docs = r.file_map("docs", base)
    if not docs:
        raise source.error(path, "a neuclir collection needs docs = { LANG = FILE, ... }")
    return Collection(
        **shared,
        docs=docs,
        translations=r.file_map("translations", base),
        topics=r.file("topics", base),
        topic_fields=_topic_fields(r),
        human_sources=r.strings("human_sources", HUMAN_SOURCES),
        mt_source=r.get("mt_source", str),
        qrels_by_language=qrels,
    )


def _split(r: TableReader) -> str:
    """``split``: which qrels file of a BEIR directory is read (``qrels/SPLIT.tsv``; default test)."""
    split = r.get("split", str, "test")
    if not split or "/" in split or split.startswith("."):
        raise r.error("split", f"'{split}' is not a split name (e.g. test, dev)")
    return split


def _topic_fields(r: TableReader) -> tuple[str, ...]:
    """``topic_fields = [...]`` (joined by a space) or the older ``topic_field = "..."``."""
    if "topic_field" in r.table and "topic_fields" in r.table:
        raise r.error("topic_fields", "give topic_fields or topic_field, not both")
    if "topic_field" in r.table:
        return (r.get("topic_field", str),)
    fields = r.strings("topic_fields", ("topic_title",))
    if not fields:
        raise r.error(
            "topic_fields", 'must name at least one field, e.g. ["topic_title", "topic_description"]'
        )
    return fields


def _beir_group(source: TomlSource, name: str, table: Any, base: str) -> list[Collection]:
    """``format = "beir-group"``: every BEIR dataset under ``path`` (a directory with corpus.jsonl,
    queries.jsonl and qrels/SPLIT.tsv, ``split`` default test), or the ``datasets`` named; each becomes a collection named
    after its directory, in group ``name``. ``drop_self_hits`` may list the datasets it applies to."""
    key: KeyPath = ("collections", name)
    r = TableReader(source, key, table, BEIR_GROUP_KEYS)
    root = r.file("path", base, directory=True)
    assert root is not None
    split = _split(r)
    qrels_file = f"qrels/{split}.tsv"
    found = sorted(
        d
        for d in os.listdir(root)
        if all(
            os.path.isfile(os.path.join(root, d, f)) for f in ("corpus.jsonl", "queries.jsonl", qrels_file)
        )
    )
    chosen = r.strings("datasets")
    for dataset in chosen or ():
        if dataset not in found:
            raise r.error(
                "datasets", f"'{dataset}' is not a BEIR dataset under {root} (found: {', '.join(found)})"
            )
    drop = r.get("drop_self_hits", (bool, list), False)
    if isinstance(drop, list) and not all(isinstance(d, str) and d in found for d in drop):
        raise r.error("drop_self_hits", "must be true, false or a list of the group's datasets")
    measures = r.strings("measures")
    out = []
    for dataset in chosen or found:
        path = os.path.join(root, dataset)
        out.append(
            Collection(
                name=dataset,
                format="beir",
                group=name,
                measures=measures,
                drop_self_hits=drop is True or (isinstance(drop, list) and dataset in drop),
                lang=r.get("lang", str, "en"),
                query_language=r.get("query_language", str, "en"),
                lang_field=r.get("lang_field", str),
                corpus=os.path.join(path, "corpus.jsonl"),
                queries=os.path.join(path, "queries.jsonl"),
                qrels=os.path.join(path, "qrels", f"{split}.tsv"),
            )
        )
    if not out:
        raise r.error("path", f"no BEIR dataset (corpus.jsonl, queries.jsonl, {qrels_file}) under {root}")
    return out


def read_collections(source: TomlSource, top: TableReader, base: str) -> dict[str, Collection]:
    """Every collection by name, a ``beir-group`` table contributing one per dataset."""
    raw_collections = top.get("collections", dict, {})
    if not raw_collections:
        raise source.error(("collections",), "at least one collection is needed")
    collections: dict[str, Collection] = {}
    for cname, table in raw_collections.items():
        is_group = isinstance(table, dict) and table.get("format") == "beir-group"
        for coll in (
            _beir_group(source, cname, table, base) if is_group else [_collection(source, cname, table, base)]
        ):
            if coll.name in collections:
                raise source.error(("collections", cname), f"collection '{coll.name}' is defined twice")
            collections[coll.name] = coll
    return collections
