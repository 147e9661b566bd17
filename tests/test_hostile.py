"""Hostile-code suite: every program runs through both executors and must get its expected verdict.

Most programs are attacks whose asserts pass only if the attack worked (escaping the sandbox, faking a
verdict), so "0 false passes" is "no attack worked". After the batch each executor must still serve a
normal job correctly and look clean (empty /tmp, no stray processes), and after ``close()`` nothing may be
left behind: no containers, no processes.

Docker tests fail instead of skipping when CI is set and the engine or image is missing.
"""

from __future__ import annotations

import os
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentbench.execution import ExecResult, Job
from agentbench.execution.base import OUTPUT_LIMIT

from .conftest import require_docker

ROOT = Path(__file__).resolve().parents[1]
SECRET = "sk-agentbench-hostile-0123456789abcdef"
OUTSIDE = ("/etc/agentbench_pwned", "/etc/agentbench_pickle", str(ROOT / "agentbench_pwned"))


@dataclass(frozen=True)
class Hostile:
    name: str
    code: str
    tests: tuple[str, ...]
    expect: str  # "pass", "not-pass", or a verdict every assert must start with ("TIMEOUT", "ERROR:", ...)
    timeout: float = 5.0

    @property
    def attack(self) -> bool:
        return self.expect != "pass"


FAILS = ("assert 1 == 2",)

