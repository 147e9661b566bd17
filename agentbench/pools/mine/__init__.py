"""`agentbench pool mine`: a Python repository's functions and unit tests as an execution-verified pool.

Stages (each its own module):

- :mod:`.source`: the project directory, or an sdist archive unpacked safely;
- :mod:`.discover`: modules, module-level names and the functions a task can be made of (``ast``);
- :mod:`.pytest_tests`, :mod:`.unittest_tests`, :mod:`.testbody`, :mod:`.doctests`: the asserts each test
  style writes, read as standalone asserts by :mod:`.classify` (or skipped, with the reason);
- :mod:`.closure` and :mod:`.effects`: a function's code with what it needs, and whether it has side
  effects; :mod:`.assemble`: query, spec, code and tests of a task;
- :mod:`.verify`: sandbox verification, the builder's distractors, the other functions as snippets;
- :mod:`.report`: the per-file report.

The repository's code is only ever parsed here; it runs only in the sandbox (the executor ``run`` is
given).
"""

from __future__ import annotations

import ast
import time
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from ...errors import ConfigError, PoolError
from ..models import Pool
from ..sources import SourceTask
from .assemble import make_task
from .classify import Candidate
from .closure import Unassemblable, assemble, function_source
from .discover import Function, ProjectIndex
from .doctests import read_doctests
from .effects import side_effect
from .pytest_tests import read_test_module
from .report import REPORT_FILE, MineReport, write_mined
from .source import ARCHIVE_SUFFIXES, open_source, project_files
from .verify import Plan, RunJobs, build_mined_pool, pick_asserts, verify_asserts

__all__ = [
    "mine_pool",
    "discover_project",
    "MineReport",
    "write_mined",
    "open_source",
    "REPORT_FILE",
    "ARCHIVE_SUFFIXES",
    "MAX_ASSERTS",
    "MIN_ASSERTS",
]

MAX_ASSERTS = 25  # asserts per task; more add execution time, not signal
MIN_ASSERTS = 3  # fewer cannot tell a near-miss from a crash: the builder keeps no distractor


def _read(root: Path):
    files = project_files(root)
    trees: dict[str, tuple[str, ast.Module]] = {}
    unparsed: dict[str, str] = {}
    for f in files:
        try:
            source = f.path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            unparsed[f.rel] = "not UTF-8 text"
            continue
        except OSError as exc:
            unparsed[f.rel] = f"cannot read: {exc.strerror}"
            continue
        try:
            tree = ast.parse(source, filename=f.rel)
        except (SyntaxError, ValueError) as exc:
            line = getattr(exc, "lineno", None)
            unparsed[f.rel] = (
                f"does not parse ({getattr(exc, 'msg', exc)}{f' at line {line}' if line else ''})"
            )
            continue
        trees[f.rel] = (source, tree)
    return files, trees, unparsed


def discover_project(root: Path, display: str | None = None) -> MineReport:
    """Everything static: files, functions, every assert read and classified, and each function's plan
    (assembled code, or the reason it cannot be a task). Runs nothing."""
    display = display or root.name
    files, trees, unparsed = _read(root)
    if not files:
        others = sum(1 for p in root.rglob("*") if p.is_file()) if root.is_dir() else 0
        raise PoolError(
            f"{display} is not a Python project: it holds no .py files ({others} other files); pass a project "
            "checkout, an unpacked sdist or an sdist archive"
        )
    if len(unparsed) == len(files):
        raise PoolError(
            f"{display}: none of its {len(files)} .py files parses (first: {next(iter(unparsed.items()))})"
        )
    index = ProjectIndex.build(files, trees)
    functions = index.functions()
    report = MineReport(
        source=display,
        files=[(f.rel, f.is_test) for f in files],
        unparsed=unparsed,
        functions={},
        tests={},
        candidates=[],
        plans={},
    )
    for fn in functions.values():
        report.functions.setdefault(fn.module.rel, []).append(fn.qualname)
    for f in files:
        if f.rel not in trees:
            continue
        if f.is_test:
            source, tree = trees[f.rel]
            module = index.file_module(f.rel, source, tree)
            cands, n = read_test_module(index, functions, module)
            report.tests[f.rel] = n
        elif f.rel in index.by_rel:
            cands = read_doctests(index, functions, index.by_rel[f.rel])
        else:
            continue
        report.candidates += cands
    _plan(index, functions, report)
    return report


