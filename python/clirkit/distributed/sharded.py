"""The sharded index directory, whatever its kind: one ordinary clirkit index per shard
(``shard-0000/``, ...) and a ``meta.json`` whose format is ``clirkit-sharded-<kind>``, listing each
shard's directory, build stamp (the checksum of the shard's own manifest) and document count, and
carrying a checksum of its own. It is a clirkit index for the rule every build follows (a build
replaces a clirkit index but never another directory), and a shard that is missing or of another
build is refused when the index is opened.

Also what searching and building such an index share, whatever its kind: :class:`ShardScatter`
asks every shard for its part of a search (in threads, or through one Ray actor per shard), with
one progress bar over every query on every shard fed by the shards' counts, and
:func:`build_line_shards` builds one shard per range of lines of one input (here or as Ray tasks)
and commits them together."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from clirkit import _native
from clirkit._native import InvalidInputError
from clirkit._progress import MIB, REDRAW_SECONDS, ProgressBar, counting, polled, polled_sum
from clirkit._threads import checked_threads, worker_count
from clirkit._types import PathLike
from clirkit.distributed import cluster


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


class ShardSearcher(Protocol):
    """One shard, opened for search: its part of a sharded search (its exact or approximate top
    k of every query, encoded as ``SearchResults.shard_hits`` encodes them), each query counted in
    ``progress`` (a ``_native.ProgressCounter``, or None) as the shard finishes it."""

    def search(self, queries: Any, options: dict[str, Any], progress: Any = None) -> bytes: ...


#: How a kind opens one shard: (the sharded index's path, the shard's number, threads).
ShardOpener = Callable[[str, int, int], ShardSearcher]

#: How a kind builds one shard: (input file, line range, shard directory, options, threads).
ShardBuilder = Callable[[str, tuple[int, int, int], str, dict[str, Any], int], Any]


class CountedShard:
    """A shard that a Ray actor holds, counting the queries of a search in a counter of its own
    while the search runs, for :meth:`progress` to read meanwhile (the actor answers
    :data:`ACTOR_CONCURRENCY` calls at once; the search releases the GIL)."""

    _counter: Any = None

    def count_with(self, counted: bool) -> Any:
        """What a search counts with: a fresh counter of this actor's when ``counted``, else None."""
        self._counter = _native.ProgressCounter() if counted else None
        return self._counter

    def progress(self) -> int:
        """The queries the running (or last) counted search has finished."""
        counter = self._counter
        return 0 if counter is None else int(counter.done)


#: Calls a shard actor answers at once: a search, and the progress reads made while it runs.
ACTOR_CONCURRENCY = 2


def shard_actors(ray: Any, cls: type, count: int, cpus: float | None, max_restarts: int) -> tuple[Any, int]:
    """``cls`` as the Ray actor class of ``count`` shards on the cluster this process is connected
    to (refused, saying so, when none is): each asking for ``cpus`` CPUs (None: a share of the
    cluster), restarted and its calls retried up to ``max_restarts`` times, answering
    :data:`ACTOR_CONCURRENCY` calls at once; and the threads each actor's work runs on."""
    if not ray.is_initialized():
        raise InvalidInputError("connect to a Ray cluster first (clirkit.distributed.cluster.connected)")
    cpus = cpus or cluster.actor_cpus(ray, count)
    actor = ray.remote(
        num_cpus=cpus,
        max_restarts=max_restarts,
        max_task_retries=max_restarts,
        max_concurrency=ACTOR_CONCURRENCY,
    )(cls)
    return actor, cluster.task_threads(cpus)


class ShardActor(CountedShard):
    """One shard held by a Ray actor: opened by path, so a restarted actor reopens it."""

    def __init__(self, opener: ShardOpener, index: str, shard: int, threads: int) -> None:
        self._shard = opener(index, shard, threads)

    def search(
        self, queries: Any, options: dict[str, Any], crash_once: str | None, counted: bool = False
    ) -> bytes:
        cluster.crash_if_marked(crash_once)
        return self._shard.search(queries, options, self.count_with(counted))


