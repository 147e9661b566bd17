"""Execution stage: runs snippets against asserts in a sandbox and caches verdicts."""

from .base import FAIL, PASS, TIMEOUT, ExecResult, Executor, Job
from .process import ProcessExecutor
from .select import SANDBOX_KINDS, make_executor

__all__ = [
    "Job",
    "ExecResult",
    "Executor",
    "ProcessExecutor",
    "make_executor",
    "SANDBOX_KINDS",
    "PASS",
    "FAIL",
    "TIMEOUT",
]
