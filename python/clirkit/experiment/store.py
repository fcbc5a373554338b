"""The artifact store: one directory per stage output, named by the stage's kind and digest.

A stage builds into a private temporary directory and renames it into place when complete, so a
stage directory is either absent or whole: a run killed at any point leaves no partial output behind
(only its temporary directory, removed by the next run), and rerunning recomputes exactly the stages
whose directories are missing. Work that can resume inside one stage (encoding a corpus, a reranking
cache) keeps its progress under ``partial/DIGEST`` until the stage completes.

The rename makes a stage atomic for a killed process. Stage directories are not flushed to disk one by
one (that costs more than small stages themselves); instead the manifest records the size of every file
the stage wrote, and a stage is trusted only when its manifest reads back and every file has its recorded
size, so after a power failure a stage that did not fully reach the disk is recomputed, not reused.

Ownership, as for indexes: the store's root and the experiment's working directory carry a marker
file written when clirkit creates them (:func:`claim_directory`); an existing, non-empty directory
without it is refused, never written into. Inside a store only entries clirkit named itself are ever
removed (``tmp/KIND-DIGEST.PID`` of runs no longer alive, stage directories ``KIND/DIGEST``)."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

MANIFEST = "stage.json"
#: Marks a directory as an experiment store made by clirkit.
STORE_MARKER = ".clirkit-store"
#: Marks a directory as an experiment's working directory made by clirkit.
WORKDIR_MARKER = ".clirkit-experiment"
#: What a temporary stage directory is named: ``KIND-DIGEST.PID``.
_TMP_NAME = re.compile(r"[a-z][a-z0-9-]*-[0-9a-f]{20}\.([0-9]+)")


def claim_directory(path: str | os.PathLike, marker: str, what: str) -> Path:
    """Make ``path`` a directory clirkit owns: create it with ``marker`` inside, or accept it when it
    already holds ``marker`` or is empty (then mark it). An existing non-empty directory without the
    marker (or a file) is refused with an :class:`ExperimentError` naming it, before anything is written."""
    from clirkit.experiment.toml_source import ExperimentError

    directory = Path(path)
    if directory.exists() or directory.is_symlink():
        if not directory.is_dir():
            raise ExperimentError(f"{directory}: the experiment's {what} is not a directory")
        if not (directory / marker).is_file():
            if any(directory.iterdir()):
                raise ExperimentError(
                    f"{directory}: not an experiment {what} made by clirkit (no {marker} in it) and not "
                    f"empty: refusing to write into it; choose another directory"
                )
    directory.mkdir(parents=True, exist_ok=True)
    if not (directory / marker).is_file():
        with open(directory / marker, "w", encoding="utf-8") as f:
            json.dump({"format": f"clirkit-experiment-{what}", "version": 1}, f)
            f.write("\n")
    return directory


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _file_sizes(directory: Path) -> dict[str, int]:
    """Every regular file under ``directory`` (symbolic links excluded) with its size, by relative path."""
    sizes = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file() and not path.is_symlink():
            sizes[path.relative_to(directory).as_posix()] = path.stat().st_size
    return sizes


class ArtifactStore:
    """Stage outputs under ``root``: ``root/KIND/DIGEST/``, built in ``root/tmp/``."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.tmp = self.root / "tmp"
        self.partial_root = self.root / "partial"

    def path(self, kind: str, digest: str) -> Path:
        return self.root / kind / digest

    def has(self, kind: str, digest: str) -> bool:
        stage = self.path(kind, digest)
        try:
            with open(stage / MANIFEST, encoding="utf-8") as f:
                manifest = json.load(f)
            if manifest.get("kind") != kind:
                return False
            sizes = manifest.get("file_sizes", {})
            return all((stage / name).stat().st_size == size for name, size in sizes.items())
        except (OSError, ValueError, AttributeError):
            return False

    @contextmanager
    def stage_lock(self, digest: str) -> Iterator[None]:
        """Hold the lock of one stage (``locks/DIGEST.lock``, an exclusive ``flock``) while it is
        built, so concurrent runs of one experiment build it once and never share its partial files."""
        locks = self.root / "locks"
        locks.mkdir(parents=True, exist_ok=True)
        with open(locks / f"{digest}.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def remove_abandoned_partials(self, keep: set[str]) -> list[str]:
        """Remove ``partial/DIGEST`` directories of stages not in ``keep`` and not being built (their
        lock is free); return the digests removed."""
        removed: list[str] = []
        if not self.partial_root.is_dir() or not (self.root / STORE_MARKER).is_file():
            return removed
        for entry in sorted(self.partial_root.iterdir()):
            if entry.name in keep or not re.fullmatch(r"[0-9a-f]{20}", entry.name) or entry.is_symlink():
                continue
            lock = self.root / "locks" / f"{entry.name}.lock"
            lock.parent.mkdir(parents=True, exist_ok=True)
            with open(lock, "a") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # another run is building it
                shutil.rmtree(entry, ignore_errors=True)
                fcntl.flock(handle, fcntl.LOCK_UN)
            removed.append(entry.name)
        return removed

    def partial(self, digest: str) -> Path:
        """A directory for resumable progress of one stage, kept across killed runs."""
        path = self.partial_root / digest
        path.mkdir(parents=True, exist_ok=True)
        return path

    def claim(self) -> None:
        """Create the store, or check that it is one (see :func:`claim_directory`)."""
        claim_directory(self.root, STORE_MARKER, "store")

    def remove_stale(self) -> None:
        """Remove temporary directories left by runs that no longer exist: only entries of ``tmp/``
        named as :meth:`building` names them, in a store carrying its marker."""
        if not self.tmp.is_dir() or not (self.root / STORE_MARKER).is_file():
            return
        for entry in self.tmp.iterdir():
            match = _TMP_NAME.fullmatch(entry.name)
            if match is None or entry.is_symlink() or not entry.is_dir():
                continue
            pid = int(match.group(1))
            if pid == os.getpid() or not _pid_alive(pid):
                shutil.rmtree(entry, ignore_errors=True)

    @contextmanager
    def building(self, kind: str, digest: str, manifest: dict[str, Any]) -> Iterator[Path]:
        """Yield an empty directory to build in; on success it becomes ``path(kind, digest)``."""
        self.tmp.mkdir(parents=True, exist_ok=True)
        work = self.tmp / f"{kind}-{digest}.{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        try:
            yield work
            manifest = {**manifest, "file_sizes": _file_sizes(work)}
            with open(work / MANIFEST, "w", encoding="utf-8") as f:
                json.dump(manifest, f, indent=1, sort_keys=True)
            final = self.path(kind, digest)
            final.parent.mkdir(parents=True, exist_ok=True)
            if self.has(kind, digest):  # built meanwhile by a concurrent run: theirs is as good as ours
                shutil.rmtree(work, ignore_errors=True)
            else:
                shutil.rmtree(final, ignore_errors=True)  # an unreadable leftover (see the module note)
                os.rename(work, final)
            shutil.rmtree(self.partial_root / digest, ignore_errors=True)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
