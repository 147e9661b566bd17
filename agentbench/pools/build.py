"""Turning canonical implementations with tests into a pool of execution-verified distractors.

A distractor should be one plausible behaviour-breaking edit, the kind ExecRetrieval measures: it fails
some asserts and passes most. By default the builder therefore rejects, counting each reason:

- edits that are not near-misses, before running them (``Mutant.crude``): an operand swapped with a
  literal (``1 >> n``), a removed ``if`` that did more than return or raise a simple value;
- edits that leave something nobody writes (``x - 0``, ``-0``, ``n * 1``) or a comparison that can never
  hold (``len(x) == -1``, ``len(x) < 0``);
- by verdict: a mutant that survives every assert, fails every assert, raises on every assert, or
  exhausts a resource (runs out of CPU time, memory or recursion depth);
- by behaviour: a mutant that behaves exactly like another candidate of its task on every assert (the
  same value from every call, or the same exception type) is a duplicate: only one of them can be kept
  (``duplicate_behaviour``). A mutant that behaves like one of its task's guard removals (``n < 0`` for
  a count) counts as that removal: the removal itself is the one kept.

Behaviour is compared with a *probe* run (:func:`probe_job`): the asserts rewritten to record every call's
value and report a fingerprint of them, per assert, as the exception name, so the sandbox's per-assert
verdicts carry it. Only candidates whose per-assert verdicts already agree are probed.

Among the rest it prefers distinct bug types and, within them, the mutants failing the smallest share of
asserts. Mutants run with a CPU budget of ``MUTANT_CPU_SHARE`` of the time limit: whether a slow mutant
finishes depends on the machine, so none that needs more is kept. Verdicts are timed by CPU time, never by
wall-clock time, so selection is a pure function of (sources, verdicts, seed) and the same sources and
seed give the same pool on an idle and on a loaded machine.
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

__all__ = [
    "SourceTask",
    "BUILD_REPORT_FILE",
    "probe_job",
    "probe_fingerprint",
    "read_build_report",
    "write_build_report",
    "read_sources",
    "build_pool",
    "BuildReport",
    "MAX_PER_BUG_TYPE",
    "MUTANT_CPU_SHARE",
    "reject_reason",
]

MAX_PER_BUG_TYPE = 6  # candidates executed per bug type and task; bounds build time on long functions
EXPLORE_PER_BUG_TYPE = 3  # candidates per bug type evaluated before choosing, so subtler ones can win
MUTANT_CPU_SHARE = 0.2  # a mutant needing more than this share of the time limit in CPU is rejected
# Verdicts that say the mutant ran out of something rather than computed a wrong answer; where the limit
# strikes depends on the machine, so such mutants are never kept.
RESOURCE_OUTCOMES = (TIMEOUT, "ERROR:MemoryError", "ERROR:RecursionError")
RunJobs = Callable[[list[Job]], list[ExecResult]]
BUILD_REPORT_FILE = "build_report.json"  # beside the pool's JSONL files; read by `pool stats`
GUARD_REMOVAL = "remove_edge_case_check"


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


def write_build_report(report: BuildReport, out: Path) -> None:
    """The build summary beside the pool, so ``pool stats`` can show what the builder rejected and why."""
    from ..files import atomic_write_text

    atomic_write_text(out / BUILD_REPORT_FILE, json.dumps(report.to_json(), indent=2) + "\n")


def read_build_report(pool_dir: Path | str) -> dict | None:
    """The summary :func:`write_build_report` left in a pool directory; None for pools built elsewhere."""
    path = Path(pool_dir) / BUILD_REPORT_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# --- behaviour probes ----------------------------------------------------------------------------------

PROBE_PREFIX = "ERROR:Probe_"
# Run after the task's own setup, in the asserts' namespace. Values are rendered order-independently where
# Python's own order is arbitrary (sets, and dicts, which compare equal in any order) and without object
# addresses, so equal values give equal fingerprints in any process.
_PROBE_SETUP = r"""
import hashlib as _ab_hashlib
import re as _ab_re
_ab_vals = []
def _ab_repr(v, depth=0):
    if depth > 30:
        return '...'
    if isinstance(v, (set, frozenset)):
        return type(v).__name__ + '{' + ','.join(sorted(_ab_repr(x, depth + 1) for x in v)) + '}'
    if isinstance(v, dict):
        items = sorted(_ab_repr(k, depth + 1) + ':' + _ab_repr(x, depth + 1) for k, x in v.items())
        return type(v).__name__ + '{' + ','.join(items) + '}'
    if isinstance(v, (list, tuple)):
        return type(v).__name__ + '[' + ','.join(_ab_repr(x, depth + 1) for x in v) + ']'
    try:
        text = repr(v)
    except BaseException as exc:
        text = '<unrepresentable ' + type(exc).__name__ + '>'
    return type(v).__name__ + ':' + _ab_re.sub(r' at 0x[0-9a-fA-F]+', '', text)
