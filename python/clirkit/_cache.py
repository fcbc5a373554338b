"""clirkit's one cache directory (prepared ONNX graphs, exports of named collections, Hub model views)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$CLIRKIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/clirkit``, else ``~/.cache/clirkit`` (absolute)."""
    configured = os.environ.get("CLIRKIT_CACHE_DIR")
    if configured:
        return Path(configured).absolute()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return (Path(base) / "clirkit").absolute()