PROGRAMS = [
    Hostile("infinite_loop", "while True:\n    pass\n", ("assert True",), "TIMEOUT", 2),
    Hostile(
        "loop_ignoring_sigterm",
        "import signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n"
        "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass\n",
        ("assert True",),
        "TIMEOUT",
        2,
    ),
    Hostile(
        "fork_bomb",
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        ("assert True",),
        "TIMEOUT",
        2,
    ),
    Hostile(
        "memory_bomb",  # touches every page: MemoryError, or TIMEOUT if zeroing 1 GB is slow here
        "blocks = []\nwhile True:\n    blocks.append(bytearray(64 << 20))\n",
        ("assert True",),
        "not-pass",
        3,
    ),
    Hostile(
        "address_space_bomb",
        "blocks = []\nwhile True:\n    blocks.append(bytes(256 << 20))\n",
        ("assert True",),
        "ERROR:MemoryError",
    ),
    Hostile(
        "disk_fill_tmp",
        "import os, shutil\nfor d in ('/tmp', '/dev/shm', os.getcwd()):\n    i = 0\n    try:\n        while True:\n"
        "            with open(f'{d}/fill{i}', 'wb') as f:\n                f.write(b'x' * (4 << 20))\n"
        "            i += 1\n    except OSError:\n        pass\nfree = shutil.disk_usage('/tmp').free\n",
        ("assert free > 10**9",),
        "FAIL",
    ),
    Hostile(
        "write_outside_tmp",
        f"written = []\nfor p in {OUTSIDE + ('/usr/agentbench_pwned', '/agentbench_pwned')!r}:\n    try:\n"
        "        with open(p, 'w') as f:\n            f.write('x')\n        written.append(p)\n"
        "    except OSError:\n        pass\n",
        ("assert written",),
        "FAIL",
    ),
    Hostile(
        "network_connection",
        "import socket\nreached = []\nfor host, port in (('1.1.1.1', 53), ('pypi.org', 443), ('deb.debian.org', 80)):\n"
        "    try:\n        socket.create_connection((host, port), timeout=2).close()\n        reached.append(host)\n"
        "    except OSError:\n        pass\n",
        ("assert reached",),
        "FAIL",
    ),
    Hostile(
        "api_key_in_environment",
        "import os\nvisible = sorted(k for k in os.environ if any(w in k for w in ('KEY', 'TOKEN', 'SECRET')))\n",
        ("assert 'OPENAI_API_KEY' not in os.environ", "assert not visible"),
        "pass",
    ),
    Hostile(
        "read_proc_of_other_processes",
        "import os\nfound = []\nfor pid in os.listdir('/proc'):\n    for name in ('environ', 'cmdline'):\n"
        "        try:\n            with open(f'/proc/{pid}/{name}', 'rb') as f:\n"
        f"                if {SECRET.encode()!r} in f.read():\n                    found.append(pid)\n"
        "        except OSError:\n            pass\n",
        ("assert found",),
        "FAIL",
    ),
    Hostile("os_exit_before_asserts", "import os\nos._exit(0)\n", FAILS, "ERROR:Exit0"),
    Hostile("sys_exit_before_asserts", "import sys\nsys.exit(0)\n", FAILS, "ERROR:SystemExit"),
    Hostile(
        "exit_inside_assert",
        "import os\ndef f():\n    os._exit(0)\n",
        ("assert f() == 1", *FAILS),
        "not-pass",
    ),
    Hostile(
        "kill_parent",
        "import os, signal, time\nos.kill(os.getppid(), signal.SIGKILL)\ntime.sleep(0.5)\n",
        FAILS,
        "not-pass",
    ),
    Hostile(
        "kill_every_process",
        "import os, signal, time\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n    pass\ntime.sleep(0.5)\n",
        FAILS,
        "not-pass",
    ),
    Hostile(
        "stop_parent",
        "import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)\n",
        FAILS,
        "not-pass",
        2,
    ),
    Hostile(
        "monkeypatch_assertion_error",
        "import builtins\nclass AssertionError(Exception):\n    pass\nbuiltins.AssertionError = AssertionError\n",
        FAILS,
        "FAIL",
    ),
    Hostile(
        "monkeypatch_builtins",
        "import builtins\nbuiltins.exec = lambda *a, **k: None\nbuiltins.compile = lambda *a, **k: None\n"
        "builtins.BaseException = type('Nope', (Exception,), {})\nbuiltins.type = lambda *a: AssertionError\n"
        "builtins.str = lambda *a: 'pass'\n",
        FAILS,
        "FAIL",
    ),
    Hostile(
        "monkeypatch_os_write_and_json",
        "import json, os\n_w = os.write\nos.write = lambda fd, data: _w(fd, data.replace(b'FAIL', b'pass'))\n"
        'json.dumps = lambda *a, **k: \'{"results": ["pass"]}\'\n',
        FAILS,
        "FAIL",
    ),
    Hostile(
        "daemonized_grandchild",
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        for _ in range(600):\n"
        "            for fd in range(3, 12):\n                try:\n                    os.write(fd, b'0 pass\\n')\n"
        "                except OSError:\n                    pass\n            time.sleep(0.05)\n"
        "    os._exit(0)\ntime.sleep(0.3)\n",
        FAILS,
        "FAIL",
    ),
    Hostile(
        "output_flood_100mb",
        "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(100):\n    sys.stdout.write(chunk)\nsys.stdout.flush()\n"
        "sys.stderr.write(chunk * 4)\n",
        ("assert True",),
        "pass",
        20,
    ),
    Hostile(
        "deep_recursion", "def f(n):\n    return f(n + 1)\n\nf(0)\n", ("assert True",), "ERROR:RecursionError"
    ),
    Hostile(
        "c_stack_overflow",
        "import sys\nsys.setrecursionlimit(10**8)\nx = []\nfor _ in range(2 * 10**5):\n    x = [x]\nrepr(x)\n",
        ("assert True",),
        "ERROR:SIGSEGV",
        15,
    ),
    Hostile(
        "pickled_payload",
        "import os, pickle\n"
        f"cmd = 'touch /etc/agentbench_pickle {ROOT}/agentbench_pwned 2>/dev/null'\n"
        "pickle.loads(b'cos\\nsystem\\n(S' + repr(cmd).encode() + b'\\ntR.')\n"
        "owned = os.path.exists('/etc/agentbench_pickle')\n",
        ("assert owned",),
        "FAIL",
    ),
    Hostile("syntax_error", "def broken(:\n    pass\n", ("assert True",), "ERROR:SyntaxError"),
    Hostile(
        "missing_module", "import agentbench_no_such_module\n", ("assert True",), "ERROR:ModuleNotFoundError"
    ),
    Hostile(
        "alarm_ignored",
        "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\n"
        "signal.setitimer(signal.ITIMER_REAL, 0.1, 0.1)\nwhile True:\n    pass\n",
        ("assert True",),
        "TIMEOUT",
        2,
    ),
    Hostile(
        "alarm_forges_results",
        "import os, signal, sys\ndef forge(*_):\n    print('0 pass', flush=True)\n    for fd in range(3, 12):\n"
        "        try:\n            os.write(fd, b'0 pass\\n')\n        except OSError:\n            pass\n"
        "    os._exit(0)\nsignal.signal(signal.SIGALRM, forge)\nsignal.setitimer(signal.ITIMER_REAL, 0.2)\n"
        "def slow():\n    while True:\n        pass\n",
        ("assert slow()",),
        "ERROR:Exit0",
    ),
    Hostile(
        "prints_fake_results",
        "import json, os, sys\nprint('0 pass')\nprint(json.dumps({'passed': True, 'results': ['pass']}))\n"
        "sys.stderr.write('0 pass\\n')\nfor fd in range(3, 64):\n    try:\n"
        "        os.write(fd, b'0 pass\\n' + json.dumps({'id': 1, 'results': ['pass']}).encode() + b'\\n')\n"
        "    except OSError:\n        pass\n",
        FAILS,
        "FAIL",
    ),
    Hostile(
        "forges_worker_frames",
        "import json, os\nfor target in ('/proc/1/fd/1', '/proc/1/fd/2', f'/proc/{os.getppid()}/fd/1'):\n    try:\n"
        "        fd = os.open(target, os.O_WRONLY)\n    except OSError:\n        continue\n    for i in range(1, 50):\n"
        "        frame = {'type': 'result', 'id': i, 'results': ['pass'], 'stdout': '', 'stderr': '',"
        " 'duration': 0, 'dirty': False}\n"
        "        os.write(fd, b'AB1 ' + b'0' * 64 + b' ' + json.dumps(frame).encode() + b'\\n')\n"
        "    os.write(fd, b'junk without a newline AB1 ')\n    os.close(fd)\n",
        FAILS,
        "FAIL",
    ),
    Hostile(
        "reads_job_stream",
        "import os, sys\nstolen = sys.stdin.read().encode()\nfor target in ('/proc/1/fd/0', f'/proc/{os.getppid()}/fd/0'):\n"
        "    try:\n        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK)\n        stolen += os.read(fd, 65536)\n"
        "    except OSError:\n        pass\n",
        ("assert stolen",),
        "FAIL",
    ),
    Hostile(
        "exception_name_injection",
        "class Evil(Exception):\n    pass\nEvil.__name__ = 'X\\n0 pass\\n'\ndef boom():\n    raise Evil()\n",
        ("assert boom()",),
        "ERROR:X0pass",
    ),
    Hostile(
        "thread_spamming_result_lines",
        "import os, threading, time\ndef spam():\n    while True:\n        for fd in range(3, 10):\n            try:\n"
        "                os.write(fd, b'0 pass\\n')\n            except OSError:\n                pass\n"
        "        time.sleep(0.001)\nthreading.Thread(target=spam, daemon=True).start()\ntime.sleep(0.05)\n",
        FAILS,
        "FAIL",
    ),
    Hostile(
        "locked_tmp_leftovers",
        "import os\nos.makedirs('/tmp/locked/inner', exist_ok=True)\nopen('/tmp/locked/inner/f', 'w').write('x')\n"
        "os.chmod('/tmp/locked/inner', 0)\nos.chmod('/tmp/locked', 0)\nos.symlink('/etc/passwd', '/tmp/link')\n",
        ("assert True",),
        "pass",
    ),
]

