"""Persistent LLM response cache (SQLite, one row per request key).

The key is a sha256 over the model, the messages and the parameters that change the output (temperature,
max_tokens, seed, stop, api_base, ...), never over timeouts or retry settings, so rerunning the same
configuration is answered entirely from the cache. Only successful responses are stored. The database
runs in WAL mode so concurrent processes can share it.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .weights import cache_dir

__all__ = ["ResponseCache", "cache_key", "default_cache_path"]

CACHE_VERSION = 1


def default_cache_path() -> Path:
    return cache_dir() / "llm-cache.sqlite"


def cache_key(model: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    """Stable hash of everything that determines a response."""
    payload = {"v": CACHE_VERSION, "model": model, "messages": messages, "params": params}
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """``get(key)`` / ``put(key, value)`` of JSON-serialisable responses."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=30, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT, value TEXT, created REAL)"
            )
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(
                f"cannot open the LLM response cache {self.path}: {exc}; set AGENTBENCH_CACHE_DIR"
            ) from exc

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, model: str, value: dict[str, Any]) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses (key, model, value, created) VALUES (?, ?, ?, ?)",
                (key, model, json.dumps(value, ensure_ascii=False), time.time()),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
