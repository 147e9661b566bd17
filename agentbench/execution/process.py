"""Process executor: one fresh interpreter per job, for machines without Docker.

Isolation is the best this machine allows, found once by trial runs (:func:`probe_isolation`):

- ``unshare --mount --net --ipc --pid --fork --kill-child --mount-proc`` (plus ``--user --map-root-user``
  when not root): no network, no IPC objects that outlive the job, every host mount read-only, a private
  tmpfs on each world-writable directory (/tmp, /var/tmp, /dev/shm, /run/lock, ...), the invoking user's
  home, /root and /home hidden under empty tmpfs mounts, a fresh tmpfs as HOME (see
  :func:`harness._isolate_files`); the harness stays behind as the namespace's init while the job runs in
  a child, so every process the job started dies with it, daemonized grandchildren included;
- as root, each worker slot runs its jobs as a dedicated unprivileged uid, so RLIMIT_NPROC (a per-uid
  limit) stops fork bombs and the job cannot read other users' files or processes;
- always: rlimits (address space, CPU, file size, open files), a scrubbed environment (allow-list, no API
  keys), a temporary working directory, the whole process tree killed after the job, and a parent-death
  signal on every hop (``setpriv --pdeathsig``, then ``--kill-child``), so the tree dies with agentbench
  even when agentbench is SIGKILLed; :meth:`ProcessExecutor.close` kills the jobs in flight.

Without namespaces nothing stops network access, reading the user's files or a child that escapes with
setsid: use Docker.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..errors import SandboxError
from . import base, harness
from .base import INFRA, JOB_MEMORY_MB, OUTPUT_LIMIT, ExecResult, Executor, Job, ProgressCallback
from .isolation import Isolation, _candidates, _death_signal, _homes, _ns_prefix

__all__ = ["ProcessExecutor", "Isolation", "probe_isolation", "parse_results"]

HARNESS_SOURCE = Path(harness.__file__).read_text()
HARNESS_DIGEST = hashlib.sha256(HARNESS_SOURCE.encode()).hexdigest()[:12]  # like the Docker image's tag
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
UID_BASE = 1_500_000_000 + (os.getpid() % 100_000) * 64  # per process, so two runs never share a uid
MAX_UID_SLOTS = 64
SETUP_FAILED = 71
NPROC_LIMIT = 64
TMPFS_SIZE = "64m"
JOB_HOME = "/home/sandbox"  # the job's own tmpfs, inside the tmpfs that hides /home
parse_results = harness.parse_results  # kept for callers of the old module


_slot_numbers = itertools.count(1)  # slot 0 is for probing
_probe_lock = threading.Lock()
_probed: dict[int, Isolation] = {}


class _Cancel:
    """The jobs of one executor in flight, so that ``close()`` from another thread can kill them."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self._lock = threading.Lock()
        self._live: dict[int, int | None] = {}

    def started(self, pid: int, uid: int | None) -> bool:
        with self._lock:
            if self.event.is_set():
                return False
            self._live[pid] = uid
            return True

    def finished(self, pid: int) -> None:
        with self._lock:
            self._live.pop(pid, None)

    def cancel(self) -> None:
        with self._lock:
            self.event.set()
            live = list(self._live.items())
        for pid, uid in live:
            _kill_tree(pid, uid)


def probe_isolation() -> Isolation:
    """The strongest isolation whose trial job gives the right verdicts here (cached per process)."""
    euid = os.geteuid()
    with _probe_lock:
        if euid not in _probed:
            trial = Job(
                "import decimal, datetime, json\nx = 1", ("assert x == 1", "assert x == 2"), timeout=20
            )
            for iso in _candidates():
                res = _Runner(iso, memory_mb=512, output_limit=1024).run(trial, slot=0)
                if res.results == ["pass", "FAIL"]:
                    _probed[euid] = iso
                    break
            else:
                raise SandboxError(
                    "the process executor cannot run Python jobs here: " + res.stderr.strip()[-200:]
                )
        return _probed[euid]