@contextmanager
def searching_shards(queries: int, shards: Sequence[Any], ray: Any, quiet: bool) -> Iterator[Any]:
    """One progress bar over ``queries`` queries on every one of ``shards``, on stderr when it is a
    terminal, unless ``quiet``. Yields what each shard's search counts with: shards in threads of
    this process share one native counter (None when no bar is drawn); Ray actors (``ray``: the
    module, else None) are told whether to count (:class:`CountedShard`), and their counts are read
    and summed at each redraw (when a read fails or is slow, an actor restarting, the last sum
    stands: the search itself reports an actor's failure)."""
    count = len(shards)
    total, unit = queries * count, f"queries x {count} shards"
    if ray is None:
        with polled(total, "searching", unit, enabled=not quiet) as progress:
            yield progress
        return
    last = [0]

    def read() -> int:
        refs = [shard.progress.remote() for shard in shards]
        try:
            last[0] = sum(ray.get(refs, timeout=10 * REDRAW_SECONDS))
        except Exception:  # the bar only
            pass
        return last[0]

    with polled_sum(total, "searching", unit, read, enabled=not quiet) as counted:
        yield counted


@dataclass(frozen=True)
class ShardPlacement:
    """Where the shards of a sharded index are built and searched. ``ray``: None or False here (a
    build's shards one after another on ``threads`` threads; a search's shards in threads sharing
    ``threads`` cores, 0: all); an address (or True for Ray's default; a search uses the cluster
    this process is connected to, :func:`clirkit.distributed.cluster.connected`) on Ray: a build's
    shards as tasks on ``threads`` threads each (0: one), a search's shards held by one actor each
    asking for ``cpus_per_shard`` CPUs (default: a share of the cluster). A task whose worker dies
    is retried, an actor restarted (it reopens its shard by path) and its call retried, up to
    ``max_retries`` times. ``crash_once`` (tests only) names a file whose first claimant ends its
    worker process. ``quiet``: no progress bar (a search draws one over every query on every
    shard; a build's shards built here, one over the whole input read; as Ray tasks, one over the
    shards built)."""

    threads: int = 0
    quiet: bool = False
    ray: cluster.RayAddress = None
    cpus_per_shard: float | None = None
    max_retries: int = 3
    crash_once: PathLike | None = None


