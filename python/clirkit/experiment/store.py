"""The artifact store: one directory per stage output, named by the stage's kind and digest.

A stage builds into a private temporary directory and renames it into place when complete, so a
stage directory is either absent or whole: a run killed at any point leaves no partial output behind
(only its temporary directory, removed by the next run), and rerunning recomputes exactly the stages
whose directories are missing. Work that can resume inside one stage (encoding a corpus, a reranking
cache) keeps its progress under ``partial/DIGEST`` until the stage completes.

The rename makes a stage atomic for a killed process. Stage directories are not flushed to disk one by
one (that costs more than small stages themselves); instead the manifest records the size of every file
the stage wrote, and a stage is trusted only when its manifest reads back and every file has its recorded
size, so after a power failure a stage that did not fully reach the disk is recomputed, not reused."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from clirkit._atomic import atomic_text_output

MANIFEST = "stage.json"


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

    def partial(self, digest: str) -> Path:
        """A directory for resumable progress of one stage, kept across killed runs."""
        path = self.partial_root / digest
        path.mkdir(parents=True, exist_ok=True)
        return path

    def remove_stale(self) -> None:
        """Remove temporary directories left by runs that no longer exist."""
        if not self.tmp.is_dir():
            return
        for entry in self.tmp.iterdir():
            pid = entry.name.rsplit(".", 1)[-1]
            if not (pid.isdigit() and int(pid) != os.getpid() and _pid_alive(int(pid))):
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


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    """Write JSON to ``path`` through a temporary file and a rename."""
    with atomic_text_output(path) as f:
        json.dump(data, f, indent=1, ensure_ascii=False)
        f.write("\n")


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    with atomic_text_output(path) as f:
        f.write(text)
