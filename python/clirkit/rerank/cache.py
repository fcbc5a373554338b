"""The reranking cache: every definitive answer in an SQLite file, committed as soon as it arrives.

A listwise window's answer is keyed by (backend identity, query text, window doc ids in order, a digest
of the passages' texts), so a corpus changed under the same ids is asked again rather than served stale
answers; a pointwise score by (scorer identity, query text, a digest of the passage). Transient failures
are never stored: a later run asks again.

A cache is only ever a help: a row that cannot be read back (not JSON, a score that is not a finite
number) is a miss, asked again; a cache another process holds locked is waited for, up to
``lock_wait`` seconds; any other SQLite failure (not a database, a table of another layout, a lock
held too long) is an :class:`~clirkit.InvalidInputError` naming the cache file."""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
from contextlib import contextmanager
from typing import Dict, Iterable, Iterator, Optional, Sequence

from clirkit._native import InvalidInputError
from clirkit._types import PathLike
from clirkit.rerank.backends import WindowResult

__all__ = ["RerankCache", "passages_digest"]

#: Seconds a cache locked by another process is waited for before giving up.
LOCK_WAIT_SECONDS = 60.0
_ANSWER_COLUMNS = ("key", "answer", "error", "prompt_tokens", "completion_tokens", "reasoning")


def passages_digest(passages: Sequence[str]) -> str:
    """A digest of passage texts in order (each length-prefixed, so boundaries count)."""
    digest = hashlib.sha256()
    for text in passages:
        data = text.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


class RerankCache:
    """Answers of past windows and scores of past (query, passage) pairs, in an SQLite file; each is
    committed when it arrives. WAL journaling keeps committed answers through a killed process."""

    def __init__(self, path: PathLike, lock_wait: float = LOCK_WAIT_SECONDS) -> None:
        self.path = os.fspath(path)
        with self._sqlite("open"):
            self.db = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=lock_wait
            )
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute(
                "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, answer TEXT, error TEXT,"
                " prompt_tokens INTEGER, completion_tokens INTEGER, reasoning TEXT)"
            )
            self.db.execute("CREATE TABLE IF NOT EXISTS scores (key TEXT PRIMARY KEY, score REAL NOT NULL)")
            columns = tuple(row[1] for row in self.db.execute("PRAGMA table_info(answers)"))
        if columns != _ANSWER_COLUMNS:
            self.db.close()
            raise InvalidInputError(
                f"{self.path}: the rerank cache's table has columns {list(columns)}, not "
                f"{list(_ANSWER_COLUMNS)} (another version wrote it): remove it or give another cache"
            )

    @contextmanager
    def _sqlite(self, doing: str) -> Iterator[None]:
        """SQLite's errors as an InvalidInputError naming the cache file."""
        try:
            yield
        except sqlite3.Error as err:
            raise InvalidInputError(f"{self.path}: rerank cache: cannot {doing}: {err}") from None

    @staticmethod
    def key(identity: str, query: str, doc_ids: Sequence[str], passages: Sequence[str] = ()) -> str:
        """The key of a window: identity, query, doc ids in order and the passages' digest."""
        blob = json.dumps([identity, query, list(doc_ids), passages_digest(passages)], ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    @staticmethod
    def score_key(identity: str, query: str, passage: str) -> str:
        """The key of one (query, passage) score."""
        blob = json.dumps([identity, query, passages_digest([passage])], ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def get(self, key: str) -> Optional[WindowResult]:
        """The cached answer of a window, or None (also for a row that cannot be read back)."""
        with self._sqlite("read"):
            row = self.db.execute(
                "SELECT answer, error, prompt_tokens, completion_tokens, reasoning FROM answers WHERE key = ?",
                (key,),
            ).fetchone()
        if row is None:
            return None
        answer, error, prompt_tokens, completion_tokens, reasoning = row
        try:
            answer = None if answer is None else json.loads(answer)
        except (TypeError, ValueError):
            return None
        if not isinstance(answer, (str, list, type(None))) or not isinstance(error, (str, type(None))):
            return None
        return WindowResult(
            answer,
            error=error,
            calls=0,
            prompt_tokens=prompt_tokens if isinstance(prompt_tokens, int) else 0,
            completion_tokens=completion_tokens if isinstance(completion_tokens, int) else 0,
            reasoning=reasoning if isinstance(reasoning, str) else None,
        )

    def put(self, key: str, result: WindowResult) -> None:
        """Store a definitive answer (a transient failure is refused: it must be asked again)."""
        if result.transient:
            raise ValueError("a transient failure is not cached")
        answer = None if result.answer is None else json.dumps(result.answer, ensure_ascii=False)
        with self._sqlite("store an answer"):
            self.db.execute(
                "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?)",
                (key, answer, result.error, result.prompt_tokens, result.completion_tokens, result.reasoning),
            )

    def get_scores(self, keys: Iterable[str]) -> Dict[str, float]:
        """The cached scores among ``keys`` (a score that is not a finite number is a miss)."""
        found: Dict[str, float] = {}
        with self._sqlite("read"):
            for key in keys:
                row = self.db.execute("SELECT score FROM scores WHERE key = ?", (key,)).fetchone()
                if row is None:
                    continue
                score = row[0]
                if isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score):
                    found[key] = float(score)
        return found

    def put_score(self, key: str, score: float) -> None:
        """Store a score; one that is not a finite number is refused (ValueError)."""
        if not math.isfinite(score):
            raise ValueError(f"score {score} is not finite: not cached")
        with self._sqlite("store a score"):
            self.db.execute("INSERT OR REPLACE INTO scores VALUES (?, ?)", (key, score))

    def __len__(self) -> int:
        """Cached window answers plus cached scores."""
        with self._sqlite("read"):
            windows = self.db.execute("SELECT COUNT(*) FROM answers").fetchone()[0]
            return windows + self.db.execute("SELECT COUNT(*) FROM scores").fetchone()[0]

    def close(self) -> None:
        self.db.close()
