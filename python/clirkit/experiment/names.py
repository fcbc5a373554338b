"""The one rule for names an experiment file gives (systems, fusion and rerank nodes, collections):
each becomes a directory or file name under the working directory (``runs/NODE/TASK.trec``), so a name
is one safe path component, and two distinct names never share a file."""

from __future__ import annotations

import unicodedata
from typing import Iterable, Optional

#: The longest name, in UTF-8 bytes (file systems allow 255 per component; ``.trec`` and temporary
#: suffixes are added to some).
MAX_NAME_BYTES = 200


def name_problem(name: str) -> Optional[str]:
    """Why ``name`` cannot name a node or collection, or None."""
    if not name:
        return "is empty"
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        return f"is longer than {MAX_NAME_BYTES} bytes"
    if name.startswith("."):
        return "starts with '.' (names become file names: '.', '..' and hidden names are refused)"
    bad = next((c for c in name if c in "/\\" or unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")), None)
    if bad is not None:
        return f"holds {bad!r} (names become file names: no '/', '\\\\' or control characters)"
    return None


def colliding(names: Iterable[str]) -> Optional[tuple[str, str]]:
    """Two names that differ only in case (one file on a case-insensitive file system), or None."""
    seen: dict[str, str] = {}
    for name in names:
        folded = unicodedata.normalize("NFC", name).casefold()
        if folded in seen and seen[folded] != name:
            return seen[folded], name
        seen.setdefault(folded, name)
    return None
