"""What every part of :mod:`clirkit.sources` shares: collection names, the exported layout, the cache."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any, Optional

from clirkit import _cache
from clirkit._native import InvalidInputError

SCHEMES = ("irds", "hf")
#: The parts of a collection and the file each is exported to (BEIR's layout).
PART_FILES = {
    "corpus": "corpus.jsonl",
    "queries": "queries.jsonl",
    "qrels": os.path.join("qrels", "test.tsv"),
}
OPTIONS = ("query", "split", "dir")
IDENTITY_FILE = "source.json"


@dataclass(frozen=True)
class SourceName:
    """A parsed collection name: ``scheme:target[@revision][#options]``."""

    text: str
    scheme: str
    target: str
    revision: Optional[str] = None
    options: dict[str, str] = field(default_factory=dict)


def is_name(value: Any) -> bool:
    """True when ``value`` names a collection (``irds:...`` or ``hf:...``) rather than a path."""
    return isinstance(value, str) and value.split(":", 1)[0] in SCHEMES and ":" in value


def parse_name(text: str) -> SourceName:
    """Parse a collection name; an unknown option or an empty id is an :class:`InvalidInputError`."""
    scheme, rest = text.split(":", 1)
    if scheme not in SCHEMES:
        raise InvalidInputError(f"{text}: not a collection name (expected {' or '.join(SCHEMES)}:...)")
    rest, _, fragment = rest.partition("#")
    options: dict[str, str] = {}
    for item in filter(None, fragment.split(",")):
        key, eq, value = item.partition("=")
        if key not in OPTIONS or not eq or not value:
            raise InvalidInputError(
                f"{text}: option '{item}' is not KEY=VALUE with KEY one of {', '.join(OPTIONS)}"
            )
        options[key] = value
    revision = None
    if scheme == "hf" and "@" in rest:
        rest, revision = rest.split("@", 1)
        if not revision:
            raise InvalidInputError(f"{text}: empty revision after '@'")
    if not rest:
        raise InvalidInputError(f"{text}: no dataset id after '{scheme}:'")
    return SourceName(text, scheme, rest, revision, options)


def cache_root() -> str:
    """clirkit's cache directory (:func:`clirkit._cache.cache_root`), where exports live."""
    return str(_cache.cache_root())


def digest(value: Any) -> str:
    blob = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:24]
