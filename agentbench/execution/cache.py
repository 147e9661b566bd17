"""Execution cache: per-assert verdicts keyed by (sha256 of code, sha256 of tests, sandbox config).

One SQLite file shared by pool building, retrieval metrics and runs, so a snippet/suite pair runs once per
sandbox configuration. WAL mode and a busy timeout make it safe for several agentbench processes at once.
Infrastructure errors are never stored: they say nothing about the code. Rows export to (and import from)
ExecRetrieval's ``execution_cache.jsonl`` format: ``{"code_sha256", "tests_sha256", "results"}``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from .base import OUTPUT_LIMIT, ExecResult, Executor, Job, ProgressCallback

__all__ = ["ExecCache", "run_cached", "default_cache_dir", "default_cache_path", "job_config"]

Key = tuple[str, str, str]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS exec_results (
    code_sha256  TEXT NOT NULL,
    tests_sha256 TEXT NOT NULL,
    config       TEXT NOT NULL,
    results      TEXT NOT NULL,
    stdout       TEXT NOT NULL DEFAULT '',
    stderr       TEXT NOT NULL DEFAULT '',
    duration     REAL NOT NULL DEFAULT 0,
    created      REAL NOT NULL,
    PRIMARY KEY (code_sha256, tests_sha256, config)
)
"""


def default_cache_dir() -> Path:
    """``$AGENTBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/agentbench``, else ``~/.cache/agentbench``."""
    if os.environ.get("AGENTBENCH_CACHE_DIR"):
        return Path(os.environ["AGENTBENCH_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "agentbench"


def default_cache_path() -> Path:
    return default_cache_dir() / "exec_cache.sqlite"


def job_config(executor_config: str, timeout: float) -> str:
    """The config part of a cache key: the executor's settings plus the job's time limit."""
    return f"{executor_config};timeout={timeout:g}"


class ExecCache:
    """SQLite-backed verdict store; usable from several threads and processes."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else default_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(_SCHEMA)

    def get_many(self, keys: Iterable[Key]) -> dict[Key, ExecResult]:
        found: dict[Key, ExecResult] = {}
        query = (
            "SELECT results, stdout, stderr, duration FROM exec_results "
            "WHERE code_sha256=? AND tests_sha256=? AND config=?"
        )
        with self._lock:
            for key in keys:
                row = self._db.execute(query, key).fetchone()
                if row:
                    found[key] = ExecResult(
                        json.loads(row[0]), row[1], row[2], None, row[3], {"cached": True}
                    )
        return found

    def put_many(self, items: Iterable[tuple[Key, ExecResult]]) -> int:
        """Store results; infrastructure errors are skipped. Returns how many rows were written."""
        rows = [
            (
                *key,
                json.dumps(r.results),
                r.stdout[:OUTPUT_LIMIT],
                r.stderr[:OUTPUT_LIMIT],
                r.duration,
                time.time(),
            )
            for key, r in items
            if r.infra_error is None
        ]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("INSERT OR REPLACE INTO exec_results VALUES (?,?,?,?,?,?,?,?)", rows)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return len(rows)

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM exec_results").fetchone()[0]

    def configs(self) -> dict[str, int]:
        with self._lock:
            rows = self._db.execute("SELECT config, COUNT(*) FROM exec_results GROUP BY config").fetchall()
        return dict(rows)

    def export_jsonl(self, path: str | Path, config: str | None = None) -> int:
        """Write ExecRetrieval ``execution_cache.jsonl`` rows (newest verdict per pair if configs differ)."""
        sql = "SELECT code_sha256, tests_sha256, results FROM exec_results"
        args: tuple[str, ...] = ()
        if config is not None:
            sql, args = sql + " WHERE config=?", (config,)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY created", args).fetchall()
        latest = {(c, t): results for c, t, results in rows}
        with open(path, "w", encoding="utf-8") as out:
            for (code_sha, tests_sha), results in sorted(latest.items()):
                row = {"code_sha256": code_sha, "tests_sha256": tests_sha, "results": json.loads(results)}
                out.write(json.dumps(row) + "\n")
        return len(latest)

    def import_jsonl(self, path: str | Path, config: str) -> int:
        """Load ExecRetrieval rows under ``config`` (e.g. ``job_config(executor.config_key(), 10)``)."""
        items = []
        with open(path, encoding="utf-8") as src:
            for line in src:
                if line.strip():
                    row = json.loads(line)
                    key = (row["code_sha256"], row["tests_sha256"], config)
                    items.append((key, ExecResult(results=[str(r) for r in row["results"]])))
        return self.put_many(items)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> ExecCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _copy(result: ExecResult) -> ExecResult:
    return replace(result, results=list(result.results), extra=dict(result.extra))


def run_cached(
    executor: Executor,
    jobs: Sequence[Job],
    cache: ExecCache | None,
    progress: ProgressCallback | None = None,
    batch_size: int = 256,
) -> list[ExecResult]:
    """Results for ``jobs`` in order, running only cache misses, each distinct job once.

    Misses run in batches that are stored as they finish, so an interrupted run keeps its work.
    """
    config = executor.config_key()
    keys: list[Key] = [(*job.key, job_config(config, job.timeout)) for job in jobs]
    counts: dict[Key, int] = {}
    first: dict[Key, Job] = {}
    for key, job in zip(keys, jobs, strict=True):
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, job)
    done = cache.get_many(counts) if cache is not None else {}
    if progress and done:
        progress(sum(counts[k] for k in done))
    misses = [k for k in counts if k not in done]
    for start in range(0, len(misses), batch_size):
        batch = misses[start : start + batch_size]
        results = executor.run([first[k] for k in batch], progress=progress)
        done.update(zip(batch, results, strict=True))
        if cache is not None:
            cache.put_many(zip(batch, results, strict=True))
        if progress:
            extra = sum(counts[k] - 1 for k in batch)
            if extra:
                progress(extra)
    return [_copy(done[k]) for k in keys]
