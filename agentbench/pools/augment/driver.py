"""The pool-level driver: every task's seeds, inputs and mutants, then two rounds of sandbox jobs.

Each round sends the jobs of every task to the sandbox in one call of ``run``, so that the executor can
spread the whole pool over its workers; each task then reads its own slice of the results.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from ...execution import ExecResult, Job
from ..models import Pool, Query
from .inputs import generate_inputs
from .mutants import ASSERT_CPU, ORIGINAL_CPU, greedy_cover, kill_sets, mutant_jobs, sample_mutants, survivors
from .probes import canonical_jobs, expected_asserts, nonce_for
from .report import DEFAULT_INPUTS, AugmentReport, TaskAugment
from .seeds import Seed, parse_seeds

__all__ = ["DEFAULT_MAX_ADDED", "augment_pool"]

RunJobs = Callable[[list[Job]], list[ExecResult]]

DEFAULT_MAX_ADDED = 10  # new asserts kept per task at most


@dataclass
class _Work:
    """One task on its way through the rounds."""

    query: Query
    row: TaskAugment
    code: str
    setup: str
    seeds: list[Seed]
    inputs: list[tuple[int, tuple, tuple]] = field(default_factory=list)
    exprs: list[str] = field(default_factory=list)
    mutants: list[str] = field(default_factory=list)
    asserts: list[str] = field(default_factory=list)  # generated asserts, one per usable input
    survivors: list[str] = field(default_factory=list)  # mutants passing every original assert


def augment_pool(
    pool: Pool,
    run: RunJobs,
    *,
    seed: int = 0,
    inputs: int = DEFAULT_INPUTS,
    max_added: int = DEFAULT_MAX_ADDED,
    timeout: float = 10.0,
    strict: bool = True,
) -> tuple[Pool, AugmentReport]:
    """``pool`` with each query's ``augmented_tests`` set (replaced if it had some), and the report.

    Two rounds of sandbox jobs for the whole pool: the canonicals on the generated inputs (twice, in
    separate processes) and the mutants on the original asserts; then the canonical (as a run executes
    it) and the surviving mutants on the generated asserts. ``timeout`` bounds the canonical's job;
    ``strict=False`` also generates values outside the seeds' domain (negative numbers where every
    example is non-negative, characters no example string has)."""
    report = AugmentReport(seed=seed, inputs_per_task=inputs)
    work = [_prepare(pool, q, seed, inputs, strict) for q in pool.queries]
    report.tasks.extend(w.row for w in work)
    _probe_and_screen(work, run)
    chosen = _choose_asserts(work, run, timeout, max_added)
    queries = [
        w.query.model_copy(update={"augmented_tests": added or None})
        for w, added in zip(work, chosen, strict=True)
    ]
    return pool.model_copy(update={"queries": queries}), report


def _prepare(pool: Pool, query: Query, seed: int, inputs: int, strict: bool) -> _Work:
    """A task's seeds, generated inputs and sampled mutants, drawn from a generator seeded with the
    augmentation seed, the seed the pool was built with and the task's id."""
    code = pool.snippet(query.correct_corpus_ids[0]).code
    fn = _function(query, code)
    seeds = parse_seeds(list(query.test_suite), fn) if fn else []
    row = TaskAugment(query.query_id, str(query.entry_id), seeds=len(seeds))
    w = _Work(query, row, code, query.test_setup or "", seeds)
    meta = query.metadata if isinstance(query.metadata, dict) else {}
    rng = random.Random(f"augment:{seed}:{meta.get('seed', 0)}:{query.query_id}")
    if seeds:
        w.inputs = generate_inputs(seeds, rng, inputs, strict)
        w.exprs = [seeds[i].expression(a, k) for i, a, k in w.inputs]
        w.mutants = sample_mutants(code, rng)
    row.inputs = len(w.inputs)
    row.mutants = len(w.mutants)
    return w


