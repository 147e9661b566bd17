"""Execution cache: per-assert verdicts keyed by (sha256 of code, sha256 of tests, sandbox config).

One store (``executions/`` under :func:`agentbench.cache.cache_dir`, see :mod:`agentbench.cache`) shared by
pool building, retrieval metrics and runs, so a snippet/suite pair runs once per sandbox configuration.
Several agentbench processes and threads may use it at once. Infrastructure errors are never stored: they
say nothing about the code. Entries export to (and import from) ExecRetrieval's ``execution_cache.jsonl``
format: ``{"code_sha256", "tests_sha256", "results"}``. The ``exec_cache.sqlite`` file of earlier releases
is ignored (verdicts are recomputed once).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from ..cache import EXECUTIONS, JSONCache, store_dir
from ..cache import cache_dir as default_cache_dir
from .base import OUTPUT_LIMIT, ExecResult, Executor, Job, ProgressCallback

__all__ = ["ExecCache", "run_cached", "default_cache_dir", "default_cache_path", "job_config"]

Key = tuple[str, str, str]


def default_cache_path() -> Path:
    """The execution store's directory: ``<cache_dir>/executions``."""
    return store_dir(EXECUTIONS)


def job_config(executor_config: str, timeout: float) -> str:
    """The config part of a cache key: the executor's settings plus the job's time limit."""
    return f"{executor_config};timeout={timeout:g}"


class ExecCache:
    """Verdict store on :class:`agentbench.cache.JSONCache`; usable from several threads and processes.

    ``path`` is the store's directory (default :func:`default_cache_path`).
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else default_cache_path()
        self._store = JSONCache(self.path, label="execution")

    def get_many(self, keys: Iterable[Key]) -> dict[Key, ExecResult]:
        found: dict[Key, ExecResult] = {}
        for key, row in self._store.get_many(tuple(k) for k in keys).items():
            found[key] = ExecResult(
                list(row["results"]),
                row["stdout"],
                row["stderr"],
                None,
                row["duration"],
                {"cached": True},
                row.get("cpu"),
            )
        return found

    def put_many(self, items: Iterable[tuple[Key, ExecResult]]) -> int:
        """Store results in one transaction; infrastructure errors are skipped. Returns how many were written."""
        now = time.time()
        rows = [
            (
                tuple(key),
                {
                    "results": list(r.results),
                    "stdout": r.stdout[:OUTPUT_LIMIT],
                    "stderr": r.stderr[:OUTPUT_LIMIT],
                    "duration": r.duration,
                    "cpu": r.cpu_seconds,
                    "created": now,
                },
            )
            for key, r in items
            if r.infra_error is None
        ]
        return self._store.set_many(rows)

    def __len__(self) -> int:
        return len(self._store)

    def _rows(self) -> Iterable[tuple[Key, dict]]:
        for key, row in self._store.items():
            if isinstance(key, tuple) and len(key) == 3:
                yield key, row

    def configs(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for (_, _, config), _row in self._rows():
            counts[config] = counts.get(config, 0) + 1
        return counts

    def export_jsonl(self, path: str | Path, config: str | None = None) -> int:
        """Write ExecRetrieval ``execution_cache.jsonl`` rows (newest verdict per pair if configs differ)."""
        latest: dict[tuple[str, str], tuple[float, list[str]]] = {}
        for (code_sha, tests_sha, cfg), row in self._rows():
            if config is not None and cfg != config:
                continue
            seen = latest.get((code_sha, tests_sha))
            if seen is None or row["created"] >= seen[0]:
                latest[(code_sha, tests_sha)] = (row["created"], row["results"])
        with open(path, "w", encoding="utf-8") as out:
            for (code_sha, tests_sha), (_, results) in sorted(latest.items()):
                row = {"code_sha256": code_sha, "tests_sha256": tests_sha, "results": results}
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
        self._store.close()

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

    A miss whose verdict the package ships for the same job config (:mod:`.bundled`, the bundled pools'
    verdicts) is served from there, not run; with ``cache=None`` every job runs. Misses run in batches
    that are stored as they finish, so an interrupted run keeps its work.
    """
    config = executor.config_key()
    keys: list[Key] = [(*job.key, job_config(config, job.timeout)) for job in jobs]
    counts: dict[Key, int] = {}
    first: dict[Key, Job] = {}
    for key, job in zip(keys, jobs, strict=True):
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, job)
    done = cache.get_many(counts) if cache is not None else {}
    if cache is not None and len(done) < len(counts):
        from .bundled import serve  # numpy and the files load only when the cache misses

        done.update(serve(k for k in counts if k not in done))
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
