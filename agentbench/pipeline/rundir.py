"""The run directory: the one type that reads and writes ``runs/<name>/``.

    config.json      the RunConfig it was started with (--resume must match its output-affecting settings)
    retrieval.json   the retrieval stage's results (ExecRetrieval's per-model schema)
    records.jsonl    one RunRecord per (query, condition), appended as they finish
    summary.json     the run summary (written last)
    report.md        the summary as text
    .lock            the writer's lock (flock; its content is the writer's pid)

Every whole-file write is atomic (:mod:`agentbench.files`); records are appended with fsync, readers skip a
torn last line and only the resuming writer, under the lock, cuts it, so a killed run is always resumable
and reading a run never changes it.
"""

from __future__ import annotations

import fcntl
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..files import atomic_write_json, atomic_write_text, read_json_object, slug
from ..retrieval.results import RetrievalResult
from .config import RunConfig
from .records import RecordLog, RunRecord, write_error

__all__ = ["RunDirectory", "RunLock", "check_writable_dir", "config_changes"]

CONFIG, RETRIEVAL, RECORDS, SUMMARY, REPORT, LOCK = (
    "config.json",
    "retrieval.json",
    "records.jsonl",
    "summary.json",
    "report.md",
    ".lock",
)
MATRIX_MANIFEST = "matrix.json"
"""the manifest of a matrix directory (:mod:`.matrix`), which holds run directories but is not one"""


OURS = frozenset({CONFIG, RETRIEVAL, RECORDS, SUMMARY, REPORT, LOCK})
"""Every file a run writes in its directory (atomic writes' temporaries start with ``.<name>.``)."""


def _ours(name: str) -> bool:
    return name in OURS or any(name.startswith(f".{own}.") and name.endswith(".tmp") for own in OURS)


class RunDirectory:
    """A run directory and its configuration; use :meth:`create` to start or resume a run (the caller
    holds the directory's lock until :meth:`close`), :meth:`open` to read one."""

    def __init__(self, path: Path, config: RunConfig, lock: RunLock | None = None) -> None:
        self.path = path
        self.config = config
        self.records = RecordLog(path / RECORDS)
        self.lock = lock
        self._fresh = False
        """:meth:`create` started this run (no record or summary was there): :meth:`abandon` may undo it."""
        self._made: list[Path] = []
        """The directories :meth:`create` made, deepest first."""

    @staticmethod
    def default_path(config: RunConfig) -> Path:
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        return Path("runs") / f"{stamp}-{slug(config.agent_name)}-{slug(config.retriever_name)}"

    @classmethod
    def path_for(cls, config: RunConfig) -> Path:
        if config.run_dir:
            return Path(config.run_dir)
        if config.resume:
            raise ConfigError("--resume needs --run-dir DIR naming the run to continue")
        return cls.default_path(config)

    @classmethod
    def precheck(cls, config: RunConfig) -> None:
        """Before any expensive work, the checks :meth:`create` makes, reading only: a bad --run-dir
        fails in the first second, not after a model has loaded."""
        path = cls.path_for(config)
        check_writable_dir(path, "--run-dir")
        if path.is_dir():
            cls._inspect(path, config)

    @classmethod
    def create(cls, config: RunConfig) -> RunDirectory:
        """Start a run in a new or empty directory, or continue one with ``config.resume``.

        A directory holding anything agentbench did not write is refused, and so is a second writer (an
        OS lock held until :meth:`close`). A run that never wrote a record (a start that failed) is
        replaced by a new start. Resuming with settings that change records names each of them."""
        path = cls.path_for(config)
        check_writable_dir(path, "--run-dir")
        made = _missing_dirs(path)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"--run-dir {path} cannot be created ({exc.strerror}): choose another"
            ) from None
        lock = RunLock.acquire(path)
        try:
            directory = cls._claim(path, config, lock)
        except BaseException:
            lock.remove() if lock.created else lock.release()  # a refused directory is left as it was
            _remove_empty(made)
            raise
        directory._made += made
        return directory

    @classmethod
    def _inspect(cls, path: Path, config: RunConfig) -> bool:
        """Whether ``path`` holds a started run that ``config`` may continue; ConfigError when it may not
        be used at all."""
        if (path / MATRIX_MANIFEST).exists():
            raise ConfigError(
                f"{path} holds a matrix run: continue it with the same repeated --llm/--embedder flags and "
                "--resume, or choose another --run-dir"
            )
        config_file = path / CONFIG
        names = sorted(p.name for p in path.iterdir())
        foreign = [n for n in names if not _ours(n)]
        records = path / RECORDS
        started = config_file.exists() and (
            (records.exists() and records.stat().st_size > 0) or (path / SUMMARY).exists()
        )
        if not config_file.exists() and [n for n in names if n != LOCK]:
            listed = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
            raise ConfigError(
                f"{path} is not empty ({listed}) and holds no agentbench run: choose a new or empty --run-dir"
            )
        if started and not config.resume:
            raise ConfigError(
                f"{path} already holds a run: pass --resume to continue it or choose another --run-dir"
            )
        if foreign and not started:
            raise ConfigError(
                f"{path} holds files agentbench did not write ({', '.join(foreign[:4])}): choose a new or "
                "empty --run-dir"
            )
        if started:
            previous = cls._read_config(config_file, "choose another --run-dir")
            changed = config_changes(previous, config)
            if changed:
                raise ConfigError(
                    f"{path} was started with different settings ({'; '.join(changed)}): resume with the "
                    "same flags or choose another --run-dir"
                )
        return started

    @classmethod
    def _claim(cls, path: Path, config: RunConfig, lock: RunLock) -> RunDirectory:
        """Under the lock: check the directory again and write the config."""
        started = cls._inspect(path, config)
        config_file = path / CONFIG
        config = config.model_copy(update={"run_dir": str(path)})
        directory = cls(path, config, lock)
        directory._fresh = not started
        if started:  # a damaged record fails here, before anything is written
            directory.records.load()
            return directory
        for leftover in (RETRIEVAL, REPORT, RECORDS):  # a start that failed before its first record
            (path / leftover).unlink(missing_ok=True)
        try:
            atomic_write_json(config_file, config.model_dump(mode="json"))
        except OSError as exc:
            raise write_error(config_file, exc) from None
        return directory

    def abandon(self) -> None:
        """A start that failed before its first record leaves no trace: its files, its lock file and the
        directories it made go (a resumed run that has records keeps everything)."""
        if not self._fresh or self.records.load():
            return
        for name in (CONFIG, RETRIEVAL, REPORT, RECORDS):
            (self.path / name).unlink(missing_ok=True)
        if self.lock is not None:
            self.lock.remove()
        _remove_empty(self._made)

    def close(self) -> None:
        """Release the writer's lock (safe to call twice)."""
        if self.lock is not None:
            self.lock.release()

    def load_records_for_resume(self) -> list[RunRecord]:
        """The writer's view: a torn final line from a killed run is cut first (under the lock)."""
        return self.records.repair_tail()

    @classmethod
    def open(cls, path: str | Path) -> RunDirectory:
        """An existing run directory, for reading."""
        path = Path(path)
        if not path.is_dir():
            raise ConfigError(f"{path} is not a directory; pass a run directory written by `agentbench run`")
        config_file = path / CONFIG
        if not config_file.exists():
            raise ConfigError(f"{path} has no config.json; it is not an agentbench run directory")
        return cls(path, cls._read_config(config_file))

    @staticmethod
    def _read_config(config_file: Path, fix: str = "") -> RunConfig:
        try:
            return RunConfig.model_validate_json(config_file.read_text(), context={"stored": True})
        except (ValueError, ConfigError) as exc:
            detail = str(exc).splitlines()[0]
            raise ConfigError(
                f"{config_file} is unreadable: {detail}" + (f"; {fix}" if fix else "")
            ) from None

    # ------------------------------------------------------------------ files

    def write_retrieval(self, retrieval: Any) -> None:
        self._write(self.path / RETRIEVAL, retrieval)

    def read_retrieval(self) -> RetrievalResult | dict:
        """The retrieval results ({} when the run stopped before retrieval finished)."""
        path = self.path / RETRIEVAL
        if not path.exists():
            return {}
        return RetrievalResult.from_json_data(read_json_object(path), path)

    def load_records(self) -> list[RunRecord]:
        return self.records.load()

    def append_records(self, records: list[RunRecord]) -> None:
        self.records.append_many(records)

    def write_summary(self, summary: Any) -> None:
        self._write(self.path / SUMMARY, summary)

    def read_summary(self) -> dict | None:
        path = self.path / SUMMARY
        return read_json_object(path) if path.exists() else None

    def write_report(self, text: str) -> None:
        try:
            atomic_write_text(self.path / REPORT, text)
        except OSError as exc:
            raise write_error(self.path / REPORT, exc) from None

    @staticmethod
    def _write(path: Path, data: Any) -> None:
        try:
            atomic_write_json(path, _plain(data))
        except OSError as exc:
            raise write_error(path, exc) from None


