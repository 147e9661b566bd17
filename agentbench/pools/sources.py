"""Pool sources: the tasks ``pool build`` reads, from JSONL or TOML ``[[task]]`` files."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from ..errors import PoolError
from ..execution import Job

__all__ = ["SourceTask", "read_sources"]


class SourceTask(BaseModel):
    """One row of a pool source file (JSONL or TOML ``[[task]]``)."""

    id: str | None = None
    domain: str | None = None
    query: str
    """What a developer types into a code search: short, no function name."""
    spec: str | None = None
    """What the generator is told (a docstring: inputs, return value, every convention the tests check)."""
    code: str
    tests: list[str] = Field(min_length=1)
    test_setup: str | None = None
    """Imports the asserts need, run before them (never taken from the solution's own imports)."""
    entry_point: str | None = None
    """The function the asserts call, where the code defines helpers before it (default: the first)."""
    location: str = ""

    def job(self, code: str, timeout: float) -> Job:
        return Job(code, tuple(self.tests), timeout, self.test_setup or "")

    @classmethod
    def from_raw(cls, data: dict, location: str, default_domain: str | None) -> SourceTask:
        data = dict(data)
        if isinstance(data.get("tests"), str):
            data["tests"] = [line.strip() for line in data["tests"].splitlines() if line.strip()]
        if not data.get("domain"):
            ident = str(data.get("id") or "")
            data["domain"] = default_domain or (ident.split("/", 1)[0] if "/" in ident else None)
        return cls.model_validate({**data, "location": location})


def _task_error(location: str, exc: ValidationError) -> PoolError:
    first = exc.errors()[0]
    field_name = ".".join(str(p) for p in first["loc"])
    return PoolError(f"{location}: field {field_name!r}: {first['msg']}")


def _read_file(path: Path) -> list[SourceTask]:
    tasks: list[SourceTask] = []
    if path.suffix == ".toml":
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise PoolError(f"{path}: invalid TOML ({exc})") from exc
        rows = data.get("task", [])
        if not isinstance(rows, list):
            raise PoolError(f"{path}: expected [[task]] tables")
        for i, row in enumerate(rows, start=1):
            try:
                tasks.append(SourceTask.from_raw(row, f"{path} task {i}", data.get("domain")))
            except ValidationError as exc:
                raise _task_error(f"{path} task {i}", exc) from exc
        return tasks
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PoolError(f"{path}:{lineno}: invalid JSON ({exc.msg})") from exc
        if not isinstance(row, dict):
            raise PoolError(f"{path}:{lineno}: expected a JSON object")
        try:
            tasks.append(SourceTask.from_raw(row, f"{path}:{lineno}", None))
        except ValidationError as exc:
            raise _task_error(f"{path}:{lineno}", exc) from exc
    return tasks


def read_sources(src: Path) -> list[SourceTask]:
    """A JSONL/TOML file or a directory of them (sorted by name) -> tasks in a stable order."""
    if not src.exists():
        raise PoolError(f"source {src} does not exist: pass a .jsonl/.toml file or a directory of them")
    files = sorted(p for p in src.iterdir() if p.suffix in (".jsonl", ".toml")) if src.is_dir() else [src]
    if not files:
        raise PoolError(f"{src} holds no .jsonl or .toml source files")
    tasks = [t for f in files for t in _read_file(f)]
    if not tasks:
        raise PoolError(f"{src} holds no tasks")
    return tasks
