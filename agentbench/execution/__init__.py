"""Execution stage: runs snippets against asserts in a sandbox and caches verdicts.

``make_executor("auto" | "docker" | "process")`` picks an executor; ``run_cached`` runs jobs through the
shared execution cache. The Docker executor lives in ``container``, the image build in ``image``.
"""

from .base import FAIL, PASS, TIMEOUT, ExecResult, Executor, Job
from .cache import ExecCache, run_cached
from .container import DockerExecutor
from .process import ProcessExecutor
from .select import SANDBOX_KINDS, make_executor

__all__ = [
    "Job",
    "ExecResult",
    "Executor",
    "ProcessExecutor",
    "DockerExecutor",
    "ExecCache",
    "run_cached",
    "make_executor",
    "SANDBOX_KINDS",
    "PASS",
    "FAIL",
    "TIMEOUT",
]