def _plan(index: ProjectIndex, functions: dict[str, Function], report: MineReport) -> None:
    by_fn: dict[str, list[Candidate]] = {}
    for c in report.candidates:
        if c.kept and c.function:
            by_fn.setdefault(c.function, []).append(c)
    for key, fn in functions.items():
        plan = Plan(fn, "", by_fn.get(key, []))
        report.plans[key] = plan
        if not plan.candidates:
            plan.status = "no_asserts"
            continue
        try:
            assembled = assemble(index, fn)
        except Unassemblable as exc:
            plan.status, plan.detail = exc.reason, exc.detail
        else:
            plan.code = assembled.code
            for modname, node in assembled.functions:
                found = side_effect(index.modules[modname], node)
                if found is not None:
                    where = "" if node is fn.node else f" (in {node.name})"
                    plan.status, plan.detail = found[0], found[1] + where
                    break
        if plan.status != "task":
            for c in plan.candidates:
                c.skip(plan.status, f"{fn.qualname}: {plan.detail}")
            continue
        seen: set[str] = set()
        for c in plan.candidates:
            if c.text in seen:
                c.skip("duplicate", "the same assert is already kept")
            seen.add(c.text or "")


def check_usable(report: MineReport, min_asserts: int = MIN_ASSERTS) -> None:
    """Functions with fewer than ``min_asserts`` usable asserts are not tasks; none left is an error."""
    for plan in report.plans.values():
        if plan.status == "task" and len(plan.kept) < min_asserts:
            if plan.kept:
                plan.status = "too_few_asserts"
                plan.detail = f"{len(plan.kept)} usable asserts (needs {min_asserts})"
                for c in plan.kept:
                    c.skip("too_few_asserts", plan.detail)
            else:
                plan.status = "no_asserts"
    if not any(p.status == "task" for p in report.plans.values()):
        raise _no_tests_error(report, min_asserts)


def _no_tests_error(report: MineReport, min_asserts: int) -> PoolError:
    n_src = sum(not t for _, t in report.files)
    n_fn = sum(len(v) for v in report.functions.values())
    if not report.candidates:
        return PoolError(
            f"{report.source}: found {n_src} Python modules with {n_fn} functions but no tests (no test_*.py or "
            "*_test.py files, tests/ directory or doctest examples): mining needs unit tests or doctests that "
            "call the project's functions"
        )
    reasons = Counter(c.status for c in report.candidates if not c.kept)
    top = ", ".join(f"{r} {n}" for r, n in reasons.most_common(3))
    return PoolError(
        f"{report.source}: found {sum(report.tests.values())} tests and {len(report.candidates)} asserts, but no "
        f"function has {min_asserts} asserts that can stand alone (skipped: {top}): mining needs asserts that "
        "call a module-level function with literal arguments"
    )


