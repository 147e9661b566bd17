"""Docker executor, image naming, executor selection and the `agentbench sandbox` commands.

Tests marked ``docker`` need a running engine and the sandbox image; with CI set they fail instead of
skipping when either is missing (``sandbox/ci_setup.sh`` provides both).
"""

from __future__ import annotations

import json
import os
import subprocess
from contextlib import closing
from pathlib import Path

import pytest

from agentbench.errors import SandboxError
from agentbench.execution import Job, ProcessExecutor, make_executor, select
from agentbench.execution.image import apt_mirror

from .conftest import ROOT, require_docker, run_cli

ADD = "def add(a, b):\n    return a + b\n"
NO_ENGINE = {"DOCKER_HOST": "unix:///nonexistent/docker.sock"}


@pytest.fixture(scope="module")
def docker_executor():
    require_docker()
    from agentbench.execution.container import DockerExecutor

    ex = DockerExecutor(workers=2, hang_grace=3)
    yield ex
    ex.close()


# ------------------------------------------------------------------------------- no engine needed


def test_engine_down_is_one_clear_error(monkeypatch) -> None:
    for key, value in NO_ENGINE.items():
        monkeypatch.setenv(key, value)
    from agentbench.execution.container import DockerExecutor

    with pytest.raises(SandboxError, match="not reachable: start it with") as info:
        DockerExecutor()
    assert "\n" not in str(info.value)
    with pytest.raises(SandboxError, match="not reachable"):
        make_executor("docker")  # never falls back to the process executor


def test_auto_falls_back_loudly_when_docker_is_unavailable(monkeypatch, caplog) -> None:
    for key, value in NO_ENGINE.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(select, "_announced", False)
    with make_executor("auto", workers=1) as ex:
        assert isinstance(ex, ProcessExecutor)
    with make_executor("auto", workers=1):
        pass
    said = [r for r in caplog.records if r.name == "agentbench.execution.select"]
    assert len(said) == 1 and said[0].levelname == "WARNING"  # once, as a warning
    assert said[0].getMessage().startswith("sandbox: using process executor")
    assert "Docker unavailable" in said[0].getMessage()


def test_the_cli_prints_the_fallback_on_stderr(tmp_path: Path) -> None:
    (tmp_path / "code.py").write_text(ADD)
    (tmp_path / "tests.txt").write_text("assert add(1, 2) == 3\n")
    proc = run_cli(
        "sandbox",
        "exec",
        "--code",
        str(tmp_path / "code.py"),
        "--tests",
        str(tmp_path / "tests.txt"),
        env=NO_ENGINE,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("agentbench: sandbox: using process executor") == 1, proc.stderr
    assert "Docker unavailable" in proc.stderr


def test_apt_mirror_is_read_from_apt_sources(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("AGENTBENCH_DEBIAN_MIRROR", raising=False)
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://security.example/debian-security\nSuites: bookworm-security\n\n"
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n"
    )
    assert apt_mirror(tmp_path) == "http://mirror.example/debian"
    (tmp_path / "sources.list.d" / "debian.sources").unlink()
    (tmp_path / "sources.list").write_text("# c\ndeb [arch=amd64] http://old.example/debian bookworm main\n")
    assert apt_mirror(tmp_path) == "http://old.example/debian"
    monkeypatch.setenv("AGENTBENCH_DEBIAN_MIRROR", "http://override.example/debian")
    assert apt_mirror(tmp_path) == "http://override.example/debian"


def test_image_tag_tracks_the_worker_and_harness() -> None:
    from agentbench.execution.engine import image_tag

    tag = image_tag()
    assert tag.startswith("agentbench-sandbox:") and len(tag.split(":")[1]) == 12
    assert tag == image_tag()


def test_ci_setup_script_is_valid_bash() -> None:
    script = ROOT / "sandbox" / "ci_setup.sh"
    assert os.access(script, os.X_OK)
    subprocess.run(["bash", "-n", str(script)], check=True)


def test_cli_exec_with_the_process_sandbox(tmp_path: Path) -> None:
    (tmp_path / "code.py").write_text(ADD)
    (tmp_path / "tests.txt").write_text("# asserts\nassert add(1, 2) == 3\n\nassert add(1, 2) == 4\n")
    args = ["sandbox", "exec", "--code", str(tmp_path / "code.py"), "--tests", str(tmp_path / "tests.txt")]
    proc = run_cli(*args, "--sandbox", "process", "--json")
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert out["passed"] is False and out["results"] == ["pass", "FAIL"]
    assert {"stdout", "stderr"} <= out.keys()
    text = run_cli(*args, "--sandbox", "process").stdout
    assert "FAIL     assert add(1, 2) == 4" in text and "NOT PASSED" in text


def test_cli_docker_without_engine_exits_2_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "code.py").write_text(ADD)
    (tmp_path / "tests.txt").write_text("assert add(1, 2) == 3\n")
    args = ["sandbox", "exec", "--code", str(tmp_path / "code.py"), "--tests", str(tmp_path / "tests.txt")]
    proc = run_cli(*args, "--sandbox", "docker", env=NO_ENGINE)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "agentbench: error:" in proc.stderr
    missing = run_cli(
        "sandbox", "exec", "--code", str(tmp_path / "nope.py"), "--tests", str(tmp_path / "tests.txt")
    )
    assert missing.returncode == 2 and "cannot read the code file" in missing.stderr


