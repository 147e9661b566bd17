"""The run's progress on stderr: a bar per condition with counts, pass rate so far and ETA."""

from __future__ import annotations

from ..progress import stderr
from .records import RunRecord

__all__ = ["ConditionProgress", "progress_counts"]


class ConditionProgress:
    """A bar per condition with counts, pass rate so far and ETA; ``done`` holds the pass/fail of the
    scored records a resumed run already has, so its bars start where the killed run stopped."""

    def __init__(self, totals: dict[str, int], done: dict[str, list[bool]]) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("[bold]{task.description:<12}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("pass {task.fields[rate]}"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=stderr,
        )
        self.passes = {c: list(v) for c, v in done.items()}
        self.tasks = {
            c: self.progress.add_task(c, total=n, completed=len(done.get(c, [])), rate=self._rate(c))
            for c, n in totals.items()
        }

    def _rate(self, condition: str) -> str:
        seen = self.passes.get(condition, [])
        return f"{sum(seen) / len(seen):.2f}" if seen else "-"

    def record(self, rec: RunRecord) -> None:
        if rec.scored:
            self.passes.setdefault(rec.condition, []).append(rec.passed)
        self.progress.update(self.tasks[rec.condition], advance=1, rate=self._rate(rec.condition))

    def __enter__(self) -> ConditionProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)


def progress_counts(
    conditions: list[str], done: list[RunRecord]
) -> tuple[dict[str, int], dict[str, list[bool]]]:
    """The bars' starting point: items per condition (``conditions`` has one name per planned item) and
    the pass/fail of each condition's records already done (an unscored one counts as done, not as a
    pass or fail)."""
    totals: dict[str, int] = {}
    for name in conditions:
        totals[name] = totals.get(name, 0) + 1
    finished: dict[str, list[bool]] = {}
    for rec in done:
        if rec.scored:
            finished.setdefault(rec.condition, []).append(rec.passed)
        else:
            finished.setdefault(rec.condition, [])
    return totals, finished
