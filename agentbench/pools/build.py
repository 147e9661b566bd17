"""Turning canonical implementations with tests into a pool of execution-verified distractors.

Every candidate mutant is executed; a mutant is kept only when it fails at least one assert. Selection
prefers distinct bug types and is a pure function of (sources, verdicts, seed), so the same sources and
seed always give the same pool.
"""

from __future__ import annotations

import ast
import json
import random
import tomllib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from ..errors import PoolError
from ..execution import TIMEOUT, ExecResult, Job
from .models import DistractorMeta, Pool, Query, Snippet
from .mutate import Mutant, find_mutants

__all__ = ["SourceTask", "read_sources", "build_pool", "BuildReport", "MAX_PER_BUG_TYPE"]

MAX_PER_BUG_TYPE = 6  # candidates executed per bug type and task; bounds build time on long functions
RunJobs = Callable[[list[Job]], list[ExecResult]]


class SourceTask(BaseModel):
    """One row of a pool source file (JSONL or TOML ``[[task]]``)."""

    id: str | None = None
    domain: str | None = None
    query: str
    code: str
    tests: list[str] = Field(min_length=1)
    location: str = ""

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


@dataclass
class BuildReport:
    queries_in: int = 0
    queries_out: int = 0
    distractor_histogram: Counter = field(default_factory=Counter)  # n distractors -> queries
    bug_types: Counter = field(default_factory=Counter)
    rejects: Counter = field(default_factory=Counter)  # reason -> count
    dropped_queries: list[str] = field(default_factory=list)  # "task: reason"

    def to_json(self) -> dict:
        return {
            "queries_in": self.queries_in,
            "queries_out": self.queries_out,
            "queries_by_distractor_count": {
                str(k): self.distractor_histogram.get(k, 0) for k in range(4, -1, -1)
            },
            "bug_types": dict(sorted(self.bug_types.items())),
            "rejects": dict(sorted(self.rejects.items())),
            "dropped_queries": self.dropped_queries,
        }


def _order(mutants: list[Mutant], rng: random.Random) -> list[Mutant]:
    """Seeded evaluation order: bug types interleaved round-robin, so early candidates differ in type."""
    by_type: dict[str, list[Mutant]] = {}
    for m in mutants:
        by_type.setdefault(m.bug_type, []).append(m)
    types = sorted(by_type)
    rng.shuffle(types)
    for t in types:
        rng.shuffle(by_type[t])
        del by_type[t][MAX_PER_BUG_TYPE:]
    ordered: list[Mutant] = []
    for rank in range(MAX_PER_BUG_TYPE):
        ordered.extend(by_type[t][rank] for t in types if rank < len(by_type[t]))
    return ordered


@dataclass
class _TaskPlan:
    """Mutants of one task in evaluation order, with the verdicts of the evaluated prefix."""

    order: list[Mutant]
    verdicts: list[ExecResult] = field(default_factory=list)

    def killed(self) -> list[tuple[Mutant, ExecResult]]:
        """Mutants that fail an assert by a wrong result or an exception. A mutant that runs out of time
        is not kept: whether a slow mutant finishes depends on the machine's load, so its verdict is not
        reproducible."""
        return [
            (m, r)
            for m, r in zip(self.order, self.verdicts, strict=False)
            if not r.passed and not r.infra_error and TIMEOUT not in r.results
        ]

    def choose(self, n: int) -> list[tuple[Mutant, ExecResult]] | None:
        """Distinct bug types first, then any; None while more evaluation could change the answer."""
        distinct: list[tuple[Mutant, ExecResult]] = []
        for m, r in self.killed():
            if m.bug_type not in {d[0].bug_type for d in distinct}:
                distinct.append((m, r))
        if len(distinct) >= n:
            return distinct[:n]
        if len(self.verdicts) < len(self.order):
            return None
        rest = [k for k in self.killed() if k not in distinct]
        return (distinct + rest)[:n]


def _function_name(code: str) -> str:
    for node in ast.parse(code).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return node.name
    return ""


