"""Docker executor: a pool of long-lived, locked-down worker containers fed jobs over the attach socket.

Starting a container per job costs about 0.3 s; a warm worker forks a job process in about a millisecond.
Each container runs ``sandbox/worker.py`` with no network, a read-only root, small noexec tmpfs mounts,
memory = memory+swap, a CPU quota, a pids limit, no capabilities, no-new-privileges, uid 65534 and an
init process. Answers are signed with a per-container key (see the worker's docstring), so nothing a job
writes can pass for a verdict. A container that dies or stops answering is replaced and the job retried
once; a second loss is reported as ``infra_error``, never as a test failure. So is a job starved of CPU
(see :data:`harness.STARVED_LIMIT_FACTOR`) after :data:`base.STARVED_RETRIES` more tries with backoff.
``close()`` from another thread removes the containers at once: the jobs running in them and those not
started yet end ``run()`` with a SandboxError, never with a verdict.

Scheduling: ``workers`` jobs (one per core by default) run at a time, but a job still running after
``slow_after`` seconds (nearly always a loop heading for TIMEOUT; normal jobs take milliseconds) gives up
its slot, and up to ``overflow`` extra containers keep the other jobs moving meanwhile. Wall-clock limits
make a looping job cost its full time limit whatever else runs; without overflow a pool where 3% of jobs
loop spends most of its time waiting on them. ``overflow=0`` restores strictly one job per core.
"""

from __future__ import annotations

import atexit
import os
import queue
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..errors import SandboxError
from . import base
from .base import INFRA, JOB_MEMORY_MB, OUTPUT_LIMIT, ExecResult, Executor, Job, ProgressCallback
from .container_worker import START_TIMEOUT, _Lost, _Worker
from .engine import connect, require_image

__all__ = ["DockerExecutor", "LABEL", "docker_config_key"]

LABEL = "agentbench.sandbox"
GRACE = 10.0  # seconds a worker may take beyond the job's own wall-clock limit (cleanup, scheduling)
SLOW_AFTER = 1.0  # seconds after which a running job no longer counts against the worker budget

_live: weakref.WeakSet[DockerExecutor] = weakref.WeakSet()

MEMORY_MB = JOB_MEMORY_MB + 512
CPUS = 1.0
PIDS = 64


def docker_config_key(
    image: str,
    memory_mb: int = MEMORY_MB,
    job_memory_mb: int = JOB_MEMORY_MB,
    cpus: float = CPUS,
    pids: int = PIDS,
) -> str:
    """:meth:`DockerExecutor.config_key` without an engine (the default executor's with the defaults):
    what the shipped verdicts (:mod:`.bundled`) are checked against."""
    return f"docker:{image}:mem={memory_mb}:jobmem={job_memory_mb}:cpus={cpus:g}:pids={pids}"


