"""Sandbox faults (issue 32): nothing a job starts outlives agentbench, ``close()`` stops work in flight, the
process sandbox shows no host home and keeps no host writes, bad input files are one-line errors, and a
job starved of CPU is run again instead of judged.

Real processes, real signals, the real Docker engine. Docker tests fail instead of skipping when CI is set
and the engine or image is missing.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from agentbench.errors import SandboxError
from agentbench.execution import Job, ProcessExecutor, base, harness
from agentbench.execution.cache import ExecCache, run_cached
from agentbench.execution.process import MAX_UID_SLOTS, UID_BASE

from .conftest import ROOT, require_docker

AGENTBENCH = str(Path(sys.executable).with_name("agentbench"))
SLEEPER = Job("import time\ntime.sleep(30)\n", ("assert True",), timeout=30)


# ------------------------------------------------------------------------------------------ helpers


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def _alive(pid: int, started: str) -> bool:
    """Whether ``pid`` is still the process that started at ``started`` (clock ticks), and not a zombie."""
    fields = _stat(pid)
    return fields is not None and fields[19] == started and fields[0] != "Z"


def _descendants(root: int) -> dict[int, str]:
    """Live descendants of ``root``: pid -> start time (to tell a reused pid apart)."""
    parent, start = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat(int(entry))) is not None and fields[0] != "Z":
            parent[int(entry)], start[int(entry)] = int(fields[1]), fields[19]
    found = {}
    for pid in parent:
        up = parent[pid]
        while up > 1 and up != root and up in parent:
            up = parent[up]
        if up == root:
            found[pid] = start[pid]
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _namespaces() -> bool:
    from agentbench.execution.process import probe_isolation

    return probe_isolation().namespaces


def _wait_for(predicate: Callable[[], object], timeout: float, what: str) -> object:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def _survivors(procs: dict[int, str], within: float) -> list[str]:
    """The processes of ``procs`` still alive after ``within`` seconds."""
    end = time.monotonic() + within
    while True:
        left = [p for p, started in procs.items() if _alive(p, started)]
        if not left or time.monotonic() > end:
            return [f"{p}: {_cmdline(p)[:70]!r}" for p in left]
        time.sleep(0.1)


def _job_uid_processes() -> list[int]:
    uids = {UID_BASE + slot % MAX_UID_SLOTS for slot in range(MAX_UID_SLOTS)}
    out = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and os.stat(f"/proc/{entry}").st_uid in uids:
                out.append(int(entry))
        except OSError:
            pass
    return out


# ----------------------------------------------- 1. a process-executor job dies with agentbench


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_sandbox_exec_leaves_no_process_when_killed(sig: signal.Signals, tmp_path: Path) -> None:
    """unshare, the harness (init of the job's namespace) and the sleeping job itself all go with the CLI,
    even when the CLI is SIGKILLed and can clean up nothing."""
    code, tests = tmp_path / "sleep.py", tmp_path / "tests.txt"
    mark = "ab-sleep-" + uuid.uuid4().hex[:6]  # the snippet's process name, once it runs
    code.write_text(
        f"import ctypes, time\nctypes.CDLL(None).prctl(15, {mark.encode()!r}, 0, 0, 0)\ntime.sleep(120)\n"
    )
    tests.write_text("assert True\n")
    cli = subprocess.Popen(
        [AGENTBENCH, "sandbox", "exec", "--sandbox", "process", "--code", str(code), "--tests", str(tests)]
        + ["--timeout", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    try:

        def job_running() -> dict[int, str]:
            procs = _descendants(cli.pid)
            return procs if any(_comm(p) == mark for p in procs) else {}

        procs = _wait_for(job_running, 60, "the snippet to run")
        if _namespaces():
            assert any(_cmdline(p).startswith(b"unshare") for p in procs), procs
        time.sleep(0.5)  # well into time.sleep(120)
        cli.send_signal(sig)
        cli.wait(timeout=5)  # exits promptly (a SIGINT or SIGTERM one does not wait for the job)
        assert cli.returncode != 0
        assert b"Traceback" not in cli.stderr.read()
        assert _survivors(procs, within=5) == []
    finally:
        cli.kill()
        cli.wait()


# --------------------------------------------------------------- 2. close() stops work in flight


def _close_during_run(executor, jobs: list[Job], cache: ExecCache) -> tuple[BaseException | None, float]:
    """Run ``jobs`` through ``run_cached`` in a thread, ``close()`` the executor after a second; returns what
    the run raised and how long it took to end after the close."""
    outcome: list[BaseException | None] = []
    ended: list[float] = []

    def target() -> None:
        try:
            run_cached(executor, jobs, cache)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            outcome.append(exc)
        ended.append(time.monotonic())

    runner = threading.Thread(target=target, daemon=True)
    runner.start()
    time.sleep(1)
    closed_at = time.monotonic()
    executor.close()  # returns once the jobs' containers or processes are gone
    runner.join(timeout=max(0.0, closed_at + 5 - time.monotonic()))
    assert ended, "run() still going 5 s after close()"
    return outcome[0], ended[0] - closed_at


def test_process_executor_close_kills_jobs_in_flight(tmp_path: Path) -> None:
    before = set(_descendants(os.getpid()))
    with ExecCache(tmp_path / "cache") as cache:
        executor = ProcessExecutor(workers=2)
        jobs = [Job(SLEEPER.code, (f"assert {i}",), SLEEPER.timeout) for i in range(5)]
        raised, took = _close_during_run(executor, jobs, cache)
        assert isinstance(raised, SandboxError) and "closed" in str(raised), raised
        assert took < 5
        assert len(cache) == 0  # no verdict for a killed job
    # neither the two running jobs nor the three that had not started are (or will be) running
    time.sleep(1)
    assert {p: s for p, s in _descendants(os.getpid()).items() if p not in before} == {}
    assert _job_uid_processes() == []
    with pytest.raises(SandboxError, match="closed"):
        executor.run([Job("x = 1", ("assert x == 1",))])


@pytest.mark.docker
def test_docker_executor_close_kills_jobs_in_flight(tmp_path: Path) -> None:
    require_docker()
    from agentbench.execution.container import LABEL, DockerExecutor
    from agentbench.execution.engine import connect

    executor = DockerExecutor(workers=2, overflow=1)
    owner = executor.container_options()["labels"]["agentbench.owner"]
    try:
        assert executor.run([Job("x = 1", ("assert x == 1",))])[0].results == ["pass"]  # containers up
        with ExecCache(tmp_path / "cache") as cache:
            jobs = [Job(SLEEPER.code, (f"assert {i}",), SLEEPER.timeout) for i in range(5)]
            raised, took = _close_during_run(executor, jobs, cache)
            assert isinstance(raised, SandboxError) and "closed" in str(raised), raised
            assert took < 5
            assert len(cache) == 0
    finally:
        executor.close()
    filters = {"label": [LABEL, f"agentbench.owner={owner}"]}
    with closing(connect()) as client:
        assert [c.name for c in client.containers.list(all=True, filters=filters)] == []


# --------------------------------------------------------- 3. no host home, no host writes


@pytest.fixture
def process_executor():
    with ProcessExecutor(workers=1) as ex:
        if not ex.isolation.namespaces:
            assert "HOME" in ex.describe()  # says the jobs can read the user's files
            pytest.skip("no namespaces here: " + ex.describe())
        yield ex


@pytest.fixture
def planted_home(monkeypatch):
    """A HOME outside /tmp that any uid could read, with a 0644 token and shell history in it."""
    home = Path(tempfile.mkdtemp(prefix="agentbench-home-", dir="/var/lib"))
    try:
        home.chmod(0o755)
        (home / ".config").mkdir(mode=0o755)
        for name in (".config/token", ".bash_history"):
            (home / name).write_text("secret-" + uuid.uuid4().hex)
            (home / name).chmod(0o644)
        # the control: outside the sandbox another uid could read them
        assert all(os.stat(d).st_mode & 0o005 == 0o005 for d in (home, *home.parents))
        monkeypatch.setenv("HOME", str(home))
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_a_job_cannot_read_the_invoking_users_home(process_executor, planted_home: Path) -> None:
    planted = [str(planted_home / ".config/token"), str(planted_home / ".bash_history")]
    root_token = None
    if os.geteuid() == 0:  # /root too, whatever its permissions
        root_token = Path("/root/.config") / f"agentbench-token-{uuid.uuid4().hex[:8]}"
        root_token.parent.mkdir(exist_ok=True)
        root_token.write_text("root-secret")
        root_token.chmod(0o644)
        planted.append(str(root_token))
    code = (
        "import os\nseen = []\n"
        f"for path in {planted!r}:\n"
        "    try:\n        seen.append(open(path).read())\n    except OSError:\n        pass\n"
        f"listed = os.listdir({str(planted_home)!r}) if os.path.isdir({str(planted_home)!r}) else []\n"
        "in_root = os.listdir('/root') if os.path.isdir('/root') else []\n"
    )
    try:
        res = process_executor.run(
            [Job(code, ("assert seen == []", "assert listed == []", "assert in_root == []"))]
        )
    finally:
        if root_token is not None:
            root_token.unlink()
    assert res[0].results == ["pass", "pass", "pass"], (res[0].results, res[0].stderr[-300:])


def test_job_writes_to_world_writable_host_dirs_stay_in_the_sandbox(process_executor) -> None:
    name = f"agentbench-{uuid.uuid4().hex[:8]}"
    targets = [f"{d}/{name}" for d in ("/run/lock", "/var/lock", "/var/tmp", "/dev/shm", "/tmp", str(ROOT))]
    code = (
        "written = []\n"
        f"for path in {targets!r}:\n"
        "    try:\n        with open(path, 'w') as f:\n            f.write('x')\n        written.append(path)\n"
        "    except OSError:\n        pass\n"
    )
    res = process_executor.run([Job(code, ("assert '/run/lock/' + " + repr(name) + " in written",))])[0]
    assert res.results == ["pass"], res.stderr[-300:]  # the write worked, in the job's private /run/lock
    assert [t for t in targets if os.path.exists(t)] == []


def test_home_inside_the_job_is_an_empty_writable_tmpfs(process_executor, planted_home: Path) -> None:
    code = (
        "import os\nhome = os.environ['HOME']\nfirst = os.listdir(home)\n"
        "with open(os.path.join(home, 'f'), 'w') as f:\n    f.write('x')\n"
        "mounts = {line.split()[4]: line.split(' - ')[1].split()[0] for line in open('/proc/self/mountinfo')}\n"
    )
    tests = (
        "assert first == []",
        "assert mounts.get(home) == 'tmpfs'",
        f"assert home != {str(planted_home)!r}",
    )
    res = process_executor.run([Job(code, tests)] * 2)
    assert [r.results for r in res] == [["pass"] * 3] * 2, res[0].stderr[
        -300:
    ]  # fresh for the second job too


# ----------------------------------------------------------- 4. unreadable input files for sandbox exec


@pytest.mark.parametrize("bad", ["code", "tests"])
def test_sandbox_exec_names_a_file_that_is_not_utf8(bad: str, tmp_path: Path) -> None:
    files = {"code": tmp_path / "snippet.py", "tests": tmp_path / "tests.txt"}
    files["code"].write_text("x = 1\n")
    files["tests"].write_text("assert x == 1\n")
    files[bad].write_bytes(b"x = '\xff\xfe'\n")
    out = subprocess.run(
        [AGENTBENCH, "sandbox", "exec", "--sandbox", "process", "--code", str(files["code"])]
        + ["--tests", str(files["tests"])],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert str(files[bad]) in lines[0] and "UTF-8" in lines[0]


# ------------------------------------------------------------ 5. starved jobs are retried, not judged

# Renames its process (so the test can find it and stop it while it sleeps), then uses a tenth of a second of
# CPU: unstopped, it needs 1/40 of a CPU to finish within the 4.5 s ceiling of the short_ceiling fixture.
MARK = "ab-starve-" + uuid.uuid4().hex[:5]
STARVABLE = Job(
    "import ctypes, time\n"
    f"ctypes.CDLL(None).prctl(15, {MARK.encode()!r}, 0, 0, 0)\n"  # PR_SET_NAME
    "time.sleep(0.5)\nstart = time.process_time()\nwhile time.process_time() - start < 0.1:\n    pass\n",
    ("assert True", "assert 1 == 2"),
    timeout=3,
)


class _Starver:
    """SIGSTOPs every process named MARK (the first ``limit`` of them): a job that gets no CPU at all."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit, self.stopped = limit, []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._done.is_set():
            for entry in os.listdir("/proc"):
                if not entry.isdigit() or int(entry) in self.stopped:
                    continue
                try:
                    if Path(f"/proc/{entry}/comm").read_text().strip() != MARK:
                        continue
                    if self.limit is not None and len(self.stopped) >= self.limit:
                        continue
                    os.kill(int(entry), signal.SIGSTOP)
                    self.stopped.append(int(entry))
                except OSError:
                    continue
            time.sleep(0.005)

    def __enter__(self) -> _Starver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        for pid in self.stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass


@pytest.fixture
def short_ceiling(monkeypatch):
    """The wall-clock ceiling at 1.5x the time limit (below the 3x idle limit): a stopped job reaches it
    while it has used neither its CPU time nor its idle time, exactly as a starved one does."""
    monkeypatch.setattr(harness, "STARVED_LIMIT_FACTOR", 1.5)
    monkeypatch.setattr(base, "STARVED_BACKOFF", 0.2)
    assert harness.STARVED_LIMIT_FACTOR < harness.WALL_LIMIT_FACTOR


def _docker_executor():
    require_docker()
    from agentbench.execution.container import DockerExecutor

    return DockerExecutor(workers=1)


EXECUTORS = [
    pytest.param(lambda: ProcessExecutor(workers=1), id="process"),
    pytest.param(_docker_executor, id="docker", marks=pytest.mark.docker),
]


@pytest.mark.parametrize("make", EXECUTORS)
def test_a_job_starved_once_is_run_again_and_judged(make, short_ceiling) -> None:
    with make() as executor, _Starver(limit=1) as starver:
        res = executor.run([STARVABLE])[0]
    assert len(starver.stopped) == 1  # the first attempt was starved...
    assert res.infra_error is None, res.infra_error  # ...a later one was judged
    # (on a busy machine a retry may be starved too, and is retried in turn)
    assert res.results == ["pass", "FAIL"] and res.extra.get("starved_attempts", 0) >= 1


@pytest.mark.parametrize("make", EXECUTORS)
def test_a_job_that_stays_starved_is_an_infra_error_never_cached(make, short_ceiling, tmp_path: Path) -> None:
    with make() as executor, ExecCache(tmp_path / "cache") as cache:
        with _Starver() as starver:
            res = run_cached(executor, [STARVABLE], cache)[0]
        assert len(starver.stopped) == base.STARVED_RETRIES + 1
        assert res.infra_error and res.infra_error.startswith("starved:"), res
        assert not any(r in ("pass", "FAIL", "TIMEOUT") for r in res.results)
        assert len(cache) == 0
        again = run_cached(executor, [STARVABLE], cache)[0]  # the load is gone
        assert again.results == ["pass", "FAIL"] and again.infra_error is None
        assert len(cache) == 1