def build_pool(
    tasks: list[SourceTask],
    run: RunJobs,
    *,
    distractors: int = 4,
    seed: int = 0,
    name: str = "pool",
    timeout: float = 10.0,
) -> tuple[Pool, BuildReport]:
    """Verify canonicals, generate and verify mutants, and assemble the pool with sequential ids."""
    report = BuildReport(queries_in=len(tasks))
    ids = [t.id or f"task_{i:04d}" for i, t in enumerate(tasks, start=1)]
    dupes = [i for i, n in Counter(ids).items() if n > 1]
    if dupes:
        raise PoolError(f"task id {dupes[0]!r} is used more than once in the sources; ids must be unique")

    # 1. canonicals
    parsed: list[bool] = []
    for t in tasks:
        try:
            ast.parse(t.code)
            parsed.append(True)
        except SyntaxError:
            parsed.append(False)
    canon_jobs = [Job(t.code, tuple(t.tests), timeout) for t in tasks]
    canon_results = run(canon_jobs)

    # 2. mutants, evaluated in rounds until each task has its distractors (or runs out of candidates)
    plans: dict[int, _TaskPlan] = {}
    for idx, (t, ok, res) in enumerate(zip(tasks, parsed, canon_results, strict=True)):
        if not ok:
            report.dropped_queries.append(f"{ids[idx]}: canonical does not parse")
        elif not res.passed:
            bad = ", ".join(f"{i}:{r}" for i, r in enumerate(res.results) if r != "pass")
            report.dropped_queries.append(f"{ids[idx]}: canonical fails its asserts ({bad})")
        else:
            plans[idx] = _TaskPlan(_order(find_mutants(t.code), random.Random(f"{seed}:{ids[idx]}")))
    chosen_by_task: dict[int, list[tuple[Mutant, ExecResult]]] = {}
    batch = max(distractors, 1) + 2
    while True:
        pending = {i: p for i, p in plans.items() if i not in chosen_by_task}
        for i, p in list(pending.items()):
            choice = p.choose(distractors)
            if choice is not None:
                chosen_by_task[i] = choice
                del pending[i]
        if not pending:
            break
        slices = {i: p.order[len(p.verdicts) : len(p.verdicts) + batch] for i, p in pending.items()}
        jobs = [Job(m.code, tuple(tasks[i].tests), timeout) for i, ms in slices.items() for m in ms]
        results = iter(run(jobs))
        for i, ms in slices.items():
            plans[i].verdicts.extend(next(results) for _ in ms)
    for p in plans.values():
        for r in p.verdicts:
            if r.infra_error:
                report.rejects["infrastructure_error"] += 1
            elif TIMEOUT in r.results:
                report.rejects["timed_out"] += 1
            elif r.passed:
                report.rejects["survived_all_asserts"] += 1

    # 3. assemble in source order
    queries: list[Query] = []
    corpus: list[Snippet] = []
    metas: list[DistractorMeta] = []
    all_codes: set[str] = {tasks[i].code for i in plans}
    for idx, t in enumerate(tasks):
        if idx not in plans:
            continue
        chosen = []
        for m, res in chosen_by_task[idx]:
            if m.code in all_codes:
                report.rejects["duplicate_code"] += 1
                continue
            chosen.append((m, res))
            all_codes.add(m.code)
        qnum = len(queries) + 1
        qid = f"q_{qnum:04d}"
        canon_id = f"c_{len(corpus) + 1:04d}"
        corpus.append(Snippet(corpus_id=canon_id, code=t.code, label="correct", source_entry_id=ids[idx]))
        distractor_ids = []
        for m, res in chosen:
            cid = f"c_{len(corpus) + 1:04d}"
            distractor_ids.append(cid)
            corpus.append(
                Snippet(
                    corpus_id=cid,
                    code=m.code,
                    label="incorrect",
                    bug_type=m.bug_type,
                    source_entry_id=ids[idx],
                )
            )
            metas.append(
                DistractorMeta(
                    corpus_id=cid,
                    query_id=qid,
                    canonical_corpus_id=canon_id,
                    bug_type=m.bug_type,
                    line_number=m.line_number,
                    line_before=m.line_before,
                    line_after=m.line_after,
                    failing_tests=[i for i, r in enumerate(res.results) if r != "pass"],
                    mutation=m.description,
                )
            )
            report.bug_types[m.bug_type] += 1
        queries.append(
            Query(
                query_id=qid,
                query=t.query,
                test_suite=list(t.tests),
                correct_corpus_ids=[canon_id],
                paired_distractor_corpus_ids=distractor_ids,
                entry_id=ids[idx],
                metadata={
                    "domain": t.domain or "general",
                    "function_name": _function_name(t.code),
                    "seed": seed,
                },
            )
        )
        report.distractor_histogram[len(chosen)] += 1
    report.queries_out = len(queries)
    return Pool(name=name, path="", queries=queries, corpus=corpus, distractors=metas), report