def mine_pool(
    root: Path,
    run: RunJobs,
    *,
    display: str | None = None,
    distractors: int = 4,
    seed: int = 0,
    name: str = "pool",
    timeout: float = 10.0,
    max_asserts: int = MAX_ASSERTS,
    min_asserts: int = MIN_ASSERTS,
    report: MineReport | None = None,
) -> tuple[Pool, MineReport]:
    """Mine the project at ``root`` into a pool, executing only through ``run`` (the sandbox).

    ``report``: the result of :func:`discover_project` and :func:`check_usable` when already done.
    Raises :class:`PoolError` when ``root`` is not a Python project, has no usable tests, or yields no
    verified task (a pool with zero tasks is never returned)."""
    if max_asserts < min_asserts:
        raise ConfigError(f"--max-asserts ({max_asserts}) must be at least --min-asserts ({min_asserts})")
    if report is None:
        began = time.perf_counter()
        report = discover_project(root, display)
        check_usable(report, min_asserts)
        report.timings["discovery_s"] = time.perf_counter() - began
    usable = [p for p in report.plans.values() if p.status == "task"]
    sandbox_began = time.perf_counter()

    verify_asserts(usable, run, timeout)
    tasks = _verified_tasks(usable, max_asserts, min_asserts)
    if not tasks:
        failing = sum(c.status == "fails_in_sandbox" for c in report.candidates)
        raise PoolError(
            f"{report.source}: no function kept {min_asserts} asserts that pass in the sandbox ({len(usable)} "
            f"functions tried, {failing} asserts failed there); nothing was written"
        )
    pool, build, extra = build_mined_pool(
        tasks,
        report.plans,
        _other_functions(report, {t.id for t in tasks}),
        run,
        distractors=distractors,
        seed=seed,
        name=name,
        timeout=timeout,
    )
    _mark_flaky(report, tasks, {str(q.entry_id) for q in pool.queries})
    report.build, report.others, report.pool = build, extra, pool
    report.timings["sandbox_s"] = time.perf_counter() - sandbox_began
    if not pool.queries:
        raise PoolError(
            f"{report.source}: every task failed when the builder verified it again; nothing was written"
        )
    return pool, report


def _verified_tasks(usable: list[Plan], max_asserts: int, min_asserts: int) -> list[SourceTask]:
    """A task for each function that kept ``min_asserts`` asserts passing alone in the sandbox."""
    tasks = []
    for plan in usable:
        pick_asserts(plan, max_asserts)
        kept = plan.kept
        if len(kept) < min_asserts:
            plan.status = "too_few_asserts" if kept else "fails_in_sandbox"
            plan.detail = f"{len(kept)} of {len(plan.candidates)} asserts pass alone (needs {min_asserts})"
            for c in kept:
                c.skip("too_few_asserts", plan.detail)
            continue
        tasks.append(make_task(plan.fn, plan.code, [c.text or "" for c in kept], plan.setup()))
    return tasks


def _other_functions(report: MineReport, task_keys: set[str | None]) -> list[tuple[Function, str]]:
    """Every function that is not a task, with its own source, for the corpus's "other" snippets."""
    others: list[tuple[Function, str]] = []
    for key, plan in report.plans.items():
        if key in task_keys:
            continue
        try:
            others.append((plan.fn, function_source(plan.fn)))
        except Unassemblable:
            continue
    return others


def _mark_flaky(report: MineReport, tasks: list[SourceTask], built: set[str]) -> None:
    """Tasks the builder dropped: their canonical failed when it ran again."""
    for t in tasks:
        if t.id not in built:
            plan = report.plans[t.id or ""]
            plan.status, plan.detail = (
                "flaky_in_sandbox",
                "the canonical failed when the builder ran it again",
            )
            for c in plan.kept:
                c.skip("flaky_in_sandbox", plan.detail)


def mine_source(
    src: Path,
    sandbox: Callable[[], AbstractContextManager[RunJobs]],
    *,
    min_asserts: int = MIN_ASSERTS,
    **kwargs,
) -> tuple[Pool, MineReport]:
    """:func:`mine_pool` on a directory or an sdist archive (unpacked to a temporary directory).

    ``sandbox()`` opens the executor only once discovery found something to run: bad input fails at
    once, without starting a sandbox."""
    if kwargs.get("max_asserts", MAX_ASSERTS) < min_asserts:
        raise ConfigError(
            f"--max-asserts ({kwargs['max_asserts']}) must be at least --min-asserts ({min_asserts})"
        )
    with open_source(src) as root:
        began = time.perf_counter()
        report = discover_project(root, src.name)
        check_usable(report, min_asserts)
        report.timings["discovery_s"] = time.perf_counter() - began
        with sandbox() as run:
            return mine_pool(root, run, min_asserts=min_asserts, report=report, **kwargs)


__all__ += ["mine_source", "check_usable"]
