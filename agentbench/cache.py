"""agentbench's on-disk caches: one directory rule and one storage layer.

Where: :func:`cache_dir` is ``$AGENTBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/agentbench``, else
``~/.cache/agentbench``. Everything agentbench caches lives below it: one sub-directory per store
(:data:`EXECUTIONS` for sandbox verdicts, :data:`EMBEDDINGS` for vectors, :data:`LLM_RESPONSES` for
completions, :data:`RETRIEVALS` for runs' retrieval-stage results), plus the local model weights in
``models/`` and the sandbox image tarball in ``sandbox/``.

How: each store is a :class:`JSONCache`, a ``diskcache.Cache`` (SQLite in WAL mode plus, for values over
32 KiB, one file per value) whose keys and values are JSON text, never pickles; a stored row that is not
JSON text is a miss. Several threads (each gets its own SQLite connection) and several processes may read
and write one store at once: :meth:`JSONCache.set_many` writes a batch in one transaction, so a killed
process loses at most the batch it was writing and never leaves a torn entry. Nothing is ever evicted.

Faults: a store whose database is corrupt (not SQLite, or a damaged page) is moved aside as
``cache.db.corrupt-<timestamp>``, started again empty and reported with one warning; a store that cannot
be written (disk full, read-only, another process holding it too long) is reported with one warning
naming the directory (and for a full disk its free space), and the command goes on without writing to
it: a cache write never stops a command or loses its results.

Upgrading: agentbench releases before this layer kept one SQLite file per cache directly in the cache
directory (``exec_cache.sqlite``, ``embeddings.sqlite``, ``llm-cache.sqlite``). Those files are ignored,
not migrated: the first run after upgrading starts cold and refills the new stores. They may be deleted.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import shutil
import sqlite3
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import diskcache
from diskcache.core import DBNAME, MODE_RAW, MODE_TEXT, UNKNOWN

from .errors import ConfigError

__all__ = [
    "EMBEDDINGS",
    "EXECUTIONS",
    "LLM_RESPONSES",
    "RETRIEVALS",
    "JSONCache",
    "Key",
    "cache_dir",
    "free_space",
    "store_dir",
    "write_problem",
]

log = logging.getLogger("agentbench.cache")

EXECUTIONS = "executions"
EMBEDDINGS = "embeddings"
LLM_RESPONSES = "llm-responses"
RETRIEVALS = "retrievals"

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


_WARNED: set[tuple[str, str]] = set()
"""(store directory, what failed) already reported in this process: one warning each."""

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


def _sqlite_code(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def _is_corrupt(exc: BaseException) -> bool:
    """SQLITE_CORRUPT or SQLITE_NOTADB: the file is damaged or not a database at all."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    if _sqlite_code(exc) in (11, 26):
        return True
    text = str(exc).lower()
    return "file is not a database" in text or "malformed" in text


_LOW_SPACE = 1 << 20
"""Below this many free bytes, an I/O error of SQLite is taken for a full disk (SQLite reports a shared
memory file it cannot grow as ``SQLITE_IOERR_SHMSIZE``, not as ``SQLITE_FULL``)."""


