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

This module runs the build; its parts live beside it: :mod:`.sources` (the tasks read),
:mod:`.behaviour` (the probes), :mod:`.selection` (which mutants a task keeps) and :mod:`.build_report`.
"""

from __future__ import annotations

import ast
import random
from collections import Counter
from collections.abc import Callable

from ..errors import PoolError
from ..execution import ExecResult, Job
from .behaviour import probe_fingerprint, probe_job
from .build_report import BUILD_REPORT_FILE, BuildReport, read_build_report, write_build_report
from .models import DistractorMeta, Pool, Query, Snippet
from .mutate import Mutant, find_mutants
from .selection import EXPLORE_PER_BUG_TYPE, MAX_PER_BUG_TYPE, TaskPlan, evaluation_order, reject_reason
from .sources import SourceTask, read_sources

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

MUTANT_CPU_SHARE = 0.2  # a mutant needing more than this share of the time limit in CPU is rejected
RunJobs = Callable[[list[Job]], list[ExecResult]]
Chosen = list[tuple[Mutant, ExecResult]]  # a task's distractors with their verdicts


def build_pool(
    tasks: list[SourceTask],
    run: RunJobs,
    *,
    distractors: int = 4,
    seed: int = 0,
    name: str = "pool",
    timeout: float = 10.0,
    realistic: bool = True,
    top_up: bool = True,
) -> tuple[Pool, BuildReport]:
    """Verify canonicals, generate and verify mutants, and assemble the pool with sequential ids.

    ``realistic=False`` also keeps crude edits and mutants that fail or raise on every assert.
    ``top_up`` lets a task short of ``distractors`` realistic ones try the top-up operators' edits and
    then take mutants failing every assert (:meth:`TaskPlan.choose`).

    A build that drops every task is a :class:`PoolError` naming the first reason: an empty pool is of
    no use, and returning one would let a caller overwrite a good pool with it."""
    report = BuildReport(queries_in=len(tasks), top_up=top_up and realistic)
    ids = _task_ids(tasks)
    plans = _plan_tasks(tasks, ids, run, timeout=timeout, seed=seed, realistic=realistic, report=report)
    chosen_by_task = _evaluate(tasks, plans, run, distractors, timeout * MUTANT_CPU_SHARE)
    _count_rejects(plans, report)
    pool = _assemble(tasks, ids, chosen_by_task, seed=seed, name=name, report=report)
    return pool, report


def _task_ids(tasks: list[SourceTask]) -> list[str]:
    """Each task's id (``task_0001``, ... where the source gives none); a repeated id is a PoolError."""
    ids = [t.id or f"task_{i:04d}" for i, t in enumerate(tasks, start=1)]
    dupes = [i for i, n in Counter(ids).items() if n > 1]
    if dupes:
        raise PoolError(f"task id {dupes[0]!r} is used more than once in the sources; ids must be unique")
    return ids


def _plan_tasks(
    tasks: list[SourceTask],
    ids: list[str],
    run: RunJobs,
    *,
    timeout: float,
    seed: int,
    realistic: bool,
    report: BuildReport,
) -> dict[int, TaskPlan]:
    """Step 1: every canonical on its asserts; for each that parses and passes them all (by task index),
    its mutants in evaluation order. The others are dropped, with the reason in the report."""
    results = run([t.job(t.code, timeout) for t in tasks])
    plans: dict[int, TaskPlan] = {}
    for idx, (t, res) in enumerate(zip(tasks, results, strict=True)):
        problem = _canonical_problem(t, res)
        if problem:
            report.dropped_queries.append(f"{ids[idx]}: {problem}")
        else:
            plans[idx] = _task_plan(t, ids[idx], seed, realistic, report)
    if not plans:  # before any mutant is executed
        dropped = report.dropped_queries
        first = f"; first: {' '.join(dropped[0].split())[:200]}" if dropped else ""
        raise PoolError(
            f"every task was dropped ({len(dropped)} of {len(tasks)}{first}): fix the canonicals or "
            "their asserts so that each canonical passes all of them"
        )
    return plans


def _canonical_problem(task: SourceTask, result: ExecResult) -> str | None:
    """Why a task's canonical cannot anchor a query; None when it parses and passes every assert."""
    try:
        ast.parse(task.code)
    except SyntaxError:
        return "canonical does not parse"
    if not result.passed:
        bad = ", ".join(f"{i}:{r}" for i, r in enumerate(result.results) if r != "pass")
        return f"canonical fails its asserts ({bad})"
    return None


def _task_plan(task: SourceTask, task_id: str, seed: int, realistic: bool, report: BuildReport) -> TaskPlan:
    """The task's mutants in a seeded evaluation order; crude ones are counted in the report's rejects
    instead unless ``realistic`` is off."""
    candidates = []
    for m in find_mutants(task.code):
        if realistic and m.crude:
            report.rejects[m.crude] += 1
        else:
            candidates.append(m)
    order = evaluation_order(candidates, random.Random(f"{seed}:{task_id}"))
    explore = EXPLORE_PER_BUG_TYPE * len({m.bug_type for m in order})
    reserve: list = []
    if report.top_up:
        spare = [m for m in find_mutants(task.code, top_up=True) if not m.crude]
        reserve = evaluation_order(spare, random.Random(f"{seed}:{task_id}:top-up"))
    return TaskPlan(order, explore, realistic, top_up=report.top_up, reserve=reserve)


