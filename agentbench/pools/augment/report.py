"""The augmentation report: per task, its inputs, the inputs dropped and why, and its mutation scores."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["AUGMENT_REPORT", "DEFAULT_INPUTS", "AugmentReport", "TaskAugment"]

AUGMENT_REPORT = "augment_report.json"  # written beside the pool files: per-task inputs and mutation scores
DEFAULT_INPUTS = 200  # generated inputs per task


@dataclass
class TaskAugment:
    """What augmenting one task found: inputs, dropped inputs by reason, and mutation scores."""

    query_id: str
    entry_id: str
    seeds: int = 0
    inputs: int = 0
    usable: int = 0
    dropped: Counter = field(default_factory=Counter)
    mutants: int = 0
    killed_by_original: int = 0
    survivors: int = 0
    non_equivalent: int = 0
    """Survivors that fail some generated assert (shown not equivalent to the canonical)."""
    killed_by_added: int = 0
    added: int = 0

    @property
    def known_non_equivalent(self) -> int:
        return self.killed_by_original + self.non_equivalent

    def score(self, after: bool) -> float | None:
        """Killed / non-equivalent mutants, on the original asserts or on original plus added ones."""
        if not self.known_non_equivalent:
            return None
        killed = self.killed_by_original + (self.killed_by_added if after else 0)
        return round(killed / self.known_non_equivalent, 4)

    def to_json(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id,
            "entry_id": self.entry_id,
            "seed_asserts": self.seeds,
            "inputs": self.inputs,
            "usable_inputs": self.usable,
            "dropped_inputs": dict(sorted(self.dropped.items())),
            "mutants": self.mutants,
            "killed_by_original": self.killed_by_original,
            "surviving_non_equivalent_before": self.non_equivalent,
            "surviving_non_equivalent_after": self.non_equivalent - self.killed_by_added,
            "added_asserts": self.added,
            "mutation_score_before": self.score(False),
            "mutation_score_after": self.score(True),
        }


@dataclass
class AugmentReport:
    """What augmenting a pool found: a row per task and the totals (``augment_report.json``)."""

    tasks: list[TaskAugment] = field(default_factory=list)
    seed: int = 0
    inputs_per_task: int = DEFAULT_INPUTS

    def summary(self) -> dict[str, Any]:
        before = sum(t.non_equivalent for t in self.tasks)
        after = sum(t.non_equivalent - t.killed_by_added for t in self.tasks)
        known = sum(t.known_non_equivalent for t in self.tasks)
        killed_orig = sum(t.killed_by_original for t in self.tasks)
        dropped: Counter = Counter()
        for t in self.tasks:
            dropped.update(t.dropped)
        return {
            "tasks": len(self.tasks),
            "tasks_augmented": sum(1 for t in self.tasks if t.added),
            "tasks_without_seed_asserts": sum(1 for t in self.tasks if not t.seeds),
            "inputs": sum(t.inputs for t in self.tasks),
            "usable_inputs": sum(t.usable for t in self.tasks),
            "dropped_inputs": dict(sorted(dropped.items())),
            "added_asserts": sum(t.added for t in self.tasks),
            "mutants": sum(t.mutants for t in self.tasks),
            "surviving_non_equivalent_before": before,
            "surviving_non_equivalent_after": after,
            "reduction": round(1 - after / before, 4) if before else None,
            "mutation_score_before": round(killed_orig / known, 4) if known else None,
            "mutation_score_after": round((known - after) / known, 4) if known else None,
        }

    def summary_line(self) -> str:
        s = self.summary()
        red = "n/a" if s["reduction"] is None else f"{100 * s['reduction']:.0f}%"
        return (
            f"augmented {s['tasks_augmented']}/{s['tasks']} tasks with {s['added_asserts']} asserts; "
            f"surviving non-equivalent mutants {s['surviving_non_equivalent_before']} -> "
            f"{s['surviving_non_equivalent_after']} (down {red}); mutation score "
            f"{s['mutation_score_before']} -> {s['mutation_score_after']}; dropped inputs "
            f"{sum(s['dropped_inputs'].values())} ({', '.join(f'{k} {v}' for k, v in s['dropped_inputs'].items()) or 'none'})"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "inputs_per_task": self.inputs_per_task,
            "summary": self.summary(),
            "tasks": [t.to_json() for t in self.tasks],
        }
