"""The sharded index directory, whatever its kind: one ordinary clirkit index per shard
(``shard-0000/``, ...) and a ``meta.json`` whose format is ``clirkit-sharded-<kind>``, listing each
shard's directory, build stamp (the checksum of the shard's own manifest) and document count, and
carrying a checksum of its own. It is a clirkit index for the rule every build follows (a build
replaces a clirkit index but never another directory), and a shard that is missing or of another
build is refused when the index is opened."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Callable

from clirkit import _native
from clirkit._native import InvalidInputError
from clirkit._types import PathLike


@dataclass(frozen=True)
class ShardRecord:
    """One shard as the manifest lists it."""

    dir: str
    build: str
    num_docs: int


@dataclass(frozen=True)
class ShardedManifest:
    """A sharded index's manifest, read after every shard was found present and of its build."""

    path: str
    kind: str
    num_docs: int
    shards: tuple[ShardRecord, ...]
    #: The whole manifest as JSON (the kind's statistics included).
    fields: dict[str, Any]

    def shard_path(self, i: int) -> str:
        return os.path.join(self.path, self.shards[i].dir)


#: Per kind, the native check of a sharded index: its manifest as JSON once every shard is found
#: present and of the recorded build.
_CHECKS: dict[str, Callable[[str], str]] = {
    "bm25": _native.check_sharded_bm25,
    "dense": _native.check_sharded_dense,
}


def sharded_kind(path: PathLike) -> str | None:
    """The kind (``"bm25"``, ...) of the sharded index at ``path``, or None if it holds none."""
    return _native.sharded_index_kind(os.fspath(path))


def read_manifest(path: PathLike) -> ShardedManifest:
    """Read the manifest of the sharded index at ``path``, checking every shard (present, of the
    recorded build): an :class:`~clirkit.IndexFormatError` names the shard otherwise."""
    path = os.fspath(path)
    kind = sharded_kind(path)
    if kind is None:
        raise InvalidInputError(f"{path}: not a sharded index (no clirkit-sharded-* meta.json)")
    check = _CHECKS.get(kind)
    if check is None:
        raise InvalidInputError(f"{path}: sharded index of kind '{kind}', which this clirkit cannot open")
    fields = json.loads(check(path))
    shards = tuple(ShardRecord(s["dir"], s["build"], int(s["num_docs"])) for s in fields["shards"])
    return ShardedManifest(path, kind, sum(s.num_docs for s in shards), shards, fields)
