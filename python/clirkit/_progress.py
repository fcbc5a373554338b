"""clirkit's one progress bar (the Rust core counts, ``progress.rs``, and draws nothing):
``label [elapsed] bar done/total unit (rate/s, eta …)`` on one line of stderr, redrawn at most five
times a second, drawn only when the stream is a terminal and the caller is not quiet, so logs, pipes
and CI output stay clean. Encoding (:mod:`clirkit.encoders.resumable`), listwise and pointwise
reranking (:mod:`clirkit.rerank`), every index kind's build and search (BM25, impact, dense,
multi-vector, sharded or not) and an experiment's stages use it.

Work done deep inside a call (the batches an encoder runs for ``encode_queries``) advances the bar its
caller made current with :func:`counting`, so no encoder signature carries a bar. Work done in the Rust
core with the GIL released (a build or a search) adds to a native counter that :func:`polled` reads
from a thread of its own while the call runs; a sharded search sums its shards' counts
(:func:`polled_sum`, the shards in threads or Ray actors)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Optional, TextIO

WIDTH = 30
#: Seconds between redraws of a bar, and between reads of a native counter (:func:`polled`).
REDRAW_SECONDS = 0.2


def duration(seconds: float) -> str:
    """``H:MM:SS``."""
    seconds = max(int(seconds), 0)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class ProgressBar:
    """Progress over ``total`` units (``unit``: what is counted, e.g. ``"windows"``), shown on ``stream``
    when ``enabled`` and the stream is a terminal. ``update(done)`` sets the count, ``advance(n)`` adds to
    it; ``note`` is shown after the counts (e.g. rows written). The rate and ETA count from the first
    update, so work resumed from a checkpoint does not inflate the rate. ``scale``: counts are shown
    divided by it (bytes counted, MiB shown: ``scale=MIB``)."""

    def __init__(
        self,
        total: int,
        label: str,
        unit: str = "",
        enabled: bool = True,
        stream: Optional[TextIO] = None,
        scale: int = 1,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.total = max(int(total), 0)
        self.label = label
        self.unit = unit
        self.scale = scale
        self.enabled = enabled and self.stream.isatty()
        self.done = 0
        self.started = time.monotonic()
        self.first: Optional[tuple[float, int]] = None
        self.shown = 0.0
        self.note = ""

    def advance(self, n: int = 1) -> None:
        self.update(self.done + n)

    def update(self, done: int, note: str = "") -> None:
        now = time.monotonic()
        if self.first is None:
            self.first = (now, self.done)
        self.done, self.note = done, note
        if self.enabled and (now - self.shown >= REDRAW_SECONDS or done >= self.total):
            self.shown = now
            self.stream.write("\r" + self.line(now))
            if done >= self.total:
                self.stream.write("\n")
                self.enabled = False  # drawn complete: nothing more to draw
            self.stream.flush()

    def line(self, now: float) -> str:
        """The bar as drawn at ``now``."""
        fraction = min(self.done / self.total, 1.0) if self.total else 1.0
        filled = int(fraction * WIDTH)
        assert self.first is not None
        since, base = self.first
        rate = (self.done - base) / (now - since) if now > since else 0.0
        eta = duration((self.total - self.done) / rate) if rate > 0 else "?"
        unit = f" {self.unit}" if self.unit else ""
        note = f" {self.note}" if self.note else ""
        counts = (
            f"{self.done:,}/{self.total:,}"
            if self.scale == 1
            else f"{self.done / self.scale:,.1f}/{self.total / self.scale:,.1f}"
        )
        return (
            f"{self.label:>12} [{duration(now - self.started)}] {'#' * filled}{'-' * (WIDTH - filled)} "
            f"{counts}{unit}{note} ({rate / self.scale:,.1f}/s, eta {eta})"
        )

    def close(self) -> None:
        """End the line if the bar was drawn incomplete."""
        if self.enabled and self.shown:
            self.stream.write("\n")
            self.stream.flush()
        self.enabled = False


_CURRENT: ContextVar[Optional[ProgressBar]] = ContextVar("clirkit_progress", default=None)


@contextmanager
def counting(bar: ProgressBar) -> Iterator[ProgressBar]:
    """Make ``bar`` the one :func:`advance_current` advances while the block runs (in this thread and
    context), closing it after."""
    token = _CURRENT.set(bar)
    try:
        yield bar
    finally:
        _CURRENT.reset(token)
        bar.close()


def advance_current(n: int) -> None:
    """Advance the bar made current by :func:`counting`, if any, by ``n``."""
    bar = _CURRENT.get()
    if bar is not None:
        bar.advance(n)


#: Bytes in a MiB: the ``scale`` of a bar over bytes counted and MiB shown.
MIB = 1 << 20


@contextmanager
def polled(
    total: Optional[int],
    label: str,
    unit: str,
    enabled: bool = True,
    stream: Optional[TextIO] = None,
    scale: int = 1,
) -> Iterator[Optional[Any]]:
    """A bar over ``total`` units for native calls that run with the GIL released: yields the
    ``_native.ProgressCounter`` to pass to them, which the core adds to as it works (several calls
    may share it: a sharded search's shards in threads), and reads it from a thread of its own
    every :data:`REDRAW_SECONDS` while the block runs. With ``total`` None the core states the
    total (``counter.total``: a search, its query count; a build, once it knows its sizes) and the
    bar is drawn from then on. Yields ``None`` when the bar would not be drawn (``enabled`` false, or
    the stream not a terminal), so a quiet call counts nothing and starts no thread."""
    bar = ProgressBar(1 if total is None else total, label, unit, enabled=enabled, stream=stream, scale=scale)
    if not bar.enabled or bar.total == 0:
        yield None
        return
    from clirkit import _native

    counter = _native.ProgressCounter()
    with watched(bar, lambda: (counter.done, counter.total), stated=total is None):
        yield counter


@contextmanager
def polled_sum(
    total: int,
    label: str,
    unit: str,
    read: Callable[[], int],
    enabled: bool = True,
    stream: Optional[TextIO] = None,
) -> Iterator[bool]:
    """A bar over ``total`` units whose count is ``read()`` (the sum of counts kept elsewhere: a
    sharded search's Ray actors), called every :data:`REDRAW_SECONDS` from a thread of its own
    while the block runs. Yields whether the bar is drawn (so that nothing is read when not)."""
    bar = ProgressBar(total, label, unit, enabled=enabled, stream=stream)
    if not bar.enabled or bar.total == 0:
        yield False
        return
    with watched(bar, lambda: (read(), total), stated=False):
        yield True


@contextmanager
def watched(bar: ProgressBar, read: Callable[[], tuple[int, int]], stated: bool) -> Iterator[None]:
    """Redraw ``bar`` from ``read()`` (units done, total) every :data:`REDRAW_SECONDS` on a thread
    of its own while the block runs, and once more after it. ``stated``: the total is read too, and
    nothing is drawn until it is known (not 0); otherwise the bar's own total holds and it is drawn
    at once, so the rate counts from the start."""
    stop = threading.Event()

    def show() -> None:
        done, total = read()
        if stated:
            if not total:
                return
            bar.total = total
        bar.update(done)

    def draw() -> None:
        while not stop.wait(REDRAW_SECONDS):
            show()

    if stated:
        # The rate counts from the call's start, even when the bar is first drawn complete.
        bar.first = (time.monotonic(), 0)
    else:
        bar.update(0)
    thread = threading.Thread(target=draw, name="clirkit-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        show()
        bar.close()


def searching(queries: Optional[int], quiet: bool) -> Any:
    """:func:`polled` for a search of ``queries`` queries (None: the core states the count, as a
    search of a queries file read natively does)."""
    return polled(queries, "searching", "queries", enabled=not quiet)


def indexing(unit: str, quiet: bool, scale: int = 1) -> Any:
    """:func:`polled` for a build whose total the core states once known (``unit``: what it counts,
    e.g. ``"MiB read"`` with ``scale=MIB`` for the bytes of a BM25 build's input)."""
    return polled(None, "indexing", unit, enabled=not quiet, scale=scale)