def _is_full(exc: BaseException, where: Path | None = None) -> bool:
    """ENOSPC/EDQUOT from the file system, SQLITE_FULL from SQLite, or an SQLite I/O error at ``where``
    on a file system with (almost) no space left."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    if not isinstance(exc, sqlite3.Error):
        return False
    if _sqlite_code(exc) == 13 or "database or disk is full" in str(exc).lower():
        return True
    if where is not None and (_sqlite_code(exc) == 10 or "disk i/o error" in str(exc).lower()):
        free = _free_bytes(where)
        return free is not None and free < _LOW_SPACE
    return False


def _free_bytes(path: str | Path) -> int | None:
    here = Path(path).absolute()
    for candidate in (here, *here.parents):
        try:
            return shutil.disk_usage(candidate).free
        except OSError:
            continue
    return None


def free_space(path: str | Path) -> str:
    """The free space of the file system holding ``path`` (or its nearest existing parent), as text such
    as ``12.0 KiB``."""
    free = _free_bytes(path)
    if free is None:
        return "unknown"
    size = float(free)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return "unknown"  # pragma: no cover - the loop always returns


def write_problem(path: str | Path, exc: BaseException) -> str:
    """Why writing at ``path`` failed, in a few words; a full disk names its free space."""
    if _is_full(exc, Path(path)):
        return f"the disk is full ({free_space(path)} free)"
    return _reason(exc)


def _open_error(label: str, directory: Path, exc: BaseException) -> ConfigError:
    return ConfigError(
        f"cannot open the {label} cache {directory}: {_reason(exc)}; "
        "set AGENTBENCH_CACHE_DIR to a writable directory"
    )


class JSONCache:
    """One named store: JSON-serialisable values under string (or string-tuple) keys.

    ``directory`` is the store's own directory (created if missing); ``label`` names it in errors.
    Opening raises :class:`ConfigError` with a one-line message when the directory cannot be created or
    the database in it cannot be opened for writing. A corrupt database is moved aside and replaced by an
    empty one, and a full disk leaves the store unused; each is reported once as a warning.
    """

    def __init__(self, directory: str | Path, *, label: str = "agentbench") -> None:
        self.directory = Path(directory).expanduser()
        self.label = label
        self._cache: diskcache.Cache | None = None
        """None once the store cannot be used (full disk): reads miss, writes are skipped."""
        self._writable = True
        try:
            if self.directory.exists() and not self.directory.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(self.directory))
            self.directory.mkdir(parents=True, exist_ok=True)
            try:
                self._cache = self._open()
            except sqlite3.DatabaseError as exc:
                if not _is_corrupt(exc):
                    raise
                self._cache = self._recover(exc)
        except (OSError, sqlite3.Error, diskcache.Timeout) as exc:
            if not _is_full(exc, self.directory):
                raise _open_error(label, self.directory, exc) from exc
            self._unusable(exc)

    def _open(self) -> diskcache.Cache:
        return diskcache.Cache(
            str(self.directory),
            timeout=_TIMEOUT_S,
            disk=JSONDisk,
            eviction_policy="none",
            statistics=0,
            tag_index=0,
        )

    def _recover(self, exc: sqlite3.DatabaseError) -> diskcache.Cache:
        """Move a corrupt database aside and start an empty one (under a lock, so that of several
        processes finding it corrupt only the first moves it: the others open the new one)."""
        with open(self.directory / ".recover.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                return self._open()  # another process has recovered it meanwhile
            except sqlite3.DatabaseError as again:
                if not _is_corrupt(again):
                    raise
            stamp = time.strftime("%Y%m%d-%H%M%S")
            db = self.directory / DBNAME
            aside, n = db.with_name(f"{DBNAME}.corrupt-{stamp}"), 2
            while aside.exists():
                aside, n = db.with_name(f"{DBNAME}.corrupt-{stamp}-{n}"), n + 1
            for suffix in ("", "-wal", "-shm"):  # the journal files belong to the corrupt database
                part = db.with_name(DBNAME + suffix)
                if part.exists():
                    os.replace(part, aside.with_name(aside.name + suffix))
            cache = self._open()
        log.warning(
            "the %s cache %s was corrupt (%s): moved it aside to %s and started an empty one",
            self.label,
            db,
            _reason(exc),
            aside,
        )
        return cache

    def _warn_once(self, what: str, exc: BaseException) -> None:
        key = (str(self.directory), what)
        if key in _WARNED:
            return
        _WARNED.add(key)
        if _is_full(exc, self.directory):
            fix = "free space there or set AGENTBENCH_CACHE_DIR to a directory on another disk"
        elif _is_corrupt(exc):
            fix = "delete the directory to start it again"
        else:
            fix = "set AGENTBENCH_CACHE_DIR to a writable directory"
        log.warning(
            "the %s cache %s cannot be %s: %s; going on without %s it (%s)",
            self.label,
            self.directory,
            "written" if what == "write" else "used",
            write_problem(self.directory, exc),
            "writing to" if what == "write" else "using",
            fix,
        )

    def _unusable(self, exc: BaseException) -> None:
        self._warn_once("use", exc)
        self._cache, self._writable = None, False

    def _write_failed(self, exc: BaseException) -> None:
        self._warn_once("write", exc)
        self._writable = False  # one warning and no more waiting on a store that cannot take writes

    def get(self, key: Key, default: Any = None) -> Any:
        if self._cache is None:
            return default
        try:
            return self._cache.get(key, default)
        except _NotJSON:
            return default
        except sqlite3.DatabaseError as exc:  # damaged after it was opened: a miss, reported once
            if not _is_corrupt(exc):
                raise
            self._unusable(exc)
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
        """Store one pair; a store that cannot be written is reported once and skipped."""
        self.set_many([(key, value)])

    def set_many(self, items: Iterable[tuple[Key, Any]]) -> int:
        """Store every pair in one transaction (all or nothing); returns how many were written (0 when
        the store cannot be written: reported once, and the caller's results are untouched)."""
        items = list(items)
        if not items or self._cache is None or not self._writable:
            return 0
        try:
            with self._cache.transact():
                for key, value in items:
                    self._cache.set(key, value)
        except (OSError, sqlite3.Error, diskcache.Timeout) as exc:
            self._write_failed(exc)
            return 0
        return len(items)

    def items(self) -> Iterator[tuple[Key, Any]]:
        """Every (key, value) pair, in key order; rows this layer did not write are skipped."""
        if self._cache is None:
            return
        for key in self._cache.iterkeys():
            if key is _FOREIGN:
                continue
            value = self.get(key, _MISSING)
            if value is not _MISSING:
                yield key, value

    def __len__(self) -> int:
        return 0 if self._cache is None else len(self._cache)

    def close(self) -> None:
        """Close this thread's connection (other threads' connections close with their threads)."""
        if self._cache is not None:
            self._cache.close()

    def __enter__(self) -> JSONCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JSONCache({str(self.directory)!r})"
