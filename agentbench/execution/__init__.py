"""Execution stage: runs snippets against asserts in a sandbox and caches verdicts.

``make_executor("auto" | "docker" | "process")`` picks an executor; ``run_cached`` runs jobs through the
shared execution cache. The Docker executor lives in ``container``, the image build in ``image``. Names
load on first use (PEP 562): ``from agentbench.execution.base import Job`` does not import the executors
or the cache (diskcache).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

_EXPORTS = {
    "FAIL": "base",
    "PASS": "base",
    "TIMEOUT": "base",
    "ExecResult": "base",
    "Executor": "base",
    "Job": "base",
    "ExecCache": "cache",
    "run_cached": "cache",
    "DockerExecutor": "container",
    "ProcessExecutor": "process",
    "SANDBOX_KINDS": "select",
    "make_executor": "select",
}

__all__ = [
    "FAIL",
    "PASS",
    "SANDBOX_KINDS",
    "TIMEOUT",
    "DockerExecutor",
    "ExecCache",
    "ExecResult",
    "Executor",
    "Job",
    "ProcessExecutor",
    "make_executor",
    "run_cached",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .base import FAIL, PASS, TIMEOUT, ExecResult, Executor, Job
    from .cache import ExecCache, run_cached
    from .container import DockerExecutor
    from .process import ProcessExecutor
    from .select import SANDBOX_KINDS, make_executor
