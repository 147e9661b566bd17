"""Both executors give the same per-assert verdicts to programs whose verdict once depended on the executor.

- Recursion near the limit: the Docker worker ran snippets three Python frames deeper than the process
  executor, so a recursion 991-993 deep passed in one and raised RecursionError in the other.
- A CPU-heavy job on a loaded machine: the `core` pool's byte_swap_32 mutant ``8 << n`` (three ~0.5 GB
  integers, 1.6 s of CPU) passed with the process executor and timed out with Docker while the pool was
  built under load: all Docker containers share one CPU weight on the host, while every process-executor
  job is a session of its own. Jobs are now timed by the CPU time they use (capped in wall-clock time).

Docker tests fail instead of skipping when CI is set and the engine or image is missing.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from agentbench.execution import Job, ProcessExecutor
from agentbench.execution.harness import WALL_LIMIT_FACTOR

from .conftest import require_docker

BYTE_SWAP_MUTANT = (
    "def byte_swap_32(n):\n    if n < 0 or n > 0xFFFFFFFF:\n        return None\n"
    "    return (((n >> 24) & 0xFF) | ((n >> 8) & 0xFF00)\n"
    "            | ((8 << n) & 0xFF0000) | ((n << 24) & 0xFF000000))\n"
)
BYTE_SWAP_TESTS = (
    "assert byte_swap_32(0x12345678) == 0x78563412",
    "assert byte_swap_32(0) == 0",
    "assert byte_swap_32(0xFFFFFFFF) == 0xFFFFFFFF",
    "assert byte_swap_32(1) == 0x01000000",
    "assert byte_swap_32(0xFF000000) == 0xFF",
    "assert byte_swap_32(0x00FF0000) == 0x0000FF00",
    "assert byte_swap_32(0x0000FF00) == 0x00FF0000",
    "assert byte_swap_32(0xA1B2C3D4) == 0xD4C3B2A1",
    "assert byte_swap_32(2**32) is None",
    "assert byte_swap_32(-1) is None",
)
BYTE_SWAP_VERDICTS = ["FAIL", "pass", "FAIL", "pass", "pass", "pass", "FAIL", "FAIL", "pass", "pass"]
LOOP = Job("while True:\n    pass\n", ("assert True",), 4)


def _docker(**kwargs):
    require_docker()
    from agentbench.execution.container import DockerExecutor

    return DockerExecutor(**kwargs)


def _both(jobs: list[Job], workers: int = 2, **docker_kwargs) -> tuple[list, list]:
    with ProcessExecutor(workers=workers) as process, _docker(workers=workers, **docker_kwargs) as docker:
        return process.run(jobs), docker.run(jobs)


@pytest.mark.docker
def test_recursion_limit_strikes_at_the_same_depth() -> None:
    code = "def depth(n):\n    return 0 if n == 0 else 1 + depth(n - 1)\n"
    tests = tuple(f"assert depth({n}) == {n}" for n in range(975, 1000))
    process, docker = _both([Job(code, tests)])
    assert process[0].results == docker[0].results
    assert {"pass", "ERROR:RecursionError"} == set(docker[0].results)  # the limit lies inside the range


@pytest.mark.docker
def test_time_off_the_cpu_does_not_count_until_the_wall_clock_limit() -> None:
    jobs = [
        Job("import time\ntime.sleep(1.5)\n", ("assert True",), timeout=1),
        Job("import time\n", ("assert True", "time.sleep(60)"), timeout=1),
        Job("while True:\n    pass\n", ("assert True",), timeout=1),
    ]
    process, docker = _both(jobs)
    assert [r.results for r in process] == [r.results for r in docker]
    assert [r.results for r in docker] == [["pass"], ["pass", "TIMEOUT"], ["TIMEOUT"]]
    # No upper bounds on wall time (a loaded machine stretches it); what tells the two limits apart is CPU.
    for res in (process[1], docker[1]):  # asleep: timed out by idle time, never before 3x its limit
        assert res.duration > WALL_LIMIT_FACTOR - 0.1
        assert res.cpu_seconds is not None and res.cpu_seconds < 0.5
    for res in (process[2], docker[2]):  # busy: timed out by the CPU time it used
        assert res.cpu_seconds is not None and res.cpu_seconds >= 0.9


@pytest.mark.docker
@pytest.mark.slow
def test_cpu_heavy_job_gets_the_same_verdicts_on_a_loaded_machine() -> None:
    """Busy loops in the same batch plus CPU hogs on the host: the Docker job used to get a sixth of a CPU."""
    n = min(os.cpu_count() or 1, 4)
    job = Job(BYTE_SWAP_MUTANT, BYTE_SWAP_TESTS, timeout=4)
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True) for _ in range(n)
    ]
    try:
        process, docker = _both([LOOP] * (n + 1) + [job], workers=n + 2, overflow=0)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert process[-1].results == docker[-1].results == BYTE_SWAP_VERDICTS


# Uses a second of its own CPU time, however long the machine takes to give it that.
CPU_SECOND = Job(
    "import time\n"
    "def spin(seconds):\n"
    "    start = time.process_time()\n"
    "    while time.process_time() - start < seconds:\n"
    "        pass\n"
    "    return True\n",
    ("assert spin(1.0)", "assert spin(0.0) is False"),
    timeout=2,
)


@pytest.mark.docker
@pytest.mark.slow
def test_a_job_starved_of_cpu_gets_its_idle_machine_verdict() -> None:
    """Ten CPU hogs per core leave a job a tenth of a CPU: it needs ~10 s of wall-clock time for 1 s of CPU,
    past the 6 s a wall-clock limit allowed. Time spent waiting for a CPU must not count against a job (up
    to thirty times its limit, 60 s here): the first attempt gets the verdict, not a retry after starvation
    (a job that reaches the 60 s ceiling is run again, see test_faults_sandbox.py)."""
    n = (os.cpu_count() or 1) * 10
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True) for _ in range(n)
    ]
    try:
        process, docker = _both([CPU_SECOND] * 2, workers=2)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    for res in process + docker:
        assert res.results == ["pass", "FAIL"], res
        assert res.infra_error is None and "starved_attempts" not in res.extra, res
