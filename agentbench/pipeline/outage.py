"""Outages are failures of the run, not of the model under test.

A record whose LLM call or sandbox job failed (``llm_error``, ``infra_error``) says nothing about the system
under test. A run with too many of them is reported as failed, with the counts and the cause seen, so an
outage never ends green; ``--resume`` redoes those records (``--retry-errors``, on by default).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from ..errors import RunError
from .records import ERROR_STATUSES, RunRecord

__all__ = ["check_error_rate", "error_records", "describe_errors"]


def error_records(records: Sequence[RunRecord]) -> list[RunRecord]:
    return [r for r in records if r.status in ERROR_STATUSES]


def describe_errors(errors: Sequence[RunRecord]) -> str:
    """``12 llm_error, 3 infra_error; most common cause: <first line of the error>``."""
    counts = Counter(r.status for r in errors)
    causes = Counter(_first_line(r.error or r.status) for r in errors)
    parts = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    cause, _ = causes.most_common(1)[0]
    return f"{parts}; most common cause: {cause}"


def check_error_rate(records: Sequence[RunRecord], max_rate: float, run_dir: str | Path) -> None:
    """Raise RunError (exit 2) when more than ``max_rate`` of the records are outage errors."""
    errors = error_records(records)
    if not records or not errors or len(errors) / len(records) <= max_rate:
        return
    raise RunError(
        f"{len(errors)} of {len(records)} records failed for reasons outside the system under test "
        f"({describe_errors(errors)}), more than --max-error-rate {max_rate:g}: fix the cause, then redo "
        f"them with --resume --run-dir {run_dir}"
    )


def _first_line(text: str, limit: int = 160) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), text)
    return line if len(line) <= limit else line[: limit - 3] + "..."