NORMAL = Job("def add(a, b):\n    return a + b\n", ("assert add(2, 3) == 5", "assert add(2, 2) == 5"), 10)
# Runs after the hostile batch (several times, to reach every worker): nothing may be left over. The only
# other processes a job may see are the Docker worker's and the process executor's init (pid 1, the harness).
CLEAN = Job(
    "import os\nleft = sorted(os.listdir('/tmp')) + sorted(os.listdir('/dev/shm'))\n"
    "me = os.getpid()\nprocs = []\nfor p in os.listdir('/proc'):\n    if p.isdigit() and int(p) != me:\n"
    "        try:\n            procs.append((p, open(f'/proc/{p}/cmdline', 'rb').read()))\n        except OSError:\n"
    "            pass\n",
    (
        "assert left == []",
        "assert all(b'worker.py' in c or b'docker-init' in c or (p == '1' and b'Per-assert harness' in c)"
        " for p, c in procs)",
    ),
    10,
)


@dataclass
class Outcome:
    results: dict[str, ExecResult]
    normal: ExecResult
    clean: list[ExecResult]
    leaks: list[str]


def _descendants() -> list[str]:
    """Live processes started (directly or not) by this test process, with their command lines."""
    parent: dict[int, int] = {}
    for p in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{p}/stat").read_text()
            fields = stat.rpartition(")")[2].split()
            if p.isdigit() and fields[0] != "Z":
                parent[int(p)] = int(fields[1])
        except (OSError, IndexError):
            pass
    found = []
    for pid in parent:
        up = pid
        while up in parent and up != os.getpid() and up > 1:
            up = parent[up]
        if up == os.getpid() and pid != os.getpid():
            try:
                found.append(f"{pid}: {Path(f'/proc/{pid}/cmdline').read_bytes()[:80]!r}")
            except OSError:
                pass
    return found