def _ab_rec(v):
    _ab_vals.append(_ab_repr(v))
    return v
def _ab_emit(tag):
    digest = _ab_hashlib.sha256((tag + '\x00' + '\x01'.join(_ab_vals)).encode()).hexdigest()[:32]
    del _ab_vals[:]
    raise type('Probe_' + digest, (Exception,), {})()
"""


class _RecordCalls(ast.NodeTransformer):
    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        return ast.Call(func=ast.Name("_ab_rec", ast.Load()), args=[node], keywords=[])


def _probe_test(test: str) -> str:
    """The assert rewritten to record every call's value and end by raising its fingerprint, whose name
    holds the assert's own outcome (pass, FAIL or the exception type) and the values."""
    try:
        tree = ast.parse(test)
    except SyntaxError:
        return test  # the verdict is the same for every snippet: nothing to tell apart
    body = ast.unparse(ast.fix_missing_locations(_RecordCalls().visit(tree)))
    indented = "\n".join("    " + line for line in body.splitlines()) or "    pass"
    return (
        "del _ab_vals[:]\n"
        f"try:\n{indented}\n    _ab_tag = 'pass'\n"
        "except AssertionError:\n    _ab_tag = 'FAIL'\n"
        "except BaseException as _ab_exc:\n    _ab_tag = 'E:' + type(_ab_exc).__name__\n"
        "_ab_emit(_ab_tag)"
    )


def probe_job(tests: list[str] | tuple[str, ...], setup: str | None, code: str, timeout: float) -> Job:
    """A job whose per-assert verdicts are fingerprints of the snippet's behaviour on each assert: two
    snippets with the same fingerprints return the same values (or raise the same exception types) on
    every call the asserts make."""
    return Job(code, tuple(_probe_test(t) for t in tests), timeout, (setup or "") + _PROBE_SETUP)


def probe_fingerprint(result: ExecResult) -> tuple[str, ...] | None:
    """The per-assert fingerprints of a probe run; None when the probe did not finish (no verdict)."""
    if result.infra_error or not result.results:
        return None
    if not all(r.startswith(PROBE_PREFIX) or r == "pass" for r in result.results):
        return None  # a timeout or a crash of the whole run: nothing to compare
    return tuple(result.results)


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


def reject_reason(result: ExecResult, realistic: bool = True) -> str | None:
    """Why a mutant with this verdict makes no (realistic) distractor; None: keep it."""
    outcomes = result.results
    if result.infra_error:
        return "infrastructure_error"
    if any(r in RESOURCE_OUTCOMES for r in outcomes):
        return "exhausts_resources"
    if result.passed:
        return "survived_all_asserts"
    if not realistic:
        return None
    if all(r.startswith("ERROR") for r in outcomes):
        return "raises_on_every_assert"
    if not any(r == "pass" for r in outcomes):
        return "fails_every_assert"
    return None