class ShardScatter:
    """The shards of a sharded index, each asked for its part of a search, in parallel, where
    ``placement`` says: opened in this process and searched in threads, or held by one Ray actor
    each. :meth:`close` ends the actors."""

    def __init__(self, manifest: ShardedManifest, opener: ShardOpener, placement: ShardPlacement) -> None:
        self.manifest = manifest
        count = len(manifest.shards)
        path = os.path.abspath(manifest.path)
        crash_once, max_restarts = placement.crash_once, placement.max_retries
        self._crash_once = None if crash_once is None else os.fspath(crash_once)
        self._ray: Any = None
        self.quiet = placement.quiet
        self.actors: list[Any] = []
        self._local: list[ShardSearcher] = []
        if placement.ray:
            self._ray = cluster.require_ray()
            actor, threads_each = shard_actors(
                self._ray, ShardActor, count, placement.cpus_per_shard, max_restarts
            )
            self.actors = [actor.remote(opener, path, i, threads_each) for i in range(count)]
        else:
            # Each shard's search releases the GIL; the cores are shared out among the shards.
            each = max(1, worker_count(checked_threads(placement.threads)) // count)
            self._local = [opener(path, i, each) for i in range(count)]

    def parts(self, queries: Any, options: dict[str, Any], quiet: bool | None = None) -> list[bytes]:
        """Every shard's part of the search of ``queries`` (a list) with ``options``, in shard order,
        with a progress bar over every query on every shard on stderr when it is a terminal, unless
        ``quiet`` (default: the placement's)."""
        quiet = self.quiet if quiet is None else quiet
        ray = self._ray
        if ray is not None:
            shared = ray.put(queries)  # once into the object store, read there by every actor
            with searching_shards(len(queries), self.actors, ray, quiet) as counted:
                return ray.get(
                    [a.search.remote(shared, options, self._crash_once, counted) for a in self.actors]
                )
        with searching_shards(len(queries), self._local, None, quiet) as progress:
            with ThreadPoolExecutor(max_workers=len(self._local)) as pool:
                return list(pool.map(lambda shard: shard.search(queries, options, progress), self._local))

    def close(self) -> None:
        """End the shard actors (nothing to end for shards searched in threads)."""
        if self._ray is not None:
            for a in self.actors:
                self._ray.kill(a, no_restart=True)
        self.actors = []


_Self = TypeVar("_Self", bound="ShardedSearch")


class ShardedSearch:
    """What every way of searching a sharded index shares: its manifest, the
    :class:`ShardScatter` of its shards, and the end of their actors (:meth:`close`, or ``with``)."""

    manifest: ShardedManifest
    scatter: ShardScatter

    @property
    def num_docs(self) -> int:
        return self.manifest.num_docs

    @property
    def num_shards(self) -> int:
        return len(self.manifest.shards)

    def close(self) -> None:
        """End the shard actors (nothing to end for shards searched in threads)."""
        self.scatter.close()

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def build_line_shards(
    kind: str,
    source: PathLike,
    index: PathLike,
    shards: int,
    build_shard: ShardBuilder,
    options: dict[str, Any],
    placement: ShardPlacement,
) -> None:
    """Build the sharded index ``index`` of ``kind`` (``"bm25"``, ``"impact"``) from a plain input
    file cut into ``shards`` ranges of whole lines, shard ``i`` built from range ``i`` by
    ``build_shard`` (a module-level function, so that Ray can send it) where ``placement`` says,
    then checked and committed atomically (shards and manifest appear together; nothing is left
    on failure)."""
    if shards < 1:
        raise InvalidInputError(f"shards must be at least 1, got {shards}")
    threads, ray = checked_threads(placement.threads), placement.ray
    # Absolute: Ray workers need not share this process's working directory.
    source = os.path.abspath(source)
    ranges = _native.split_corpus(source, shards)
    crash = None if placement.crash_once is None else os.fspath(placement.crash_once)
    build = _native.ShardedIndexBuild(kind, os.path.abspath(index), shards)
    try:
        if not ray:
            # One bar over the whole input: the shards' ranges cover it, each counting its bytes.
            size = os.path.getsize(source)
            with polled(size, "indexing", "MiB read", enabled=not placement.quiet, scale=MIB) as progress:
                for i, line_range in enumerate(ranges):
                    shard_dir = os.fspath(build.shard_dir(i))
                    build_shard(source, line_range, shard_dir, {**options, "progress": progress}, threads)
        else:
            with cluster.connected(ray) as ray_module:
                cpus = min(float(threads or 1), cluster.cluster_cpus(ray_module))
                task = ray_module.remote(num_cpus=cpus, max_retries=placement.max_retries)(_crashing_build)
                shard_options = dict(options)
                refs = [
                    task.remote(
                        build_shard,
                        source,
                        r,
                        os.fspath(build.shard_dir(i)),
                        shard_options,
                        cluster.task_threads(cpus),
                        crash,
                    )
                    for i, r in enumerate(ranges)
                ]
                shards_built(ray_module, refs, placement.quiet)
        build.finish()
    except BaseException:
        build.abort()
        raise


def shards_built(ray: Any, refs: list[Any], quiet: bool) -> list[Any]:
    """The results of ``refs``, one Ray task per shard build, with a progress bar over the shards
    built (on stderr when it is a terminal, unless ``quiet``); a failed task raises as ``ray.get``."""
    bar = ProgressBar(len(refs), "indexing", "shards built", enabled=not quiet)
    with counting(bar):
        bar.update(0)
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            ray.get(done)
            bar.advance(len(done))
    return list(ray.get(refs))


def _crashing_build(
    build_shard: ShardBuilder,
    source: str,
    line_range: tuple[int, int, int],
    shard_dir: str,
    options: dict[str, Any],
    threads: int,
    crash_once: str | None,
) -> None:
    """One shard's build as a Ray task (after the fault injection of tests)."""
    cluster.crash_if_marked(crash_once)
    build_shard(source, line_range, shard_dir, options, threads)
