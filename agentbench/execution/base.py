"""The one interface every executor implements.

Verdicts are per assert: ``pass``, ``FAIL``, ``TIMEOUT`` or ``ERROR:<ExceptionName>``. A job passes only
when the harness observed every assert complete without error; an exit code never counts.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..errors import ConfigError

__all__ = [
    "Job",
    "ExecResult",
    "Executor",
    "PASS",
    "FAIL",
    "TIMEOUT",
    "SANDBOX_KINDS",
    "check_sandbox_kind",
    "tests_sha256",
    "code_sha256",
]

PASS = "pass"
FAIL = "FAIL"
TIMEOUT = "TIMEOUT"

DEFAULT_TIMEOUT = 10.0
OUTPUT_LIMIT = 8_192
# Address-space limit for one job, the same in every executor so that verdicts agree (a mutant computing
# ``8 << 0xFF000000`` needs ~510 MB: it passes or raises MemoryError depending on this number).
JOB_MEMORY_MB = 1024
# A job starved of CPU (see harness.STARVED_LIMIT_FACTOR) gets no verdict: it runs again after
# STARVED_BACKOFF seconds, then twice that, ..., STARVED_RETRIES times, and is an infra_error after that.
STARVED_RETRIES = 3
STARVED_BACKOFF = 2.0
INFRA = "ERROR:Infra"
SANDBOX_KINDS = ("auto", "docker", "process")
"""The executors ``--sandbox`` can name (see :func:`agentbench.execution.make_executor`)."""


def check_sandbox_kind(kind: str) -> str:
    """``kind`` if it names an executor, else a one-line ConfigError listing the ones that do."""
    if kind not in SANDBOX_KINDS:
        raise ConfigError(f"unknown sandbox {kind!r}: use one of {', '.join(SANDBOX_KINDS)}")
    return kind


def starved_error(cpu: float | None, wall: float, timeout: float, attempts: int) -> str:
    """The infra_error of a job that never got enough CPU to be judged."""
    used = "?" if cpu is None else f"{cpu:.2f}"
    return (
        f"starved: the job used {used} s of its {timeout:g} s of CPU time in {wall:.0f} s of wall-clock "
        f"time, {attempts} times; the machine is too busy to judge it (run again with less load)"
    )


def code_sha256(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def tests_sha256(tests: Sequence[str], setup: str = "") -> str:
    """ExecRetrieval's hash of the JSON-encoded test list; a suite with a test setup hashes both."""
    payload: object = list(tests) if not setup else {"setup": setup, "tests": list(tests)}
    return hashlib.sha256(json.dumps(payload).encode()).hexdigest()


@dataclass(frozen=True)
class Job:
    """One snippet run against one list of asserts."""

    code: str
    tests: tuple[str, ...]
    timeout: float = DEFAULT_TIMEOUT  # seconds of CPU time (see harness.wait_child)
    setup: str = ""
    """Run after the code, before the asserts, in the asserts' namespace only: the names the tests use
    (``from datetime import date``) come from here, not from whatever the solution happened to import."""

    @property
    def key(self) -> tuple[str, str]:
        return code_sha256(self.code), tests_sha256(self.tests, self.setup)


@dataclass
class ExecResult:
    """What the harness observed for one job."""

    results: list[str]
    stdout: str = ""
    stderr: str = ""
    infra_error: str | None = None
    duration: float = 0.0
    extra: dict = field(default_factory=dict)
    cpu_seconds: float | None = None
    """CPU time the job used (None where unknown): unlike ``duration``, the same on a busy machine."""

    @property
    def passed(self) -> bool:
        return self.infra_error is None and bool(self.results) and all(r == PASS for r in self.results)

    def to_json(self) -> dict:
        return {
            "passed": self.passed,
            "results": self.results,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "infra_error": self.infra_error,
        }


ProgressCallback = Callable[[int], None]


class Executor(ABC):
    """Runs untrusted code against asserts. Use as a context manager so workers are always cleaned up."""

    name: str = "base"

    @abstractmethod
    def run(self, jobs: Sequence[Job], progress: ProgressCallback | None = None) -> list[ExecResult]:
        """Run jobs (in parallel where the executor can) and return results in input order."""

    def config_key(self) -> str:
        """Identifies settings that can change a verdict; part of the execution-cache key."""
        return self.name

    def describe(self) -> str:
        """One line for humans: which executor, how many workers, how isolated."""
        return self.name

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release workers; safe to call twice.

        May be called from another thread while :meth:`run` is in progress: the jobs running are killed,
        jobs not started never start, and ``run`` raises :class:`~agentbench.errors.SandboxError` promptly
        instead of returning verdicts for them."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
