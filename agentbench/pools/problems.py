"""What reading and checking a pool report: a :class:`Problem` with its place, and a :class:`ScanResult`.

A leaf of the pools package, shared by :mod:`.io` (which reads pools) and :mod:`.validate` (which checks
them), so neither has to import the other for these types.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .models import Pool

__all__ = ["Problem", "ScanResult"]


@dataclass(frozen=True)
class Problem:
    file: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}"


@dataclass
class ScanResult:
    """A pool as far as it could be read, with the location of every record and every problem found.
    ``warnings`` are things a reader should know (fields derived or missing) that do not stop a load."""

    pool: Pool
    problems: list[Problem] = field(default_factory=list)
    locations: dict[tuple[str, str], int] = field(default_factory=dict)  # (file, id) -> line
    warnings: list[Problem] = field(default_factory=list)