def failing_share(result: ExecResult) -> float:
    return sum(r != "pass" for r in result.results) / max(len(result.results), 1)


@dataclass
class _TaskPlan:
    """Mutants of one task in evaluation order, with the verdicts of the evaluated prefix."""

    order: list[Mutant]
    explore: int
    realistic: bool = True
    verdicts: list[ExecResult] = field(default_factory=list)
    probes: dict[int, tuple[str, ...] | None] = field(default_factory=dict)  # order index -> fingerprint
    want: list[int] = field(default_factory=list)  # candidates to probe before choosing

    def kept(self) -> list[tuple[int, Mutant, ExecResult]]:
        return [
            (i, m, r)
            for i, (m, r) in enumerate(zip(self.order, self.verdicts, strict=False))
            if reject_reason(r, self.realistic) is None
        ]

    def distinct(self, kept: list[tuple[int, Mutant, ExecResult]]) -> tuple[list, int] | None:
        """One candidate per behaviour, and how many duplicates were left out; None (and ``want`` set)
        while candidates whose verdicts agree are not yet probed.

        Candidates with different per-assert verdicts behave differently; among those that agree, equal
        probe fingerprints (or a probe that did not finish: no proof of a difference) are one behaviour.
        A class holding a guard removal is kept as that removal; otherwise as its first-ranked member."""
        groups: dict[tuple[str, ...], list[tuple[int, Mutant, ExecResult]]] = {}
        for k in kept:
            groups.setdefault(tuple(k[2].results), []).append(k)
        self.want = [k[0] for g in groups.values() if len(g) > 1 for k in g if k[0] not in self.probes]
        if self.want:
            return None
        out: list[tuple[int, Mutant, ExecResult]] = []
        for group in groups.values():
            classes: list[list[tuple[int, Mutant, ExecResult]]] = []
            for k in group:
                fp = self.probes.get(k[0])
                for c in classes:
                    other = self.probes.get(c[0][0])
                    if fp is None or other is None or fp == other:
                        c.append(k)
                        break
                else:
                    classes.append([k])
            for c in classes:
                out.append(next((k for k in c if k[1].bug_type == GUARD_REMOVAL), c[0]))
        return sorted(out, key=lambda k: k[0]), len(kept) - len(out)

    def choose(self, n: int) -> list[tuple[Mutant, ExecResult]] | None:
        """Subtle distinct bug types first, then any; None while more evaluation (or probing) could change
        the answer.

        Once ``explore`` candidates are evaluated (or all are) and ``n`` usable ones behave differently,
        the choice is made: the least-failing usable mutant of each bug type, types ordered by that
        share, then the other usable mutants by share. Ties keep the seeded evaluation order.
        """
        kept = self.kept()
        done = len(self.verdicts) >= len(self.order)
        self.want = []
        if not done and (len(self.verdicts) < self.explore or len(kept) < n):
            return None
        found = self.distinct(kept)
        if found is None:
            return None
        kept = found[0]
        if not done and len(kept) < n:
            return None
        ranked = sorted(kept, key=lambda k: (failing_share(k[2]), k[0]))
        best: dict[str, tuple[int, Mutant, ExecResult]] = {}
        for k in ranked:
            best.setdefault(k[1].bug_type, k)
        first = list(best.values())
        rest = [k for k in ranked if k not in first]
        return [(m, r) for _, m, r in (first + rest)[:n]]


