"""agentbench's on-disk caches: one directory rule and one storage layer.

Where: :func:`cache_dir` is ``$AGENTBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/agentbench``, else
``~/.cache/agentbench``. Everything agentbench caches lives below it: one sub-directory per store
(:data:`EXECUTIONS` for sandbox verdicts, :data:`EMBEDDINGS` for vectors, :data:`LLM_RESPONSES` for
completions), plus the local model weights in ``models/`` and the sandbox image tarball in ``sandbox/``.

How: each store is a :class:`JSONCache`, a ``diskcache.Cache`` (SQLite in WAL mode plus, for values over
32 KiB, one file per value) whose keys and values are JSON text, never pickles; a stored row that is not
JSON text is a miss. Several threads (each gets its own SQLite connection) and several processes may read
and write one store at once: :meth:`JSONCache.set_many` writes a batch in one transaction, so a killed
process loses at most the batch it was writing and never leaves a torn entry. Nothing is ever evicted.

Upgrading: agentbench releases before this layer kept one SQLite file per cache directly in the cache
directory (``exec_cache.sqlite``, ``embeddings.sqlite``, ``llm-cache.sqlite``). Those files are ignored,
not migrated: the first run after upgrading starts cold and refills the new stores. They may be deleted.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import diskcache
from diskcache.core import MODE_RAW, MODE_TEXT, UNKNOWN

from .errors import ConfigError

__all__ = [
    "EMBEDDINGS",
    "EXECUTIONS",
    "LLM_RESPONSES",
    "JSONCache",
    "Key",
    "cache_dir",
    "store_dir",
]

EXECUTIONS = "executions"
EMBEDDINGS = "embeddings"
LLM_RESPONSES = "llm-responses"

Key = str | tuple[str, ...]
"""A cache key: a string, or a tuple of strings (stored as a JSON array, read back as a tuple)."""

_TIMEOUT_S = 60.0
"""How long a writer waits for another process's transaction before giving up (SQLite busy timeout);
then ``diskcache.Timeout`` is raised. (diskcache's own ``retry=True`` is not used: it retries every
SQLite error, a read-only database included, forever.)"""


def cache_dir() -> Path:
    """``$AGENTBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/agentbench``, else ``~/.cache/agentbench``."""
    if os.environ.get("AGENTBENCH_CACHE_DIR"):
        return Path(os.environ["AGENTBENCH_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "agentbench"


def store_dir(name: str) -> Path:
    """The directory of store ``name`` (e.g. :data:`EXECUTIONS`) under :func:`cache_dir`."""
    return cache_dir() / name


def _dumps(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"))  # ASCII: lone surrogates in output stay storable


class _NotJSON(Exception):
    """A stored value that this layer did not write (pickled or binary): treated as a miss."""


_MISSING = object()
_FOREIGN = object()
"""What :meth:`JSONDisk.get` returns for a key this layer did not write; :meth:`JSONCache.items` skips it."""


class JSONDisk(diskcache.Disk):
    """Keys and values as uncompressed JSON text (readable with ``sqlite3``); never pickles or unpickles."""

    def put(self, key: Any) -> tuple[Any, bool]:
        return super().put(_dumps(list(key) if isinstance(key, tuple) else key))

    def get(self, key: Any, raw: bool) -> Any:
        if not raw or not isinstance(key, str):
            return _FOREIGN
        try:
            data = json.loads(key)
        except ValueError:
            return _FOREIGN
        return tuple(data) if isinstance(data, list) else data

    def store(self, value: Any, read: bool, key: Any = UNKNOWN) -> tuple[int, int, str | None, Any]:
        if read:
            raise TypeError("JSONCache stores JSON-serialisable values, not files")
        return super().store(_dumps(value), False, key=key)

    def fetch(self, mode: int, filename: str | None, value: Any, read: bool) -> Any:
        if mode not in (MODE_RAW, MODE_TEXT) or read:
            raise _NotJSON
        text = super().fetch(mode, filename, value, False)
        try:
            return json.loads(text)
        except (TypeError, ValueError):  # bytes, a number or free text some other program stored
            raise _NotJSON from None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno:
        return os.strerror(exc.errno)
    return " ".join(str(exc).split()) or type(exc).__name__


def _open_error(label: str, directory: Path, exc: BaseException) -> ConfigError:
    return ConfigError(
        f"cannot open the {label} cache {directory}: {_reason(exc)}; "
        "set AGENTBENCH_CACHE_DIR to a writable directory"
    )


class JSONCache:
    """One named store: JSON-serialisable values under string (or string-tuple) keys.

    ``directory`` is the store's own directory (created if missing); ``label`` names it in errors.
    Opening raises :class:`ConfigError` with a one-line message when the directory cannot be created or
    the database in it cannot be opened for writing.
    """

    def __init__(self, directory: str | Path, *, label: str = "agentbench") -> None:
        self.directory = Path(directory).expanduser()
        self.label = label
        try:
            if self.directory.exists() and not self.directory.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(self.directory))
            self.directory.mkdir(parents=True, exist_ok=True)
            self._cache = diskcache.Cache(
                str(self.directory),
                timeout=_TIMEOUT_S,
                disk=JSONDisk,
                eviction_policy="none",
                statistics=0,
                tag_index=0,
            )
        except (OSError, sqlite3.Error, diskcache.Timeout) as exc:
            raise _open_error(label, self.directory, exc) from exc

    def get(self, key: Key, default: Any = None) -> Any:
        try:
            return self._cache.get(key, default)
        except _NotJSON:
            return default

    def get_many(self, keys: Iterable[Key]) -> dict[Key, Any]:
        """The stored values of ``keys``; misses are absent."""
        found: dict[Key, Any] = {}
        for key in keys:
            value = self.get(key, _MISSING)
            if value is not _MISSING:
                found[key] = value
        return found

    def set(self, key: Key, value: Any) -> None:
        self._cache.set(key, value)

    def set_many(self, items: Iterable[tuple[Key, Any]]) -> int:
        """Store every pair in one transaction (all or nothing); returns how many were written."""
        items = list(items)
        if not items:
            return 0
        with self._cache.transact():
            for key, value in items:
                self._cache.set(key, value)
        return len(items)

    def items(self) -> Iterator[tuple[Key, Any]]:
        """Every (key, value) pair, in key order; rows this layer did not write are skipped."""
        for key in self._cache.iterkeys():
            if key is _FOREIGN:
                continue
            value = self.get(key, _MISSING)
            if value is not _MISSING:
                yield key, value

    def __len__(self) -> int:
        return len(self._cache)

    def close(self) -> None:
        """Close this thread's connection (other threads' connections close with their threads)."""
        self._cache.close()

    def __enter__(self) -> JSONCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JSONCache({str(self.directory)!r})"
