"""The per-assert harness: verdict names, result-line parsing, tamper detection, output capture."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from agentbench.execution import harness

NONCE = "abc123"


def run_harness(code: str, tests: list[str], timeout: float = 10) -> list[str]:
    """Run the harness unsandboxed in a subprocess (trusted test code only) and return its verdicts."""
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", harness.__file__, str(write_fd)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=(write_fd,),
    )
    os.close(write_fd)
    proc.communicate(json.dumps({"code": code, "tests": tests, "nonce": NONCE}).encode(), timeout=timeout)
    with os.fdopen(read_fd, "rb") as r:
        raw = r.read()
    status = (proc.returncode & 0xFF) << 8 if proc.returncode >= 0 else -proc.returncode
    return harness.verdicts(raw, len(tests), NONCE, status, False)


def test_outcome_names() -> None:
    class Custom(AssertionError):
        pass

    assert harness.outcome_of(None) == "pass"
    assert harness.outcome_of(AssertionError("x")) == "FAIL"
    assert harness.outcome_of(Custom()) == "ERROR:Custom"
    assert harness.outcome_of(ZeroDivisionError()) == "ERROR:ZeroDivisionError"


def test_outcome_name_is_sanitised_and_cannot_be_faked_by_a_metaclass() -> None:
    class Meta(type):
        @property
        def __name__(cls):  # noqa: N802 - the attack
            return "pass"

    class Sneaky(Exception, metaclass=Meta):
        pass

    weird = type("X\n0 pass", (Exception,), {})
    assert harness.outcome_of(Sneaky()) == "ERROR:Sneaky"
    assert harness.outcome_of(weird()) == "ERROR:X0pass"


def test_parse_results_ignores_lines_without_the_nonce() -> None:
    raw = b"0 pass\nabc123 0 FAIL\nnoise\nabc123 1 pass\n"
    assert harness.parse_results(raw, 3, NONCE) == (["FAIL", "pass", None], False)


def test_repeated_or_bad_index_means_tampering() -> None:
    assert harness.parse_results(b"abc123 0 pass\nabc123 0 FAIL\n", 1, NONCE)[1] is True
    assert harness.parse_results(b"abc123 7 pass\n", 1, NONCE)[1] is True
    assert harness.parse_results(b"abc123 x pass\n", 1, NONCE)[1] is True
    assert harness.verdicts(b"abc123 0 pass\nabc123 0 pass\n", 2, NONCE, 0, False) == ["ERROR:Tampered"] * 2


def test_missing_results_take_the_exit_verdict() -> None:
    assert harness.verdicts(b"abc123 0 pass\n", 2, NONCE, None, True) == ["pass", "TIMEOUT"]
    assert harness.verdicts(b"", 1, NONCE, 3 << 8, False) == ["ERROR:Exit3"]
    assert harness.verdicts(b"", 1, NONCE, signal.SIGKILL, False) == ["ERROR:SIGKILL"]


def test_harness_runs_each_assert_in_the_snippet_namespace() -> None:
    code = "def inc(x):\n    return x + 1\n"
    tests = ["assert inc(1) == 2", "assert inc(1) == 3", "assert undefined_name", "import sys; sys.exit(0)"]
    assert run_harness(code, tests) == ["pass", "FAIL", "ERROR:NameError", "ERROR:SystemExit"]


def test_snippet_failure_errors_every_assert() -> None:
    assert run_harness("raise ValueError('no')", ["assert True", "assert True"]) == ["ERROR:ValueError"] * 2
    assert run_harness("def f(:\n  pass", ["assert True"]) == ["ERROR:SyntaxError"]


def test_patched_builtins_do_not_change_verdicts() -> None:
    code = (
        "import builtins, os\nbuiltins.exec = lambda *a, **k: None\nbuiltins.str = lambda *a: 'pass'\n"
        "builtins.enumerate = lambda t: []\n_w = os.write\nos.write = lambda fd, b: _w(fd, b.replace(b'FAIL', b'pass'))\n"
    )
    assert run_harness(code, ["assert 1 == 2", "assert True"]) == ["FAIL", "pass"]


def test_exit_before_asserts_is_an_error_not_a_pass() -> None:
    assert run_harness("import os\nos._exit(0)", ["assert True"]) == ["ERROR:Exit0"]


def test_capture_keeps_the_head_and_never_blocks_the_writer() -> None:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        os.close(read_fd)
        os.write(write_fd, b"x" * (1 << 20))
        os._exit(0)
    os.close(write_fd)
    cap = harness.Capture({"out": read_fd}, {"out": 100})
    status, timed_out, _ = harness.wait_child(pid, cap, time.monotonic(), 10)
    cap.drain(1)
    assert not timed_out and os.WIFEXITED(status)
    assert bytes(cap.data["out"]) == b"x" * 100


def test_wait_child_times_out() -> None:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        time.sleep(30)
        os._exit(0)
    os.close(write_fd)
    cap = harness.Capture({"out": read_fd}, {"out": 10})
    start = time.monotonic()
    status, timed_out, _ = harness.wait_child(pid, cap, start, 0.3)  # asleep: the wall-clock limit ends it
    assert timed_out and status is None and 0.3 * harness.WALL_LIMIT_FACTOR <= time.monotonic() - start < 5
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    cap.drain(1)


def test_wait_child_times_a_busy_job_by_the_cpu_time_of_its_session() -> None:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        os.setsid()
        if os.fork() == 0:  # the CPU time of the whole session counts
            while True:
                pass
        while True:
            pass
    os.close(write_fd)
    cap = harness.Capture({"out": read_fd}, {"out": 10})
    start = time.monotonic()
    status, timed_out, cpu = harness.wait_child(pid, cap, start, 0.6)
    elapsed = time.monotonic() - start
    used = harness.session_cpu_seconds(pid)
    os.killpg(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    cap.drain(1)
    assert timed_out and status is None and used >= 0.6 and cpu >= 0.6
    assert elapsed < 0.6 * harness.WALL_LIMIT_FACTOR
