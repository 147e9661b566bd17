"""The build report: what the builder kept and rejected, and why, written beside the pool."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["BUILD_REPORT_FILE", "BuildReport", "read_build_report", "write_build_report"]

BUILD_REPORT_FILE = "build_report.json"  # beside the pool's JSONL files; read by `pool stats`


@dataclass
class BuildReport:
    """What a build kept and rejected: queries in and out, distractors per query, bug types, rejects by
    reason, the top-up rule and its use, and the tasks dropped with why (``build_report.json``)."""

    queries_in: int = 0
    queries_out: int = 0
    distractor_histogram: Counter = field(default_factory=Counter)  # n distractors -> queries
    bug_types: Counter = field(default_factory=Counter)
    rejects: Counter = field(default_factory=Counter)  # reason -> count
    top_up: bool = True  # whether a short task could take mutants failing every assert
    topped_up: int = 0  # distractors taken that way
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
            "top_up": self.top_up,
            "topped_up": self.topped_up,
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