def _function_name(code: str, entry_point: str | None = None) -> str:
    names = [
        node.name for node in ast.parse(code).body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    if entry_point and entry_point in names:
        return entry_point
    return names[0] if names else ""


def build_pool(
    tasks: list[SourceTask],
    run: RunJobs,
    *,
    distractors: int = 4,
    seed: int = 0,
    name: str = "pool",
    timeout: float = 10.0,
    realistic: bool = True,
) -> tuple[Pool, BuildReport]:
    """Verify canonicals, generate and verify mutants, and assemble the pool with sequential ids.

    ``realistic=False`` also keeps crude edits and mutants that fail or raise on every assert.

    A build that drops every task is a :class:`PoolError` naming the first reason: an empty pool is of
    no use, and returning one would let a caller overwrite a good pool with it."""
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
    canon_jobs = [t.job(t.code, timeout) for t in tasks]
    canon_results = run(canon_jobs)

    # 2. mutants, evaluated in rounds until each task has its distractors (or runs out of candidates)
    plans: dict[int, _TaskPlan] = {}
    dropped = report.dropped_queries
    for idx, (t, ok, res) in enumerate(zip(tasks, parsed, canon_results, strict=True)):
        if not ok:
            report.dropped_queries.append(f"{ids[idx]}: canonical does not parse")
        elif not res.passed:
            bad = ", ".join(f"{i}:{r}" for i, r in enumerate(res.results) if r != "pass")
            report.dropped_queries.append(f"{ids[idx]}: canonical fails its asserts ({bad})")
        else:
            candidates = []
            for m in find_mutants(t.code):
                if realistic and m.crude:
                    report.rejects[m.crude] += 1
                else:
                    candidates.append(m)
            order = _order(candidates, random.Random(f"{seed}:{ids[idx]}"))
            explore = EXPLORE_PER_BUG_TYPE * len({m.bug_type for m in order})
            plans[idx] = _TaskPlan(order, explore, realistic)
    if not plans:  # before any mutant is executed
        first = f"; first: {' '.join(dropped[0].split())[:200]}" if dropped else ""
        raise PoolError(
            f"every task was dropped ({len(dropped)} of {len(tasks)}{first}): fix the canonicals or "
            "their asserts so that each canonical passes all of them"
        )
    chosen_by_task: dict[int, list[tuple[Mutant, ExecResult]]] = {}
    batch = max(distractors, 1) + 2
    mutant_timeout = timeout * MUTANT_CPU_SHARE
    while True:
        pending = {i: p for i, p in plans.items() if i not in chosen_by_task}
        for i, p in list(pending.items()):
            choice = p.choose(distractors)
            if choice is not None:
                chosen_by_task[i] = choice
                del pending[i]
        if not pending:
            break
        probes = {i: list(p.want) for i, p in pending.items() if p.want}
        slices = {
            i: p.order[len(p.verdicts) : max(p.explore, len(p.verdicts) + batch)]
            for i, p in pending.items()
            if i not in probes
        }
        jobs = [tasks[i].job(m.code, mutant_timeout) for i, ms in slices.items() for m in ms]
        jobs += [
            probe_job(tasks[i].tests, tasks[i].test_setup, plans[i].order[j].code, mutant_timeout)
            for i, js in probes.items()
            for j in js
        ]
        results = iter(run(jobs))
        for i, ms in slices.items():
            plans[i].verdicts.extend(next(results) for _ in ms)
        for i, js in probes.items():
            for j in js:
                plans[i].probes[j] = probe_fingerprint(next(results))
    for p in plans.values():
        for r in p.verdicts:
            if reason := reject_reason(r, p.realistic):
                report.rejects[reason] += 1
        found = p.distinct(p.kept())
        if found:
            report.rejects["duplicate_behaviour"] += found[1]

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
                spec=t.spec.strip() if t.spec else None,
                test_suite=list(t.tests),
                test_setup=t.test_setup.strip() if t.test_setup else None,
                correct_corpus_ids=[canon_id],
                paired_distractor_corpus_ids=distractor_ids,
                entry_id=ids[idx],
                metadata={
                    "domain": t.domain or "general",
                    "function_name": _function_name(t.code, t.entry_point),
                    "seed": seed,
                },
            )
        )
        report.distractor_histogram[len(chosen)] += 1
    report.queries_out = len(queries)
    return Pool(name=name, path="", queries=queries, corpus=corpus, distractors=metas), report
