"""Collections and models by name, wherever a path is accepted.

A collection name is ``irds:<id>`` (through ``ir_datasets``, extra ``clirkit[irds]``) or
``hf:<org>/<name>[@revision]`` (a dataset repository on the Hugging Face Hub, through ``datasets`` and
``huggingface_hub``, extra ``clirkit[hf]``), optionally followed by ``#key=value,...`` options:
``query=FIELD`` (the query field to read), ``split=SPLIT`` (the qrels split, default ``test``) and, for
Hub repositories holding several datasets, ``dir=FOLDER``. A name resolves to ordinary files the
readers take (``corpus.jsonl``, ``queries.jsonl``, ``qrels/test.tsv``), exported once, streamed record
by record, into ``$CLIRKIT_CACHE_DIR/collections/<digest of the identity>/``; the identity (dataset id and
revision) is what the experiment store keys on (:func:`identity_of`).

A model name is a Hub model id (``intfloat/multilingual-e5-small[@revision][/subfolder]``), resolved
through the Hugging Face cache by :mod:`clirkit.sources.models`."""

from __future__ import annotations

import json
import os
from typing import Any, Optional

from clirkit._native import InvalidInputError
from clirkit.sources.names import (
    IDENTITY_FILE,
    OPTIONS,
    PART_FILES,
    SCHEMES,
    SourceName,
    cache_root,
    digest,
    is_name,
    parse_name,
)

__all__ = [
    "IDENTITY_FILE",
    "OPTIONS",
    "PART_FILES",
    "SCHEMES",
    "SourceName",
    "cache_root",
    "identity_of",
    "is_name",
    "local_path",
    "parse_name",
    "resolve_collection",
    "resolve_names",
    "resolve_part",
]


def _open(name: SourceName):
    if name.scheme == "irds":
        from clirkit.sources.irds import IrdsSource

        return IrdsSource(name)
    from clirkit.sources.hf import HubDatasetSource

    return HubDatasetSource(name)


def resolve_collection(text: str, parts: tuple[str, ...] = tuple(PART_FILES)) -> str:
    """The directory (BEIR layout) holding ``parts`` of the named collection, exported if needed."""
    from clirkit.sources.export import export_parts

    source = _open(parse_name(text))
    folder = os.path.join(cache_root(), "collections", digest(source.identity))
    export_parts(source, folder, parts)
    return folder


def resolve_part(text: str, part: str) -> str:
    """The file holding one part (``corpus``, ``queries`` or ``qrels``) of the named collection."""
    if part not in PART_FILES:
        raise InvalidInputError(f"part must be one of {', '.join(PART_FILES)}, not {part!r}")
    return os.path.join(resolve_collection(text, (part,)), PART_FILES[part])


def local_path(value: Any, part: str) -> Any:
    """``value`` itself when it is a path, else the file holding ``part`` of the collection it names."""
    return resolve_part(value, part) if is_name(value) else value


def identity_of(path: str) -> Optional[dict]:
    """For a file exported from a named collection, ``{"source": identity, "part": file}`` (the
    dataset id and revision, never the cache's path or times); None for any other file."""
    root = os.path.join(cache_root(), "collections")
    relative = os.path.relpath(os.path.abspath(path), root)
    if relative.startswith(os.pardir) or os.sep not in relative:
        return None
    folder, _, inside = relative.partition(os.sep)
    try:
        with open(os.path.join(root, folder, IDENTITY_FILE), encoding="utf-8") as f:
            identity = json.load(f)
    except OSError:
        return None
    return {"source": identity, "part": inside.replace(os.sep, "/")}


#: Command-line arguments that take a collection part, and the part each names.
ARGUMENT_PARTS = {"corpus": "corpus", "queries": "queries", "qrels": "qrels"}


def resolve_names(args: Any) -> None:
    """Replace, in parsed command-line ``args``, each collection name given for a corpus, queries or
    qrels by the exported file, and each Hub model id given for a model by its local directory."""
    from clirkit.sources.models import local_model

    for attr, part in ARGUMENT_PARTS.items():
        value = getattr(args, attr, None)
        if is_name(value):
            setattr(args, attr, resolve_part(value, part))
    # `clirkit rerank --model` names a model on a chat server, not a directory
    for attr in ("model_dir",) if getattr(args, "command", None) == "rerank" else ("model", "model_dir"):
        value = getattr(args, attr, None)
        if value is not None:
            setattr(args, attr, local_model(value))
