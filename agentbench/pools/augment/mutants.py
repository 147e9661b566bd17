"""Mutant killing: which generated asserts show a task's surviving mutants are not its canonical.

Every single-edit mutant (:func:`~agentbench.pools.mutate.find_mutants`) first runs on the original
asserts; one that passes them all runs on the generated asserts, and a mutant that fails one is shown
non-equivalent. A greedy set cover keeps a few asserts that kill them all. Many mutants share one sandbox
job, each under a CPU guard per assert, so a mutant that loops costs a fraction of a second, not a job.
"""

from __future__ import annotations

import random
import re

from ...execution import ExecResult, Job
from ..mutate import find_mutants

__all__ = [
    "ASSERT_CPU",
    "ORIGINAL_CPU",
    "greedy_cover",
    "kill_sets",
    "mutant_jobs",
    "sample_mutants",
    "survivors",
]

MAX_MUTANTS = 80  # mutants per task tried (a seeded sample of longer lists)
ORIGINAL_CPU = 0.25  # CPU seconds a mutant gets per original assert (a mutant that needs more is dropped)
ASSERT_CPU = 0.1  # CPU seconds a mutant gets per generated assert
TESTS_PER_JOB = 400  # (mutant, assert) pairs per mutant job
# outcomes that show the mutant computed something else, not that it ran out of a resource
_NO_VERDICT = re.compile(
    r"^(TIMEOUT|ERROR:(TimeoutError|MemoryError|RecursionError|Infra|Tampered|SIG\w+|Signal\d+|Exit\d+|Lost))$"
)


# Run in a mutant job's setup: the task's mutants, each executed in a namespace of its own (then the test
# setup in a copy of it, as the harness does), and ``_ab_check(m, test)`` running one assert against mutant
# ``m`` under a CPU guard. Many mutants share one job (one process instead of one each); one input that
# sends a mutant into a loop costs a fraction of a second, not the job.
_MULTI = """
import signal as _ab_signal


def _ab_guarded(_ab_code, _ab_scope):
    def _ab_stop(*_):
        raise TimeoutError("assert took too long")

    _ab_previous = _ab_signal.signal(_ab_signal.SIGVTALRM, _ab_stop)
    _ab_signal.setitimer(_ab_signal.ITIMER_VIRTUAL, _AB_CPU)
    try:
        exec(_ab_code, _ab_scope)
    finally:
        _ab_signal.setitimer(_ab_signal.ITIMER_VIRTUAL, 0)
        _ab_signal.signal(_ab_signal.SIGVTALRM, _ab_previous)


_ab_scopes = {}
_ab_slow = {}


def _ab_check(_ab_m, _ab_test):
    if _ab_slow.get(_ab_m, 0) >= _AB_MAX_SLOW:  # out of time often enough: no more CPU for this one
        raise TimeoutError("skipped: the mutant ran out of time before")
    try:
        _ab_run(_ab_m, _ab_test)
    except TimeoutError:
        _ab_slow[_ab_m] = _ab_slow.get(_ab_m, 0) + 1
        raise


def _ab_run(_ab_m, _ab_test):
    if _ab_m not in _ab_scopes:
        _ab_scope = {"__name__": "__main__", "__builtins__": __builtins__}
        try:
            _ab_guarded(compile(_AB_CODES[_ab_m], "<snippet>", "exec"), _ab_scope)
            if _AB_SETUP:
                _ab_scope = dict(_ab_scope)
                _ab_guarded(compile(_AB_SETUP, "<test setup>", "exec"), _ab_scope)
        except BaseException as _ab_exc:
            _ab_scope = _ab_exc
        _ab_scopes[_ab_m] = _ab_scope
    _ab_scope = _ab_scopes[_ab_m]
    if isinstance(_ab_scope, BaseException):
        raise _ab_scope
    _ab_guarded(compile(_ab_test, "<assert>", "exec"), _ab_scope)
"""


