"""Choosing a task's distractors from its evaluated mutants: realistic, distinct in behaviour, subtle first."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from ..execution import TIMEOUT, ExecResult
from .mutate import Mutant

__all__ = [
    "EXPLORE_PER_BUG_TYPE",
    "MAX_PER_BUG_TYPE",
    "TaskPlan",
    "evaluation_order",
    "failing_share",
    "reject_reason",
]

MAX_PER_BUG_TYPE = 6  # candidates executed per bug type and task; bounds build time on long functions
EXPLORE_PER_BUG_TYPE = 3  # candidates per bug type evaluated before choosing, so subtler ones can win
# Verdicts that say the mutant ran out of something rather than computed a wrong answer; where the limit
# strikes depends on the machine, so such mutants are never kept.
RESOURCE_OUTCOMES = (TIMEOUT, "ERROR:MemoryError", "ERROR:RecursionError")
GUARD_REMOVAL = "remove_edge_case_check"
# A plausible edit that returns a wrong value on every assert: no near miss, so it is used only to top up a
# task that has fewer realistic distractors than asked (short functions with short suites have few).
TOP_UP_REASON = "fails_every_assert"


def evaluation_order(mutants: list[Mutant], rng: random.Random) -> list[Mutant]:
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
    """The share of asserts a mutant fails: the smaller, the subtler the distractor."""
    return sum(r != "pass" for r in result.results) / max(len(result.results), 1)


@dataclass
class TaskPlan:
    """Mutants of one task in evaluation order, with the verdicts of the evaluated prefix."""

    order: list[Mutant]
    explore: int
    realistic: bool = True
    top_up: bool = False  # when the realistic ones run short: the reserve, then TOP_UP_REASON mutants
    reserve: list[Mutant] = field(default_factory=list)  # top-up operators' mutants, evaluated only if short
    verdicts: list[ExecResult] = field(default_factory=list)
    probes: dict[int, tuple[str, ...] | None] = field(default_factory=dict)  # order index -> fingerprint
    want: list[int] = field(default_factory=list)  # candidates to probe before choosing
    topped_up: set[int] = field(default_factory=set)  # order indices of the chosen top-up distractors

    def kept(self, reasons: tuple[str | None, ...] = (None,)) -> list[tuple[int, Mutant, ExecResult]]:
        """The evaluated candidates whose reject reason is one of ``reasons`` (None: usable)."""
        return [
            (i, m, r)
            for i, (m, r) in enumerate(zip(self.order, self.verdicts, strict=False))
            if reject_reason(r, self.realistic) in reasons
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
        share, then the other usable mutants by share. Ties keep the seeded evaluation order. With
        ``top_up``, a task that has evaluated every candidate and is still short evaluates its
        ``reserve`` (the top-up operators' mutants) and chooses again; if still short, it takes distinct
        mutants failing every assert, after all the realistic ones. ``topped_up`` ends up holding the
        chosen ones that came from either step.
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
        picked = _subtle_first(kept)[:n]
        if len(picked) < n and self.top_up and self.realistic:
            if self.reserve:  # evaluate the top-up operators' mutants, then choose again
                self.topped_up = set(range(len(self.order), len(self.order) + len(self.reserve)))
                self.order, self.reserve = self.order + self.reserve, []
                return None
            extra = self.distinct(self.kept((TOP_UP_REASON,)))
            if extra is None:
                return None
            more = _subtle_first(extra[0])[: n - len(picked)]
            picked += more
            self.topped_up |= {k[0] for k in more}
        self.topped_up &= {k[0] for k in picked}
        return [(m, r) for _, m, r in picked]


def _subtle_first(kept: list[tuple[int, Mutant, ExecResult]]) -> list[tuple[int, Mutant, ExecResult]]:
    """The least-failing candidate of each bug type (types ordered by that share), then the others by
    share; ties keep the seeded evaluation order."""
    ranked = sorted(kept, key=lambda k: (failing_share(k[2]), k[0]))
    best: dict[str, tuple[int, Mutant, ExecResult]] = {}
    for k in ranked:
        best.setdefault(k[1].bug_type, k)
    first = list(best.values())
    return first + [k for k in ranked if k not in first]