class _Runner:
    """Runs one job under a given isolation; stateless apart from its settings."""

    def __init__(self, iso: Isolation, memory_mb: int, output_limit: int) -> None:
        self.iso, self.memory_mb, self.output_limit = iso, memory_mb, output_limit

    def run(self, job: Job, slot: int, cancel: _Cancel | None = None) -> ExecResult:
        """One attempt at ``job``; a starved attempt comes back with ``extra["starved"]`` set."""
        iso, uid = self.iso, UID_BASE + slot % MAX_UID_SLOTS
        nonce = os.urandom(12).hex()
        opts, env, spawn, workdir = self._launch(job, uid)
        death, preexec = _death_signal()
        prefix = _ns_prefix(os.geteuid() == 0) if iso.namespaces else []
        pipes = [os.pipe() for _ in range(5)]  # stdin, stdout, stderr, results, the job's wait status
        (in_r, in_w), (out_r, out_w), (err_r, err_w), (res_r, res_w), (st_r, st_w) = pipes
        if iso.namespaces:
            opts["status_fd"] = st_w
        cmd = [*death, *prefix, iso.python, "-I", "-S", "-c", HARNESS_SOURCE, str(res_w), json.dumps(opts)]
        kill_uid = uid if iso.drop_uid and not iso.namespaces else None
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                cmd,
                stdin=in_r,
                stdout=out_w,
                stderr=err_w,
                pass_fds=(res_w, st_w),
                cwd=workdir or "/",
                env=env,
                start_new_session=True,
                preexec_fn=preexec,
                **spawn,
            )
        except OSError as exc:
            for fd in (in_r, in_w, out_r, out_w, err_r, err_w, res_r, res_w, st_r, st_w):
                os.close(fd)
            _rmtree(workdir)
            return ExecResult([INFRA] * len(job.tests), infra_error=f"cannot start the job: {exc}")
        for fd in (in_r, out_w, err_w, res_w, st_w):
            os.close(fd)
        limits = {"out": self.output_limit, "err": self.output_limit, "res": harness.RESULT_LIMIT, "st": 64}
        capture = harness.Capture({"out": out_r, "err": err_r, "res": res_r, "st": st_r}, limits)
        status: int | None = None
        timed_out: bool | str = False
        cpu: float | None = None
        reaped = False
        try:
            if cancel is not None and not cancel.started(proc.pid, kill_uid):
                _kill_tree(proc.pid, kill_uid)
            _send(
                in_w,
                json.dumps(
                    {"code": job.code, "tests": list(job.tests), "setup": job.setup, "nonce": nonce}
                ).encode(),
            )
            status, timed_out, cpu = harness.wait_child(proc.pid, capture, start, job.timeout)
            reaped = not timed_out
        finally:  # also on KeyboardInterrupt: nothing of the job may outlive this call
            duration = time.monotonic() - start
            _kill_tree(proc.pid, kill_uid)
            if cancel is not None:
                cancel.finished(proc.pid)
            if not reaped:
                _, status = os.waitpid(proc.pid, 0)
            proc.returncode = -1  # reaped above; stops Popen from waiting again
            capture.drain(0.5)
            _rmtree(workdir)
        if cancel is not None and cancel.event.is_set():
            return ExecResult([INFRA] * len(job.tests), infra_error="cancelled: the executor was closed")
        return self._result(job, capture, status, timed_out, cpu, duration, nonce)

    def _launch(self, job: Job, uid: int) -> tuple[dict, dict[str, str], dict, str | None]:
        """The harness options, environment, spawn arguments and working directory (None with namespaces)
        for one job under this isolation."""
        iso = self.iso
        nproc = NPROC_LIMIT if iso.drop_uid else None
        opts: dict = {"limits": harness.job_limits(job.timeout, self.memory_mb, nproc)}
        workdir = None if iso.namespaces else tempfile.mkdtemp(prefix="agentbench-job-")
        home = (JOB_HOME if os.path.isdir("/home") else "/tmp") if iso.namespaces else workdir
        env = {
            "PATH": SAFE_PATH,
            "LANG": "C.UTF-8",
            "HOME": home,
            "TMPDIR": "/tmp" if iso.namespaces else home,
        }
        spawn: dict = {}
        if iso.namespaces:
            opts.update(tmpfs=TMPFS_SIZE, hide=_homes(), init=True)
            if home != "/tmp":
                opts["home"] = home
            if iso.drop_uid:
                opts.update(uid=uid, gid=uid)
        elif iso.drop_uid:
            os.chown(workdir, uid, uid)
            spawn = {"user": uid, "group": uid, "extra_groups": []}
        return opts, env, spawn, workdir

    def _result(
        self,
        job: Job,
        capture: harness.Capture,
        status: int,
        timed_out: bool | str,
        cpu: float | None,
        duration: float,
        nonce: str,
    ) -> ExecResult:
        """The verdicts of a finished job from what its harness and init reported."""
        iso = self.iso
        if timed_out == harness.STARVED:
            return ExecResult(
                [INFRA] * len(job.tests),
                infra_error=base.starved_error(cpu, duration, job.timeout, 1),
                duration=duration,
                extra={"starved": True},
                cpu_seconds=cpu,
            )
        reported = bytes(capture.data["st"]).strip()
        if iso.namespaces and reported.isdigit():
            status = int(reported)  # the job's own status, as its init saw it (unshare reports init's)
        stdout = capture.data["out"].decode(errors="replace")
        stderr = capture.data["err"].decode(errors="replace")
        results = harness.verdicts(bytes(capture.data["res"]), len(job.tests), nonce, status, bool(timed_out))
        infra = None
        if not timed_out and os.WIFEXITED(status) and os.WEXITSTATUS(status) == SETUP_FAILED:
            if stderr.startswith("agentbench harness setup failed"):
                infra = stderr.strip().splitlines()[0]
        return ExecResult(results, stdout, stderr, infra, duration, cpu_seconds=cpu)