def _evaluate(
    tasks: list[SourceTask], plans: dict[int, TaskPlan], run: RunJobs, distractors: int, mutant_timeout: float
) -> dict[int, Chosen]:
    """Step 2: rounds of sandbox jobs until every task has chosen its distractors (or runs out of
    candidates); by task index, the mutants chosen with their verdicts."""
    chosen_by_task: dict[int, Chosen] = {}
    batch = max(distractors, 1) + 2
    while True:
        pending: dict[int, TaskPlan] = {}
        for i, p in plans.items():
            if i in chosen_by_task:
                continue
            choice = p.choose(distractors)
            if choice is None:
                pending[i] = p
            else:
                chosen_by_task[i] = choice
        if not pending:
            return chosen_by_task
        _run_round(tasks, pending, run, batch, mutant_timeout)


def _run_round(
    tasks: list[SourceTask], pending: dict[int, TaskPlan], run: RunJobs, batch: int, mutant_timeout: float
) -> None:
    """One call of ``run`` for every task still choosing: the probes a task asked for (its candidates'
    verdicts agree), or else its next ``batch`` candidates (at least its exploration budget)."""
    probes = {i: list(p.want) for i, p in pending.items() if p.want}
    slices = {
        i: p.order[len(p.verdicts) : max(p.explore, len(p.verdicts) + batch)]
        for i, p in pending.items()
        if i not in probes
    }
    jobs = [tasks[i].job(m.code, mutant_timeout) for i, ms in slices.items() for m in ms]
    jobs += [
        probe_job(tasks[i].tests, tasks[i].test_setup, pending[i].order[j].code, mutant_timeout)
        for i, js in probes.items()
        for j in js
    ]
    results = iter(run(jobs))
    for i, ms in slices.items():
        pending[i].verdicts.extend(next(results) for _ in ms)
    for i, js in probes.items():
        for j in js:
            pending[i].probes[j] = probe_fingerprint(next(results))


def _count_rejects(plans: dict[int, TaskPlan], report: BuildReport) -> None:
    """Every evaluated mutant that was not kept, by reason: its verdict, or a behaviour another shares."""
    for p in plans.values():
        for i, r in enumerate(p.verdicts):
            if (reason := reject_reason(r, p.realistic)) and i not in p.topped_up:
                report.rejects[reason] += 1
        report.topped_up += len(p.topped_up)
        found = p.distinct(p.kept())
        if found:
            report.rejects["duplicate_behaviour"] += found[1]


# --- step 3: the pool -----------------------------------------------------------------------------


def _assemble(
    tasks: list[SourceTask],
    ids: list[str],
    chosen_by_task: dict[int, Chosen],
    *,
    seed: int,
    name: str,
    report: BuildReport,
) -> Pool:
    """Step 3: one query per task with chosen distractors (``chosen_by_task``, by task index), in source
    order: ``q_0001``, ``q_0002``, ... and ``c_0001``, ... (each canonical before its distractors). A
    distractor whose code is already in the pool (another task's canonical or distractor) is left out."""
    queries: list[Query] = []
    corpus: list[Snippet] = []
    metas: list[DistractorMeta] = []
    all_codes: set[str] = {tasks[i].code for i in chosen_by_task}
    for idx, t in enumerate(tasks):
        if idx not in chosen_by_task:
            continue
        chosen = _new_codes(chosen_by_task[idx], all_codes, report)
        qid = f"q_{len(queries) + 1:04d}"
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
            metas.append(_distractor_meta(m, res, cid, qid, canon_id))
            report.bug_types[m.bug_type] += 1
        queries.append(_query(t, ids[idx], qid, canon_id, distractor_ids, seed))
        report.distractor_histogram[len(chosen)] += 1
    report.queries_out = len(queries)
    return Pool(name=name, path="", queries=queries, corpus=corpus, distractors=metas)


def _new_codes(chosen: Chosen, all_codes: set[str], report: BuildReport) -> Chosen:
    """The distractors whose code the pool does not hold yet (each added to ``all_codes``); the others
    are counted as ``duplicate_code`` rejects."""
    kept: Chosen = []
    for m, res in chosen:
        if m.code in all_codes:
            report.rejects["duplicate_code"] += 1
            continue
        kept.append((m, res))
        all_codes.add(m.code)
    return kept


def _distractor_meta(m: Mutant, res: ExecResult, cid: str, qid: str, canon_id: str) -> DistractorMeta:
    return DistractorMeta(
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


def _query(
    t: SourceTask, entry_id: str, qid: str, canon_id: str, distractor_ids: list[str], seed: int
) -> Query:
    return Query(
        query_id=qid,
        query=t.query,
        spec=t.spec.strip() if t.spec else None,
        test_suite=list(t.tests),
        test_setup=t.test_setup.strip() if t.test_setup else None,
        correct_corpus_ids=[canon_id],
        paired_distractor_corpus_ids=distractor_ids,
        entry_id=entry_id,
        metadata={
            "domain": t.domain or "general",
            "function_name": _function_name(t.code, t.entry_point),
            "seed": seed,
        },
    )


def _function_name(code: str, entry_point: str | None = None) -> str:
    names = [
        node.name for node in ast.parse(code).body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    if entry_point and entry_point in names:
        return entry_point
    return names[0] if names else ""