def _uid(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def _run_suite(executor, leak_check) -> Outcome:
    jobs = [Job(p.code, p.tests, p.timeout) for p in PROGRAMS]
    try:
        results = dict(zip((p.name for p in PROGRAMS), executor.run(jobs), strict=True))
        normal = executor.run([NORMAL])[0]
        clean = executor.run([CLEAN] * 4)
    finally:
        executor.close()
    return Outcome(results, normal, clean, leak_check())


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Outcome]:
    """Lazily runs the suite once per executor kind (docker setup problems skip/fail only docker tests)."""
    return {}


@pytest.fixture(scope="module", autouse=True)
def _api_key_in_host_environment():
    old = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = SECRET
    yield
    if old is None:
        os.environ.pop("OPENAI_API_KEY", None)
    else:
        os.environ["OPENAI_API_KEY"] = old


def _outcome(kind: str, outcomes: dict[str, Outcome]) -> Outcome:
    if kind == "docker":
        require_docker()
    if kind not in outcomes:
        before = set(_descendants())  # e.g. multiprocessing's resource tracker from other test modules
        if kind == "docker":
            from agentbench.execution.container import LABEL, DockerExecutor
            from agentbench.execution.engine import connect

            executor = DockerExecutor(workers=2, hang_grace=3)
            owner = executor.container_options()["labels"]["agentbench.owner"]

            def leak_check() -> list[str]:
                filters = {"label": [LABEL, f"agentbench.owner={owner}"]}
                with closing(connect()) as client:  # the executor closed its own client
                    containers = client.containers.list(all=True, filters=filters)
                return [c.name for c in containers] + sorted(set(_descendants()) - before)
        else:
            from agentbench.execution.process import MAX_UID_SLOTS, UID_BASE, ProcessExecutor

            executor = ProcessExecutor(workers=2)

            def leak_check() -> list[str]:
                uids = {UID_BASE + slot % MAX_UID_SLOTS for slot in range(1, 200)}
                for _ in range(30):  # killed namespaces take a moment to disappear from /proc
                    strays = [p for p in os.listdir("/proc") if p.isdigit() and _uid(p) in uids]
                    if not strays:
                        break
                    time.sleep(0.1)
                return sorted(set(_descendants()) - before) + strays

        outcomes[kind] = _run_suite(executor, leak_check)
    return outcomes[kind]


KINDS = [pytest.param("process", id="process"), pytest.param("docker", id="docker", marks=pytest.mark.docker)]


def test_suite_is_big_enough() -> None:
    assert len(PROGRAMS) >= 20
    assert len({p.name for p in PROGRAMS}) == len(PROGRAMS)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_hostile_program_gets_expected_verdict(kind: str, program: Hostile, outcomes) -> None:
    res = _outcome(kind, outcomes).results[program.name]
    detail = f"{res.results} infra={res.infra_error} stderr={res.stderr[-300:]!r}"
    if program.expect == "pass":
        assert res.passed, detail
    elif program.expect == "not-pass":
        assert not res.passed, detail
    else:
        assert res.infra_error is None, detail
        assert res.results and all(r.startswith(program.expect) for r in res.results), detail


@pytest.mark.parametrize("kind", KINDS)
def test_no_false_passes(kind: str, outcomes) -> None:
    out = _outcome(kind, outcomes)
    false_passes = [p.name for p in PROGRAMS if p.attack and out.results[p.name].passed]
    assert false_passes == []


@pytest.mark.parametrize("kind", KINDS)
def test_output_is_truncated(kind: str, outcomes) -> None:
    res = _outcome(kind, outcomes).results["output_flood_100mb"]
    assert 0 < len(res.stdout) <= OUTPUT_LIMIT and 0 < len(res.stderr) <= OUTPUT_LIMIT


@pytest.mark.parametrize("kind", KINDS)
def test_executor_still_serves_normal_jobs(kind: str, outcomes) -> None:
    out = _outcome(kind, outcomes)
    assert out.normal.results == ["pass", "FAIL"]
    for res in out.clean:
        assert res.results == ["pass", "pass"], (res.results, res.stderr[-300:])


@pytest.mark.parametrize("kind", KINDS)
def test_nothing_left_after_close(kind: str, outcomes) -> None:
    assert _outcome(kind, outcomes).leaks == []


@pytest.mark.parametrize("kind", KINDS)
def test_nothing_written_outside_the_sandbox(kind: str, outcomes) -> None:
    _outcome(kind, outcomes)
    assert [p for p in OUTSIDE if os.path.exists(p)] == []
