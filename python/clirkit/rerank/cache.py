"""The reranking cache: every window's answer in an SQLite file, keyed by (backend identity, query text,
window doc ids in order), committed as soon as it arrives."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from typing import Optional, Sequence

from clirkit._types import PathLike
from clirkit.rerank.backends import WindowResult

__all__ = ["RerankCache"]


class RerankCache:
    """Answers of past windows, in an SQLite file; each answer is committed when it arrives.

    WAL journaling keeps committed answers through a killed process."""

    def __init__(self, path: PathLike) -> None:
        self.path = os.fspath(path)
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS windows (key TEXT PRIMARY KEY, answer TEXT, error TEXT,"
            " prompt_tokens INTEGER, completion_tokens INTEGER)"
        )

    @staticmethod
    def key(identity: str, query: str, doc_ids: Sequence[str]) -> str:
        blob = json.dumps([identity, query, list(doc_ids)], ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def get(self, key: str) -> Optional[WindowResult]:
        row = self.db.execute(
            "SELECT answer, error, prompt_tokens, completion_tokens FROM windows WHERE key = ?", (key,)
        ).fetchone()
        if row is None:
            return None
        answer = None if row[0] is None else json.loads(row[0])
        return WindowResult(answer, error=row[1], calls=0, prompt_tokens=row[2], completion_tokens=row[3])

    def put(self, key: str, result: WindowResult) -> None:
        answer = None if result.answer is None else json.dumps(result.answer, ensure_ascii=False)
        self.db.execute(
            "INSERT OR REPLACE INTO windows VALUES (?, ?, ?, ?, ?)",
            (key, answer, result.error, result.prompt_tokens, result.completion_tokens),
        )

    def __len__(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM windows").fetchone()[0]

    def close(self) -> None:
        self.db.close()