# ----------------------------------------------------------------------------------- with Docker


@pytest.mark.docker
def test_docker_verdicts_in_order(docker_executor) -> None:
    jobs = [Job(ADD, (f"assert add({i}, 1) == {i + 1}", f"assert add({i}, 1) == {i}")) for i in range(40)]
    results = docker_executor.run(jobs)
    assert all(r.results == ["pass", "FAIL"] and r.infra_error is None for r in results)
    assert (
        docker_executor.run([Job("import os\nprint(os.getuid())", ("assert True",))])[0].stdout == "65534\n"
    )


@pytest.mark.docker
def test_containers_are_locked_down(docker_executor) -> None:
    docker_executor.run([Job("x = 1", ("assert x == 1",))])
    worker = docker_executor._all[0]
    worker.container.reload()
    host = worker.container.attrs["HostConfig"]
    assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"] and "no-new-privileges" in host["SecurityOpt"]
    assert host["Memory"] == host["MemorySwap"] > 0 and host["NanoCpus"] > 0 and host["PidsLimit"] > 0
    assert host["Init"] is True and set(host["Tmpfs"]) == {"/tmp", "/dev/shm"}
    assert "noexec" in host["Tmpfs"]["/tmp"]
    assert worker.container.attrs["Config"]["User"] == "65534:65534"


@pytest.mark.docker
def test_dead_container_is_replaced_and_the_job_retried(docker_executor) -> None:
    docker_executor.run([Job("x = 1", ("assert x == 1",))])
    victims = [w.container for w in docker_executor._all]
    for c in victims:
        c.kill()
    results = docker_executor.run([Job(ADD, ("assert add(1, 1) == 2",))] * 4)
    assert [r.results for r in results] == [["pass"]] * 4
    assert all(r.infra_error is None for r in results)
    assert not {c.id for c in victims} & {w.container.id for w in docker_executor._all}


@pytest.mark.docker
def test_hung_worker_becomes_an_infra_error(docker_executor) -> None:
    stop = Job("import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)", ("assert 1",), timeout=1)
    res = docker_executor.run([stop])[0]
    assert res.infra_error and "stopped answering" in res.infra_error and not res.passed
    assert docker_executor.run([Job("x = 1", ("assert x == 1",))])[0].passed


