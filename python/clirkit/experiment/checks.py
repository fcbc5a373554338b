"""Checks of an experiment file that span its sections (:func:`check_config`), and the one rule for
names it gives (systems, fusion and rerank nodes, collections):
each becomes a directory or file name under the working directory (``runs/NODE/TASK.trec``), so a name
is one safe path component, and two distinct names never share a file."""

from __future__ import annotations

import math
import unicodedata
from typing import Any, Iterable, Optional

from clirkit.experiment.toml_source import ExperimentError

#: The longest name, in UTF-8 bytes (file systems allow 255 per component; ``.trec`` and temporary
#: suffixes are added to some).
MAX_NAME_BYTES = 200
#: The most hits per query an experiment may ask for (a top-k heap of that size must fit).
MAX_HITS = 2**31 - 1


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


def check_config(config: Any) -> None:
    """Checks of a read :class:`~clirkit.experiment.config.ExperimentConfig` that span sections, so
    that every configuration error surfaces when the file is read, before any stage runs: node and
    collection names (:func:`name_problem`, case collisions), numbers the run would refuse later
    (non-finite fusion parameters, interpolation without ``alpha``, a rerank stride past its window,
    too many threads or hits). Errors name file, line and key."""
    from clirkit._threads import MAX_THREADS

    source = config.source
    if source is None:
        return

    def fail(key: tuple, message: str) -> None:
        raise ExperimentError(f"{source.path}:{source.line(key)}: {'.'.join(map(repr_key, key))}: {message}")

    nodes = [("systems", n) for n in config.systems]
    nodes += [("fusion", n) for n in config.fusion] + [("rerank", n) for n in config.rerank]
    for key in [*(("collections", n) for n in config.collections), *nodes]:
        problem = name_problem(key[1])
        if problem is not None:
            fail(key, f"the name {problem}")
    section_of = {n: section for section, n in nodes}
    section_of.update({n: "collections" for n in config.collections})
    for group in ([n for _, n in nodes], list(config.collections)):
        pair = colliding(group)
        if pair is not None:
            message = f"names {pair[0]!r} and {pair[1]!r} differ only in case (one file on some file systems)"
            fail((section_of[pair[1]], pair[1]), message)
    if config.threads > MAX_THREADS:
        fail(("experiment", "threads"), f"must be at most {MAX_THREADS}, got {config.threads}")
    if config.hits > MAX_HITS:
        fail(("experiment", "hits"), f"must be at most {MAX_HITS}, got {config.hits}")
    for name, spec in config.fusion.items():
        if not (math.isfinite(spec.k) and spec.k >= 0):
            fail(("fusion", name, "k"), f"must be a finite number >= 0, got {spec.k}")
        if spec.weights is not None and not all(math.isfinite(w) for w in spec.weights):
            fail(("fusion", name, "weights"), f"must be finite numbers, got {list(spec.weights)}")
        if spec.alpha is not None and not 0.0 <= spec.alpha <= 1.0:
            fail(("fusion", name, "alpha"), f"must be in [0, 1], got {spec.alpha}")
        if spec.method == "interpolate" and spec.alpha is None:
            fail(("fusion", name), "method 'interpolate' needs alpha (the first input's weight, in [0, 1])")
    for name, spec in config.rerank.items():
        if spec.stride > spec.window:
            fail(
                ("rerank", name),
                f"stride {spec.stride} is larger than window {spec.window}: documents "
                "between windows would never be reranked",
            )
    for name, spec in config.systems.items():
        hits = spec.options.get("hits") if isinstance(spec.options, dict) else None
        if isinstance(hits, int) and hits > MAX_HITS:
            fail(("systems", name, "hits"), f"must be at most {MAX_HITS}, got {hits}")


def repr_key(part: object) -> str:
    """A key part as an error shows it: plain when it is a plain name, else quoted (``'a\\nb'``)."""
    text = str(part)
    return text if text.isprintable() and "." not in text and text.strip() == text else repr(text)