def _send(fd: int, payload: bytes) -> None:
    """Write the job to the child's stdin without risking a deadlock on a big job."""

    def write() -> None:
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
        except OSError:
            pass
        finally:
            os.close(fd)

    if len(payload) < 60_000:  # fits in the pipe buffer: never blocks
        write()
    else:
        threading.Thread(target=write, daemon=True).start()


def _kill_tree(pid: int, uid: int | None) -> None:
    """SIGKILL the job's process group and, when jobs run as their own uid, every process of that uid."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if uid is None:
        return
    for _ in range(100):
        victims = _pids_of(uid)
        if not victims:
            return
        for p in victims:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.005)


def _pids_of(uid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                st = os.stat(f"/proc/{entry}")
            except OSError:
                continue
            if st.st_uid == uid:
                out.append(int(entry))
    return out


def _rmtree(path: str | None) -> None:
    if path:
        shutil.rmtree(path, ignore_errors=True)


class ProcessExecutor(Executor):
    """Local subprocesses; ``workers`` jobs at a time (default: one per core)."""

    name = "process"

    def __init__(
        self, workers: int | None = None, memory_mb: int = JOB_MEMORY_MB, output_limit: int = OUTPUT_LIMIT
    ) -> None:
        self.workers = workers or os.cpu_count() or 1
        self.memory_mb = memory_mb
        self.isolation = probe_isolation()
        self._runner = _Runner(self.isolation, memory_mb, output_limit)
        self._slots: queue.SimpleQueue[int] = queue.SimpleQueue()
        for _ in range(self.workers):
            self._slots.put(next(_slot_numbers))  # distinct uids across executors in this process
        self._cancel = _Cancel()

    def config_key(self) -> str:
        iso = self.isolation
        return (
            f"process:mem={self.memory_mb}:ns={int(iso.namespaces)}:uid={int(iso.drop_uid)}"
            f":harness={HARNESS_DIGEST}"
        )

    def describe(self) -> str:
        return f"process executor, workers={self.workers}: {self.isolation.describe()}"

    def close(self) -> None:
        """Kill the jobs in flight; later jobs never start (``run`` raises SandboxError)."""
        self._cancel.cancel()

    def _check_open(self) -> None:
        if self._cancel.event.is_set():
            raise SandboxError("the process executor was closed while jobs were running")

    def _run_one(self, job: Job) -> ExecResult:
        """A verdict for ``job``, running it again (with backoff) while it is starved of CPU."""
        cancel, starved = self._cancel, 0
        slot = self._slots.get()
        try:
            while True:
                self._check_open()
                res = self._runner.run(job, slot, cancel)
                if not res.extra.pop("starved", False):
                    break
                starved += 1
                if starved > base.STARVED_RETRIES:
                    res.infra_error = base.starved_error(res.cpu_seconds, res.duration, job.timeout, starved)
                    break
                cancel.event.wait(base.STARVED_BACKOFF * 2 ** (starved - 1))
        finally:
            self._slots.put(slot)
        if starved:
            res.extra["starved_attempts"] = starved
        return res

    def run(self, jobs: Sequence[Job], progress: ProgressCallback | None = None) -> list[ExecResult]:
        self._check_open()

        def one(job: Job) -> ExecResult:
            res = self._run_one(job)
            if progress:
                progress(1)
            return res

        if len(jobs) == 1 or self.workers == 1:
            results = [one(job) for job in jobs]
        else:
            pool = ThreadPoolExecutor(self.workers)
            try:
                results = list(pool.map(one, jobs))
            except BaseException:  # Ctrl-C (or a bug): kill what is running rather than wait for it
                self.close()
                raise
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
        self._check_open()  # a job killed by close() has no verdict
        return results
