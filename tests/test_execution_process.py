"""Process executor: verdicts, time limits, scrubbed environment, isolation probing, selection."""

from __future__ import annotations

import os
import shutil

import pytest

from agentbench.errors import ConfigError
from agentbench.execution import Job, ProcessExecutor, make_executor
from agentbench.execution.process import probe_isolation

ADD = "def add(a, b):\n    return a + b\n"


@pytest.fixture(scope="module")
def executor():
    with ProcessExecutor(workers=2) as ex:
        yield ex


def test_per_assert_verdicts_in_input_order(executor) -> None:
    jobs = [
        Job(ADD, ("assert add(1, 2) == 3", "assert add(1, 2) == 4", "assert add(None, 1)")),
        Job("x = 1", ("assert x == 1",)),
        Job("import nope_not_a_module", ("assert True",)),
    ]
    results = executor.run(jobs)
    assert [r.results for r in results] == [
        ["pass", "FAIL", "ERROR:TypeError"],
        ["pass"],
        ["ERROR:ModuleNotFoundError"],
    ]
    assert results[0].passed is False and results[1].passed is True
    assert all(r.infra_error is None for r in results)


def test_time_limit_covers_the_whole_job(executor) -> None:
    res = executor.run([Job("import time\n", ("assert True", "time.sleep(60)", "assert True"), timeout=1)])[0]
    assert res.results == ["pass", "TIMEOUT", "TIMEOUT"]
    assert res.duration < 5


def test_output_is_captured_and_truncated(executor) -> None:
    res = executor.run(
        [Job("import sys\nprint('hello')\nsys.stderr.write('e' * 100000)\n", ("assert True",))]
    )[0]
    assert res.stdout == "hello\n"
    assert len(res.stderr) == 8192


def test_environment_is_an_allow_list(executor, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-should-not-leak")
    code = "import os\nenv = dict(os.environ)\n"
    res = executor.run(
        [Job(code, ("assert 'ANTHROPIC_API_KEY' not in env", "assert 'GITHUB_TOKEN' not in env"))]
    )
    assert res[0].results == ["pass", "pass"]


def test_each_job_gets_a_fresh_working_directory(executor) -> None:
    write = Job("open('marker', 'w').write('x')\n", ("assert True",))
    check = Job("import os\n", ("assert not os.path.exists('marker')",))
    assert [r.results for r in executor.run([write, check, write, check])] == [["pass"]] * 4


def test_progress_is_reported_per_job(executor) -> None:
    seen: list[int] = []
    executor.run([Job("x = 1", ("assert x == 1",))] * 3, progress=seen.append)
    assert sum(seen) == 3


def test_config_key_names_the_settings(executor) -> None:
    key = executor.config_key()
    assert key.startswith("process:mem=1024") and "ns=" in key
    assert "process executor" in executor.describe()


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare")
def test_root_uses_namespaces_and_an_unprivileged_uid() -> None:
    iso = probe_isolation()
    assert iso.namespaces and iso.drop_uid


def test_make_executor_process_and_bad_kinds() -> None:
    with make_executor("process", workers=1) as ex:
        assert isinstance(ex, ProcessExecutor) and ex.workers == 1
    with pytest.raises(ConfigError, match="unknown sandbox"):
        make_executor("vm")
    with pytest.raises(ConfigError, match="at least 1"):
        make_executor("process", workers=0)