def mutant_jobs(
    codes: list[str], tests: list[str], setup: str, cpu: float, max_slow: int
) -> list[tuple[Job, int]]:
    """Jobs running every code on every test, several codes per job; with each job, how many codes.
    A code that ran out of its ``cpu`` on ``max_slow`` tests is not run on the rest (they count as
    timeouts: no verdict), so a mutant that loops costs a fraction of a second, not one per test."""
    per_job = max(1, TESTS_PER_JOB // max(len(tests), 1))
    jobs = []
    for start in range(0, len(codes), per_job):
        chunk = codes[start : start + per_job]
        prelude = (
            f"_AB_CODES = {chunk!r}\n_AB_SETUP = {setup!r}\n_AB_CPU = {cpu!r}\n_AB_MAX_SLOW = {max_slow}\n"
        )
        checks = tuple(f"_ab_check({m}, {t!r})" for m in range(len(chunk)) for t in tests)
        jobs.append((Job("", checks, 2.0 + cpu * len(checks), prelude + _MULTI), len(chunk)))
    return jobs


def _mutant_outcomes(jobs: list[tuple[Job, int]], results: list[ExecResult], n_tests: int) -> list[list[str]]:
    """Per code, its outcome on each test (an infrastructure error: every outcome ``ERROR:Infra``)."""
    out: list[list[str]] = []
    for (_, n_codes), r in zip(jobs, results, strict=True):
        outcomes = r.results if r.infra_error is None else ["ERROR:Infra"] * (n_codes * n_tests)
        out += [outcomes[m * n_tests : (m + 1) * n_tests] for m in range(n_codes)]
    return out


def _is_kill(outcome: str) -> bool:
    """A wrong value or an exception: not running out of time, memory or stack, and not a process that
    died (which would take the other mutants of its job with it)."""
    return outcome != "pass" and not _NO_VERDICT.match(outcome)


def sample_mutants(code: str, rng: random.Random) -> list[str]:
    """The canonical's mutants, in source order: a seeded sample of ``MAX_MUTANTS`` of longer lists."""
    try:
        codes = [m.code for m in find_mutants(code)]
    except SyntaxError:
        return []
    if len(codes) > MAX_MUTANTS:
        codes = sorted(rng.sample(codes, MAX_MUTANTS), key=codes.index)
    return codes


def greedy_cover(kills: list[set[int]], limit: int) -> list[int]:
    """Indices of at most ``limit`` asserts covering as many mutants as possible (ties: lowest index)."""
    covered: set[int] = set()
    chosen: list[int] = []
    while len(chosen) < limit:
        best, gain = -1, 0
        for i, k in enumerate(kills):
            g = len(k - covered)
            if g > gain:
                best, gain = i, g
        if best < 0:
            break
        chosen.append(best)
        covered |= kills[best]
    return sorted(chosen)


def survivors(
    mutants: list[str], jobs: list[tuple[Job, int]], results: list[ExecResult], n_tests: int
) -> tuple[list[str], int]:
    """The mutants passing every one of ``n_tests`` asserts, and how many some assert kills."""
    outcomes = _mutant_outcomes(jobs, results, n_tests)
    alive = [m for m, o in zip(mutants, outcomes, strict=True) if all(r == "pass" for r in o)]
    return alive, sum(1 for o in outcomes if any(_is_kill(r) for r in o))


def kill_sets(
    jobs: list[tuple[Job, int]], results: list[ExecResult], n_tests: int, usable: set[int]
) -> list[set[int]]:
    """Per assert, the indices of the mutants it kills; an assert not in ``usable`` kills none."""
    kills: list[set[int]] = [set() for _ in range(n_tests)]
    for m_index, outcomes in enumerate(_mutant_outcomes(jobs, results, n_tests)):
        for i, outcome in enumerate(outcomes):
            if i in usable and _is_kill(outcome):
                kills[i].add(m_index)
    return kills