def _function(query: Query, code: str) -> str:
    from ...signature import function_signature

    meta = query.metadata if isinstance(query.metadata, dict) else {}
    try:
        name, _ = function_signature(code, query.test_suite)
    except Exception:  # noqa: BLE001 - a canonical without a function gets no new inputs
        return str(meta.get("function_name") or "")
    return name


def _probe_and_screen(work: list[_Work], run: RunJobs) -> None:
    """Round 1: each canonical on its generated inputs (the expected values, :mod:`.probes`) and each
    task's mutants on its original asserts (the survivors, :mod:`.mutants`)."""
    batches: list[list[Job]] = []
    layouts: list[tuple[int, int, list[tuple[Job, int]]]] = []
    for w in work:
        values, hashes = canonical_jobs(w.code, w.setup, nonce_for(w.query.query_id), w.exprs)
        screens = mutant_jobs(w.mutants, list(w.query.test_suite), w.setup, ORIGINAL_CPU, 1)
        batches.append([*values, *hashes, *(job for job, _ in screens)])
        layouts.append((len(values), len(hashes), screens))
    for w, (n_values, n_hashes, screens), results in zip(
        work, layouts, _run_batches(run, batches), strict=True
    ):
        hashed = n_values + n_hashes
        w.asserts = expected_asserts(
            w.seeds,
            w.inputs,
            w.exprs,
            nonce_for(w.query.query_id),
            results[:n_values],
            results[n_values:hashed],
            w.row.dropped,
        )
        w.survivors, w.row.killed_by_original = survivors(
            w.mutants, screens, results[hashed:], len(w.query.test_suite)
        )
        w.row.survivors = len(w.survivors)


def _choose_asserts(work: list[_Work], run: RunJobs, timeout: float, max_added: int) -> list[list[str]]:
    """Round 2: each canonical (unguarded, as a run executes it) and its survivors on its generated
    asserts; per task, the asserts kept."""
    batches: list[list[Job]] = []
    layouts: list[list[tuple[Job, int]]] = []
    for w in work:
        kills = (
            mutant_jobs(w.survivors, w.asserts, w.setup, ASSERT_CPU, 3) if w.asserts and w.survivors else []
        )
        canonical = [Job(w.code, tuple(w.asserts), timeout, w.setup)] if w.asserts else []
        batches.append([*canonical, *(job for job, _ in kills)])
        layouts.append(kills)
    chosen: list[list[str]] = []
    for w, kills, results in zip(work, layouts, _run_batches(run, batches), strict=True):
        added = _cover(w, results[0], kills, results[1:], max_added) if w.asserts else []
        w.row.added = len(added)
        chosen.append(added)
    return chosen


def _cover(
    w: _Work,
    canonical: ExecResult,
    jobs: list[tuple[Job, int]],
    results: list[ExecResult],
    max_added: int,
) -> list[str]:
    """At most ``max_added`` of the asserts the canonical passes, killing as many survivors as they can
    (a greedy set cover), with the task's scores recorded on the way."""
    usable = (
        {i for i, r in enumerate(canonical.results) if r == "pass"}
        if canonical.infra_error is None
        else set()
    )
    if len(usable) < len(w.asserts):
        w.row.dropped["canonical_disagrees"] += len(w.asserts) - len(usable)
    w.row.usable = len(usable)
    kills = kill_sets(jobs, results, len(w.asserts), usable)
    w.row.non_equivalent = len(set().union(*kills))
    chosen = greedy_cover(kills, max_added)
    w.row.killed_by_added = len(set().union(*(kills[i] for i in chosen))) if chosen else 0
    return [w.asserts[i] for i in chosen]


def _run_batches(run: RunJobs, batches: list[list[Job]]) -> list[list[ExecResult]]:
    """Every task's jobs in one call of ``run`` (none when there are no jobs), and each task's results."""
    jobs = [job for batch in batches for job in batch]
    results = run(jobs) if jobs else []
    out: list[list[ExecResult]] = []
    start = 0
    for batch in batches:
        out.append(results[start : start + len(batch)])
        start += len(batch)
    return out
