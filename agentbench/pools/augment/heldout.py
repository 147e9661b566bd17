"""A held-out check of augmented tests: do the asserts chosen with one seed's inputs kill the surviving
mutants that another seed's inputs expose?

Augmentation chooses its asserts to kill every surviving mutant its own generated inputs show to be
non-equivalent, so its "down 100%" is true by construction. Here a second seed draws fresh inputs (and, for
long functions, a fresh sample of mutants); the surviving mutants those inputs show non-equivalent are the
held-out set, and the score is the share of them the pool's ``augmented_tests`` kill.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...execution import ExecResult, Job
from ..models import Pool
from .driver import RunJobs, _prepare, _probe_and_screen, _run_batches, _Work
from .mutants import ASSERT_CPU, kill_sets, mutant_jobs
from .report import DEFAULT_INPUTS

__all__ = ["HeldOut", "HeldOutTask", "held_out"]


@dataclass
class HeldOutTask:
    query_id: str
    added: int  # the pool's augmented asserts for this task
    non_equivalent: int = 0  # surviving mutants the held-out inputs show non-equivalent
    killed_by_added: int = 0  # ... of which the pool's augmented asserts kill


@dataclass
class HeldOut:
    """Per task and in total: held-out non-equivalent survivors, and how many the augmented asserts kill."""

    seed: int
    tasks: list[HeldOutTask] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        before = sum(t.non_equivalent for t in self.tasks)
        killed = sum(t.killed_by_added for t in self.tasks)
        return {
            "seed": self.seed,
            "tasks": len(self.tasks),
            "held_out_non_equivalent_before": before,
            "held_out_non_equivalent_after": before - killed,
            "held_out_reduction": round(killed / before, 4) if before else None,
        }


def held_out(
    pool: Pool,
    run: RunJobs,
    *,
    seed: int,
    inputs: int = DEFAULT_INPUTS,
    timeout: float = 10.0,
    strict: bool = True,
) -> HeldOut:
    """Score ``pool``'s ``augmented_tests`` on inputs drawn with ``seed`` (use a seed other than the one
    the pool was augmented with). Two rounds of sandbox jobs, as augmenting takes; nothing is written."""
    work = [_prepare(pool, q, seed, inputs, strict) for q in pool.queries]
    _probe_and_screen(work, run)
    batches: list[list[Job]] = []
    layouts: list[tuple[list[tuple[Job, int]], list[tuple[Job, int]], list[str]]] = []
    for w in work:
        added = list(w.query.augmented_tests or [])
        fresh = (
            mutant_jobs(w.survivors, w.asserts, w.setup, ASSERT_CPU, 3) if w.asserts and w.survivors else []
        )
        kept = mutant_jobs(w.survivors, added, w.setup, ASSERT_CPU, 3) if fresh and added else []
        canonical = [Job(w.code, tuple(w.asserts), timeout, w.setup)] if fresh else []
        batches.append([*canonical, *(j for j, _ in fresh), *(j for j, _ in kept)])
        layouts.append((fresh, kept, added))
    report = HeldOut(seed)
    for w, (fresh, kept, added), results in zip(work, layouts, _run_batches(run, batches), strict=True):
        report.tasks.append(_score(w, fresh, kept, added, results))
    return report


def _score(
    w: _Work,
    fresh: list[tuple[Job, int]],
    kept: list[tuple[Job, int]],
    added: list[str],
    results: list[ExecResult],
) -> HeldOutTask:
    """One task: the survivors some held-out assert (that the canonical passes) kills, and of those, the
    ones some augmented assert kills."""
    row = HeldOutTask(w.query.query_id, len(added))
    if not fresh:
        return row
    canonical, rest = results[0], results[1:]
    usable = (
        {i for i, r in enumerate(canonical.results) if r == "pass"}
        if canonical.infra_error is None
        else set()
    )
    exposed = set().union(*kill_sets(fresh, rest[: len(fresh)], len(w.asserts), usable))
    row.non_equivalent = len(exposed)
    if kept:
        killers = set().union(*kill_sets(kept, rest[len(fresh) :], len(added), set(range(len(added)))))
        row.killed_by_added = len(exposed & killers)
    return row
