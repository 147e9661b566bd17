"""On-disk embedding cache: vectors keyed by (embedder config, query/document, sha256 of the text).

Why: API embedders cost money and time, and even a local model costs seconds to load. With every vector
cached, a rerun makes no API calls and never loads the model, which is what keeps warm retrieval runs
within a few seconds. One SQLite file (WAL, busy timeout) is shared by all agentbench processes.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..execution.cache import default_cache_dir

__all__ = ["EmbeddingCache", "default_embedding_cache_path", "text_key"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    config   TEXT NOT NULL,
    kind     TEXT NOT NULL,
    text_sha TEXT NOT NULL,
    dim      INTEGER NOT NULL,
    vector   BLOB NOT NULL,
    PRIMARY KEY (config, kind, text_sha)
)
"""


def default_embedding_cache_path() -> Path:
    """Next to the execution cache (``$AGENTBENCH_CACHE_DIR`` or ``~/.cache/agentbench``)."""
    return default_cache_dir() / "embeddings.sqlite"


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class EmbeddingCache:
    """Float32 vectors in SQLite; safe to share between threads and processes."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else default_embedding_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(_SCHEMA)

    def get_many(self, config: str, kind: str, texts: Sequence[str]) -> dict[int, np.ndarray]:
        """Cached vectors by position in ``texts``; misses are absent."""
        found: dict[int, np.ndarray] = {}
        sql = "SELECT dim, vector FROM embeddings WHERE config=? AND kind=? AND text_sha=?"
        with self._lock:
            for i, text in enumerate(texts):
                row = self._db.execute(sql, (config, kind, text_key(text))).fetchone()
                if row:
                    found[i] = np.frombuffer(row[1], dtype=np.float32, count=row[0]).copy()
        return found

    def put_many(self, config: str, kind: str, texts: Sequence[str], vectors: np.ndarray) -> None:
        rows = [
            (config, kind, text_key(t), int(v.shape[0]), np.asarray(v, dtype=np.float32).tobytes())
            for t, v in zip(texts, vectors, strict=True)
        ]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("INSERT OR REPLACE INTO embeddings VALUES (?,?,?,?,?)", rows)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> EmbeddingCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
