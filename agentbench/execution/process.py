"""Process executor: one fresh interpreter per job, for machines without Docker.

Isolation is the best this machine allows, found once by trial runs (:func:`probe_isolation`):

- ``unshare --mount --net --pid --fork --kill-child --mount-proc`` (plus ``--user --map-root-user`` when not
  root): no network, private tmpfs on /tmp, /var/tmp and /dev/shm, and every process the job started dies
  with it, daemonized grandchildren included;
- as root, each worker slot runs its jobs as a dedicated unprivileged uid, so RLIMIT_NPROC (a per-uid
  limit) stops fork bombs and the job cannot read other users' files or processes;
- always: rlimits (address space, CPU, file size, open files), a scrubbed environment (allow-list, no API
  keys), a temporary working directory, and the whole process tree killed after the job.

Without namespaces nothing stops network access or a child that escapes with setsid: use Docker.
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
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..errors import SandboxError
from . import harness
from .base import JOB_MEMORY_MB, OUTPUT_LIMIT, ExecResult, Executor, Job, ProgressCallback

__all__ = ["ProcessExecutor", "Isolation", "probe_isolation", "parse_results"]

HARNESS_SOURCE = Path(harness.__file__).read_text()
HARNESS_DIGEST = hashlib.sha256(HARNESS_SOURCE.encode()).hexdigest()[:12]  # like the Docker image's tag
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
UID_BASE = 1_500_000_000 + (os.getpid() % 100_000) * 64  # per process, so two runs never share a uid
MAX_UID_SLOTS = 64
SETUP_FAILED = 71
NPROC_LIMIT = 64
TMPFS_SIZE = "64m"
parse_results = harness.parse_results  # kept for callers of the old module


@dataclass(frozen=True)
class Isolation:
    """How jobs are contained on this machine."""

    namespaces: bool
    drop_uid: bool
    python: str

    def describe(self) -> str:
        parts = []
        if self.namespaces:
            parts.append("namespaces (no network, private /tmp, tree killed)")
        if self.drop_uid:
            parts.append("unprivileged uid per worker")
        return ", ".join(parts) or "rlimits only (no network isolation)"


_slot_numbers = itertools.count(1)  # slot 0 is for probing
_probe_lock = threading.Lock()
_probed: dict[int, Isolation] = {}


def _world_executable(path: str) -> bool:
    p = Path(path)
    try:
        return all(os.stat(d).st_mode & 0o001 for d in p.parents) and bool(
            os.stat(p).st_mode & 0o005 == 0o005
        )
    except OSError:
        return False


def _ns_prefix(root: bool) -> list[str]:
    user = [] if root else ["--user", "--map-root-user"]
    return ["unshare", *user, "--mount", "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]


def _candidates() -> list[Isolation]:
    root = os.geteuid() == 0
    own = os.path.realpath(sys.executable)
    shared = [p for p in (own, "/usr/bin/python3", "/usr/local/bin/python3") if _world_executable(p)]
    shared = [os.path.realpath(p) for p in shared[:1]]
    have_unshare = shutil.which("unshare") is not None
    out = []
    for ns in ([True] if have_unshare else []) + [False]:
        if root:
            out += [Isolation(ns, True, p) for p in shared]
        out.append(Isolation(ns, False, own))
    return out


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

    def run(self, job: Job, slot: int) -> ExecResult:
        iso, uid = self.iso, UID_BASE + slot % MAX_UID_SLOTS
        nonce = os.urandom(12).hex()
        nproc = NPROC_LIMIT if iso.drop_uid else None
        opts: dict = {"limits": harness.job_limits(job.timeout, self.memory_mb, nproc)}
        workdir = None if iso.namespaces else tempfile.mkdtemp(prefix="agentbench-job-")
        home = "/tmp" if iso.namespaces else workdir
        env = {"PATH": SAFE_PATH, "LANG": "C.UTF-8", "HOME": home, "TMPDIR": home}
        spawn: dict = {}
        if iso.namespaces:
            opts["tmpfs"] = TMPFS_SIZE
            if iso.drop_uid:
                opts.update(uid=uid, gid=uid)
        elif iso.drop_uid:
            os.chown(workdir, uid, uid)
            spawn = {"user": uid, "group": uid, "extra_groups": []}
        prefix = _ns_prefix(os.geteuid() == 0) if iso.namespaces else []
        pipes = [os.pipe() for _ in range(4)]  # stdin, stdout, stderr, results
        (in_r, in_w), (out_r, out_w), (err_r, err_w), (res_r, res_w) = pipes
        cmd = [*prefix, iso.python, "-I", "-S", "-c", HARNESS_SOURCE, str(res_w), json.dumps(opts)]
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                cmd,
                stdin=in_r,
                stdout=out_w,
                stderr=err_w,
                pass_fds=(res_w,),
                cwd=workdir or "/",
                env=env,
                start_new_session=True,
                **spawn,
            )
        except OSError as exc:
            for fd in (in_r, in_w, out_r, out_w, err_r, err_w, res_r, res_w):
                os.close(fd)
            _rmtree(workdir)
            return ExecResult(["ERROR:Infra"] * len(job.tests), infra_error=f"cannot start the job: {exc}")
        for fd in (in_r, out_w, err_w, res_w):
            os.close(fd)
        _send(
            in_w,
            json.dumps(
                {"code": job.code, "tests": list(job.tests), "setup": job.setup, "nonce": nonce}
            ).encode(),
        )
        limits = {"out": self.output_limit, "err": self.output_limit, "res": harness.RESULT_LIMIT}
        capture = harness.Capture({"out": out_r, "err": err_r, "res": res_r}, limits)
        status, timed_out, cpu = harness.wait_child(proc.pid, capture, start, job.timeout)
        duration = time.monotonic() - start
        _kill_tree(proc.pid, uid if iso.drop_uid and not iso.namespaces else None)
        if timed_out:
            _, status = os.waitpid(proc.pid, 0)
        proc.returncode = -1  # reaped above; stops Popen from waiting again
        capture.drain(0.5)
        _rmtree(workdir)
        stdout = capture.data["out"].decode(errors="replace")
        stderr = capture.data["err"].decode(errors="replace")
        results = harness.verdicts(bytes(capture.data["res"]), len(job.tests), nonce, status, timed_out)
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

    def config_key(self) -> str:
        iso = self.isolation
        return (
            f"process:mem={self.memory_mb}:ns={int(iso.namespaces)}:uid={int(iso.drop_uid)}"
            f":harness={HARNESS_DIGEST}"
        )

    def describe(self) -> str:
        return f"process executor, workers={self.workers}: {self.isolation.describe()}"

    def run(self, jobs: Sequence[Job], progress: ProgressCallback | None = None) -> list[ExecResult]:
        def one(job: Job) -> ExecResult:
            slot = self._slots.get()
            try:
                res = self._runner.run(job, slot)
            finally:
                self._slots.put(slot)
            if progress:
                progress(1)
            return res

        if len(jobs) == 1 or self.workers == 1:
            return [one(job) for job in jobs]
        with ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(one, jobs))
