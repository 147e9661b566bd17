"""Choosing an executor from the ``--sandbox`` flag.

``docker`` never falls back: if the engine or image is missing it fails with the fix. ``auto`` picks Docker
when both are there and logs once which executor it chose (a warning when it falls back to the process
executor), so a run is never silently unisolated: the CLI prints it on stderr, and so does Python's
last-resort handler for an API user who configured no logging. ``process`` runs locally with the best
isolation the OS allows.
"""

from __future__ import annotations

import logging

from ..errors import ConfigError, SandboxError
from .base import SANDBOX_KINDS, Executor, check_sandbox_kind
from .process import ProcessExecutor

__all__ = ["make_executor", "docker_status", "SANDBOX_KINDS"]

_announced = False
logger = logging.getLogger(__name__)


def docker_status() -> str | None:
    """None when the Docker executor can run here, else the one-line reason it cannot."""
    from .engine import connect, require_image

    try:
        client = connect(timeout=10)
    except SandboxError as exc:
        return str(exc)
    try:
        require_image(client)
    except SandboxError as exc:
        return str(exc)
    finally:
        client.close()
    return None


def _announce(level: int, message: str) -> None:
    global _announced
    if not _announced:
        _announced = True
        logger.log(level, "sandbox: %s", message)


def make_executor(kind: str = "auto", workers: int | None = None, ray: str | None = None) -> Executor:
    """Build the executor the user asked for; ``workers`` defaults to one per core.

    With ``ray`` (a cluster address, ``--ray``) the jobs run on every node of that Ray cluster, each node
    with its own ``kind`` executor of ``workers`` workers (default: the node's CPUs)."""
    check_sandbox_kind(kind)
    if workers is not None and workers < 1:
        raise ConfigError(f"--sandbox-workers must be at least 1, not {workers}")
    if ray is not None:
        from .cluster import RayExecutor

        return RayExecutor(ray, kind, workers)
    if kind == "process":
        return ProcessExecutor(workers=workers)
    from .container import DockerExecutor

    if kind == "docker":
        return DockerExecutor(workers=workers)
    reason = docker_status()
    if reason is None:
        executor: Executor = DockerExecutor(workers=workers)
        _announce(logging.INFO, f"using {executor.describe()}")
        return executor
    executor = ProcessExecutor(workers=workers)
    _announce(logging.WARNING, f"using {executor.describe()} -- Docker unavailable ({reason})")
    return executor