class DockerExecutor(Executor):
    """Runs jobs in ``workers`` warm containers (default: one per core)."""

    name = "docker"

    def __init__(
        self,
        workers: int | None = None,
        image: str | None = None,
        memory_mb: int = MEMORY_MB,
        job_memory_mb: int = JOB_MEMORY_MB,
        cpus: float = CPUS,
        pids: int = PIDS,
        output_limit: int = OUTPUT_LIMIT,
        hang_grace: float = GRACE,
        overflow: int | None = None,
        slow_after: float = SLOW_AFTER,
        client: Any = None,
    ) -> None:
        self._own_client = client is None
        self.client = client or connect()
        try:
            self.image = require_image(self.client, image)
        except SandboxError:
            self._close_client()
            raise
        self.workers = workers or os.cpu_count() or 1
        self.memory_mb, self.job_memory_mb, self.cpus, self.pids = memory_mb, job_memory_mb, cpus, pids
        self.output_limit = output_limit
        self.hang_grace = hang_grace
        # A job still running after ``slow_after`` s (usually a loop heading for TIMEOUT) stops holding one
        # of the ``workers`` slots, and up to ``overflow`` extra containers keep the other jobs moving.
        self.overflow = self.workers if overflow is None else overflow
        self.slow_after = slow_after
        self._slots = threading.Semaphore(self.workers)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"  # labels our containers
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._all: list[_Worker] = []
        self._lock = threading.RLock()
        self._started_one = threading.Condition(self._lock)
        self._starting = 0  # containers being started outside the lock (close() waits for them)
        self._started = False
        self._closed = False
        self._closing = threading.Event()  # set by close(): interrupts a starved job's backoff
        self._broken: SandboxError | None = None
        _live.add(self)

    def config_key(self) -> str:
        return docker_config_key(self.image, self.memory_mb, self.job_memory_mb, self.cpus, self.pids)

    def describe(self) -> str:
        extra = f" (+{self.overflow} while jobs run long)" if self.overflow else ""
        return f"docker executor, workers={self.workers}{extra}, image {self.image}"

    def container_options(self) -> dict[str, Any]:
        """Keyword arguments for ``containers.create``: the lock-down lives here."""
        return {
            "stdin_open": True,
            "detach": False,  # with stdin_open this sets StdinOnce: our socket closing (even in a crash) ends the worker
            "tty": False,
            "network_mode": "none",
            "read_only": True,
            "tmpfs": {
                "/tmp": "rw,nosuid,nodev,noexec,size=64m,mode=1777",
                "/dev/shm": "rw,nosuid,nodev,noexec,size=16m",
            },
            "mem_limit": f"{self.memory_mb}m",
            "memswap_limit": f"{self.memory_mb}m",
            "nano_cpus": int(self.cpus * 1e9),
            "pids_limit": self.pids,
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "user": "65534:65534",
            "init": True,
            "environment": {"LANG": "C.UTF-8", "HOME": "/tmp"},
            "labels": {LABEL: "1", "agentbench.owner": self.owner},
            "auto_remove": True,
        }

    # -- lifecycle ----------------------------------------------------------------------------------

    def _start_workers(self) -> None:
        with self._lock:
            if self._closed:
                raise SandboxError("the Docker executor is closed")
            if self._started:
                return
            self._sweep_orphans()
            workers = [_Worker(self) for _ in range(self.workers)]
            self._all.extend(workers)
            with ThreadPoolExecutor(len(workers)) as pool:
                errors = [f.exception() for f in [pool.submit(w.start) for w in workers]]
            failed = next((e for e in errors if e is not None), None)
            if failed is not None:
                self.close()
                raise failed
            for w in workers:
                self._idle.put(w)
            self._started = True

    def _sweep_orphans(self) -> None:
        """Remove our containers left by a dead process of this host: a container whose start failed while
        the engine was unreachable stays "created" (auto-remove never fires), and each run would add more."""
        host = socket.gethostname()
        try:
            leftovers = self.client.containers.list(all=True, filters={"label": LABEL})
        except Exception:
            return  # best effort: the engine's own errors surface when the workers start
        for container in leftovers:
            owner_host, _, rest = (container.labels.get("agentbench.owner") or "").partition(":")
            pid = rest.partition(":")[0]
            if owner_host != host or not pid.isdigit() or _alive(int(pid)):
                continue
            try:
                container.remove(force=True)
            except Exception:
                pass  # being removed by its own auto-remove, or gone

    def _check_usable(self) -> None:
        if self._broken is not None:
            raise self._broken
        if self._closed:
            raise SandboxError("the Docker executor was closed while jobs were running")

    def _take(self) -> _Worker:
        """An idle container; a new one when all are busy and slow jobs left room for overflow."""
        while True:
            self._check_usable()
            try:
                return self._idle.get_nowait()
            except queue.Empty:
                pass
            with self._lock:
                grow = _Worker(self) if len(self._all) < self.workers + self.overflow else None
                if grow is not None:
                    self._all.append(grow)
                    self._starting += 1
            if grow is not None:
                try:
                    grow.start()
                except SandboxError as exc:
                    self._broken = exc
                    raise
                finally:
                    self._done_starting()
                self._check_usable()  # closed meanwhile: close() removes this container too
                return grow
            try:
                return self._idle.get(timeout=0.5)
            except queue.Empty:
                continue

    def _replace(self, worker: _Worker) -> None:
        if self._closed:  # close() removes the container: the job's thread need not wait for that
            return
        worker.stop()
        fresh = _Worker(self)
        with self._lock:
            self._all = [w for w in self._all if w is not worker] + [fresh]
            if self._closed:
                return
            self._starting += 1
        try:
            fresh.start()
        except SandboxError as exc:
            self._broken = exc
            raise
        finally:
            self._done_starting()
        self._idle.put(fresh)  # if close() ran meanwhile, it removed this container

    def _done_starting(self) -> None:
        with self._lock:
            self._starting -= 1
            self._started_one.notify_all()

    def close(self) -> None:
        """Remove every container, in parallel. A ``run()`` in another thread fails at once: its sockets
        are shut down first, and its threads leave the (slower) removal to this one."""
        with self._lock:
            self._closed = True
            self._closing.set()
            running = list(self._all)
        for w in running:
            w.shutdown()
        with self._lock:  # a container being created now would escape the removal below: wait for it
            self._started_one.wait_for(lambda: self._starting == 0, timeout=START_TIMEOUT)
            workers, self._all = self._all, []
        if len(workers) > 1:
            with ThreadPoolExecutor(min(len(workers), 16)) as pool:
                list(pool.map(_Worker.stop, workers))
        else:
            for w in workers:
                w.stop()
        self._close_client()

    def _close_client(self) -> None:
        if self._own_client:
            self._own_client = False
            self.client.close()

    # -- running ------------------------------------------------------------------------------------

    def _run_one(self, job: Job) -> ExecResult:
        while not self._slots.acquire(timeout=0.5):
            self._check_usable()
        held = True

        def release() -> None:  # once: when the job turns slow, or when it ends (same thread)
            nonlocal held
            if held:
                held = False
                self._slots.release()

        try:
            return self._attempts(job, release)
        finally:
            release()

    def _attempts(self, job: Job, on_slow: Callable[[], None]) -> ExecResult:
        losses = starved = 0
        while True:
            worker = self._take()
            start = time.monotonic()
            try:
                answer = worker.run(job, on_slow)
            except _Lost as exc:
                self._replace(worker)
                losses += 1
                if losses < 2:
                    continue
                reason = f"the sandbox container {exc} on this job twice"
                return ExecResult([INFRA] * len(job.tests), infra_error=reason)
            if answer.get("dirty"):
                self._replace(worker)
            else:
                self._idle.put(worker)
            duration = answer.get("duration", time.monotonic() - start)
            if answer.get("starved"):  # no verdict: try again once the machine may be less busy
                starved += 1
                if starved > base.STARVED_RETRIES:
                    reason = base.starved_error(answer.get("cpu"), duration, job.timeout, starved)
                    return ExecResult(
                        [INFRA] * len(job.tests),
                        infra_error=reason,
                        duration=duration,
                        cpu_seconds=answer.get("cpu"),
                    )
                self._closing.wait(base.STARVED_BACKOFF * 2 ** (starved - 1))
                continue
            return ExecResult(
                results=answer["results"],
                stdout=answer["stdout"],
                stderr=answer["stderr"],
                duration=duration,
                cpu_seconds=answer.get("cpu"),
                extra={"starved_attempts": starved} if starved else {},
            )

    def run(self, jobs: Sequence[Job], progress: ProgressCallback | None = None) -> list[ExecResult]:
        if not jobs:
            return []
        self._start_workers()

        def one(job: Job) -> ExecResult:
            res = self._run_one(job)
            if progress:
                progress(1)
            return res

        pool = ThreadPoolExecutor(self.workers + self.overflow)
        try:
            return list(pool.map(one, jobs))
        except BaseException:  # Ctrl-C (or a failure): stop the other jobs rather than wait for them
            self.close()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


@atexit.register
def _close_all() -> None:
    for executor in list(_live):
        executor.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
