"""Persistent LLM response cache: one entry per request key.

The key is a sha256 over the model, the messages and the parameters that change the output (temperature,
max_tokens, seed, stop, api_base, ...), never over timeouts, retry settings or the API key, so rerunning
the same configuration is answered entirely from the cache. Only successful responses are stored. The
store (``llm-responses/`` under :func:`agentbench.cache.cache_dir`, see :mod:`agentbench.cache`) is shared
by concurrent threads and processes. The ``llm-cache.sqlite`` file of earlier releases is ignored
(responses are fetched again once).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any

from ..cache import LLM_RESPONSES, JSONCache, store_dir

__all__ = ["ResponseCache", "cache_key", "default_cache_path"]

CACHE_VERSION = 1


def default_cache_path() -> Path:
    """The response store's directory: ``<cache_dir>/llm-responses``."""
    return store_dir(LLM_RESPONSES)


def cache_key(model: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    """Stable hash of everything that determines a response."""
    payload = {"v": CACHE_VERSION, "model": model, "messages": messages, "params": params}
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """``get(key)`` / ``put(key, model, value)`` of JSON-serialisable responses.

    ``path`` is the store's directory (default :func:`default_cache_path`); opening raises ConfigError
    when it cannot be created or written.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self._store = JSONCache(self.path, label="LLM response")
        self._write = threading.Lock()
        """One writer at a time in this process: concurrent writers would wait in SQLite's busy handler,
        which sleeps in growing steps (up to 100 ms), instead of taking turns."""

    def get(self, key: str) -> dict[str, Any] | None:
        entry = self._store.get(key)
        return entry["value"] if isinstance(entry, dict) and "value" in entry else None

    def put(self, key: str, model: str, value: dict[str, Any]) -> None:
        with self._write:
            self._store.set(key, {"model": model, "value": value, "created": time.time()})

    def __len__(self) -> int:
        return len(self._store)

    def close(self) -> None:
        self._store.close()