def _plain(data: Any) -> Any:
    """Models are written as their JSON form; dicts as they are."""
    dump = getattr(data, "to_json_dict", None)
    return dump() if dump is not None else data


class RunLock:
    """An exclusive ``flock`` on the run directory's lock file, held by the one process writing the run; the
    OS releases it when that process dies, so a killed run never leaves a stale lock."""

    def __init__(self, path: Path, fd: int, created: bool) -> None:
        self.path, self._fd, self.created = path, fd, created

    @classmethod
    def acquire(cls, directory: Path) -> RunLock:
        path = directory / LOCK
        created = not path.exists()
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ConfigError(
                f"cannot write in {directory} ({exc.strerror}): choose another --run-dir"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise ConfigError(
                f"{directory} is being written by another agentbench run (pid {holder}): wait for it to "
                "finish, or choose another --run-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(path, fd, created)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def remove(self) -> None:
        """Delete the lock file while still holding the lock (a run directory being abandoned)."""
        if self._fd is not None:
            self.path.unlink(missing_ok=True)
        self.release()


def config_changes(old: RunConfig, new: RunConfig) -> list[str]:
    """Each record-changing setting that differs, as ``name: old -> new``."""
    a, b = old.output_settings(), new.output_settings()
    return [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def check_writable_dir(path: Path, flag: str) -> None:
    """Before any work: ``path`` is, or can become, a writable directory (not a file, not below a file,
    not on a read-only filesystem)."""
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{flag} {path} is a file, not a directory: choose another {flag}")
    existing = path
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{flag} {path} is below {existing}, which is a file: choose another {flag}")
    if not os.access(existing, os.W_OK | os.X_OK):
        reason = "on a read-only filesystem" if _read_only(existing) else "not writable"
        raise ConfigError(f"{flag} {path}: {existing} is {reason}; choose another {flag}")


def _read_only(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _missing_dirs(path: Path) -> list[Path]:
    """The directories that creating ``path`` would make, deepest first."""
    out = []
    while not path.exists() and path.parent != path:
        out.append(path)
        path = path.parent
    return out


def _remove_empty(dirs: list[Path]) -> None:
    for d in dirs:  # deepest first
        try:
            d.rmdir()
        except OSError:
            return