@pytest.mark.docker
def test_missing_image_says_how_to_build_it() -> None:
    require_docker()
    from agentbench.execution.container import DockerExecutor

    with pytest.raises(SandboxError, match="agentbench sandbox build --offline"):
        DockerExecutor(image="agentbench-sandbox:does-not-exist")


@pytest.mark.docker
def test_auto_picks_docker_when_available() -> None:
    require_docker()
    from agentbench.execution.container import DockerExecutor

    with make_executor("auto", workers=1) as ex:
        assert isinstance(ex, DockerExecutor)


@pytest.mark.docker
def test_close_leaves_no_containers() -> None:
    require_docker()
    from agentbench.execution.container import LABEL, DockerExecutor
    from agentbench.execution.engine import connect

    ex = DockerExecutor(workers=2)
    ex.run([Job("x = 1", ("assert x == 1",))] * 4)
    owner = ex.container_options()["labels"]["agentbench.owner"]
    ex.close()
    ex.close()  # idempotent
    with closing(connect()) as client:
        left = client.containers.list(all=True, filters={"label": [LABEL, f"agentbench.owner={owner}"]})
    assert left == []


@pytest.mark.docker
def test_containers_left_by_a_dead_run_are_removed_at_start() -> None:
    """A container whose start failed while the engine was unreachable stays "created" for ever (auto-remove
    never fires); the next executor on this host removes those of dead owners and keeps a live owner's."""
    import socket

    require_docker()
    from agentbench.execution.container import LABEL, DockerExecutor
    from agentbench.execution.engine import connect

    probe = subprocess.Popen(["true"])
    probe.wait()
    host = socket.gethostname()
    ex = DockerExecutor(workers=1)
    with closing(connect()) as client:
        orphan = client.containers.create(
            ex.image, labels={LABEL: "1", "agentbench.owner": f"{host}:{probe.pid}:dead"}
        )
        alive = client.containers.create(
            ex.image, labels={LABEL: "1", "agentbench.owner": f"{host}:{os.getpid()}:live"}
        )
        try:
            assert ex.run([Job(ADD, ("assert add(1, 2) == 3",))])[0].passed
            left = {c.id for c in client.containers.list(all=True, filters={"label": LABEL})}
            assert orphan.id not in left
            assert alive.id in left
        finally:
            ex.close()
            alive.remove(force=True)


@pytest.mark.docker
def test_cli_exec_and_check_with_docker(tmp_path: Path) -> None:
    require_docker()
    (tmp_path / "code.py").write_text(ADD + "print('hi')\n")
    (tmp_path / "tests.txt").write_text("assert add(1, 2) == 3\n")
    args = ["sandbox", "exec", "--code", str(tmp_path / "code.py"), "--tests", str(tmp_path / "tests.txt")]
    proc = run_cli(*args, "--sandbox", "docker", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["passed"] is True and out["results"] == ["pass"] and out["stdout"] == "hi\n"
    check = run_cli("sandbox", "check")
    assert check.returncode == 0, check.stderr
    assert "docker trial run: ok" in check.stdout and "process executor: ok" in check.stdout


@pytest.mark.docker
def test_a_long_job_frees_its_slot_for_an_overflow_container() -> None:
    require_docker()
    from agentbench.execution.container import DockerExecutor

    loop = Job("while True:\n    pass\n", ("assert True",), timeout=3)
    quick = [Job(ADD, ("assert add(1, 1) == 2",))] * 10
    with DockerExecutor(workers=1, overflow=1, slow_after=0.3) as ex:
        results = ex.run([loop, *quick])
        assert len(ex._all) == 2  # the quick jobs did not wait behind the loop
    assert results[0].results == ["TIMEOUT"] and all(r.passed for r in results[1:])
    with DockerExecutor(workers=1, overflow=0, slow_after=0.3) as ex:
        results = ex.run([loop, *quick[:2]])
        assert len(ex._all) == 1
    assert results[0].results == ["TIMEOUT"] and all(r.passed for r in results[1:])
