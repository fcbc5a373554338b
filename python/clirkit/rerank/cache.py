"""The reranking cache: every definitive answer in an SQLite file, committed as soon as it arrives.

A listwise window's answer is keyed by (backend identity, query text, window doc ids in order, a digest
of the passages' texts), so a corpus changed under the same ids is asked again rather than served stale
answers; a pointwise score by (scorer identity, query text, a digest of the passage). Transient failures
are never stored: a later run asks again."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from typing import Dict, Iterable, Optional, Sequence

from clirkit._types import PathLike
from clirkit.rerank.backends import WindowResult

__all__ = ["RerankCache", "passages_digest"]


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

    def __init__(self, path: PathLike) -> None:
        self.path = os.fspath(path)
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, answer TEXT, error TEXT,"
            " prompt_tokens INTEGER, completion_tokens INTEGER, reasoning TEXT)"
        )
        self.db.execute("CREATE TABLE IF NOT EXISTS scores (key TEXT PRIMARY KEY, score REAL NOT NULL)")

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
        row = self.db.execute(
            "SELECT answer, error, prompt_tokens, completion_tokens, reasoning FROM answers WHERE key = ?",
            (key,),
        ).fetchone()
        if row is None:
            return None
        answer = None if row[0] is None else json.loads(row[0])
        return WindowResult(
            answer, error=row[1], calls=0, prompt_tokens=row[2], completion_tokens=row[3], reasoning=row[4]
        )

    def put(self, key: str, result: WindowResult) -> None:
        """Store a definitive answer (a transient failure is refused: it must be asked again)."""
        if result.transient:
            raise ValueError("a transient failure is not cached")
        answer = None if result.answer is None else json.dumps(result.answer, ensure_ascii=False)
        self.db.execute(
            "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?)",
            (key, answer, result.error, result.prompt_tokens, result.completion_tokens, result.reasoning),
        )

    def get_scores(self, keys: Iterable[str]) -> Dict[str, float]:
        """The cached scores among ``keys``."""
        found: Dict[str, float] = {}
        for key in keys:
            row = self.db.execute("SELECT score FROM scores WHERE key = ?", (key,)).fetchone()
            if row is not None:
                found[key] = row[0]
        return found

    def put_score(self, key: str, score: float) -> None:
        self.db.execute("INSERT OR REPLACE INTO scores VALUES (?, ?)", (key, score))

    def __len__(self) -> int:
        """Cached window answers plus cached scores."""
        windows = self.db.execute("SELECT COUNT(*) FROM answers").fetchone()[0]
        return windows + self.db.execute("SELECT COUNT(*) FROM scores").fetchone()[0]

    def close(self) -> None:
        self.db.close()
