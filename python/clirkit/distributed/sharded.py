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
from typing import Any

from clirkit import _native
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


def sharded_kind(path: PathLike) -> str | None:
    """The kind (``"bm25"``, ...) of the sharded index at ``path``, or None if it holds none."""
    return _native.sharded_index_kind(os.fspath(path))


def read_manifest(path: PathLike) -> ShardedManifest:
    """Read the manifest of the sharded index at ``path``, checking every shard (present, of the
    recorded build): an :class:`~clirkit.IndexFormatError` names the shard otherwise."""
    path = os.fspath(path)
    # The core's one list of index kinds finds the kind and checks its shards (`index_kinds.rs`).
    kind, manifest = _native.sharded_manifest(path)
    fields = json.loads(manifest)
    shards = tuple(ShardRecord(s["dir"], s["build"], int(s["num_docs"])) for s in fields["shards"])
    return ShardedManifest(path, kind, sum(s.num_docs for s in shards), shards, fields)
