"""LiteLLM workers kept alive between runs (AGENTBENCH_KEEP_WORKERS; agentbench.llm.kept and .server):
one server imports LiteLLM and forks each pool's workers; the workers belong to their pool (they end with
it, even when its process is killed), not to the server; a server exits when idle and leaves nothing
behind; any problem falls back to the run's own workers with one warning."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentbench.llm import kept, processes
from agentbench.llm.kept import KEEP_ENV, identity, list_servers, server_key, stop_server
from agentbench.llm.processes import FORKS, LLMProcessPool, WireLimit

from .conftest import ROOT, core_subset, parent_of, run_cli, still_alive

sys.path.insert(0, str(ROOT / "bench"))
from stub_llm import running_stub  # noqa: E402

pytestmark = pytest.mark.skipif(not FORKS, reason="kept workers are forked: Linux only")


def _prompt(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"request {i}\n```python\ndef f_{i}(x):\n```"}]


def _answers(pool: LLMProcessPool, url: str, n: int) -> list[str]:
    kwargs = {"model": "openai/stub", "api_base": url, "api_key": "no-key"}

    async def go() -> list:
        return await asyncio.gather(
            *(pool.complete({**kwargs, "messages": _prompt(i)}, WireLimit("k", 4)) for i in range(n))
        )

    return [a.fields["text"] for a in asyncio.run(go())]


def _expected(n: int) -> list[str]:
    return [f"```python\ndef f_{i}(x):\n    return None\n```" for i in range(n)]


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Kept workers on, with their servers in a directory of this test's own (short: a socket's path is
    at most 107 bytes); any server left is stopped."""
    directory = Path(tempfile.mkdtemp(prefix="ab-"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(directory))
    monkeypatch.setenv(KEEP_ENV, "120")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(kept, "_warned", set())  # this test's warnings, not those of an earlier one
    monkeypatch.setattr(kept, "_planned", {})
    yield directory
    for server in list_servers():
        stop_server(server.socket)
    shutil.rmtree(directory, ignore_errors=True)


def _server_pid() -> int:
    servers = list_servers()
    assert len(servers) == 1 and servers[0].pid is not None, servers
    return servers[0].pid


def _wait_for(condition: Callable[[], object], wait: float = 60.0) -> None:
    deadline = time.monotonic() + wait
    while not condition():
        assert time.monotonic() < deadline, "waited in vain"
        time.sleep(0.05)


def _start_server() -> int:
    """What a first run does: no server yet, so the pool's workers are its own and, once it closes, a
    server starts (in the background: the wait for it to listen is the test's)."""
    pool = LLMProcessPool(1)
    try:
        assert pool._workers[0].process is not None  # the run's own worker
    finally:
        pool.close()
    _wait_for(lambda: any(s.pid for s in list_servers()))
    return _server_pid()


def test_kept_workers_are_forked_by_one_server_reused_and_outlive_it(runtime: Path) -> None:
    server = _start_server()
    with running_stub(latency=0.05) as stub:
        first = LLMProcessPool(2)
        assert _answers(first, stub.url, 6) == _expected(6)
        pids = [w.pid for w in first._workers]
        assert all(w.process is None and w.pid for w in first._workers) and len(set(pids)) == 2
        assert all(parent_of(pid) == server for pid in pids if pid)  # not this process's children
        first.close()
        assert still_alive([pid for pid in pids if pid]) == []  # a closed pool leaves no worker

        second = LLMProcessPool(2)
        try:
            assert _server_pid() == server  # the same server: LiteLLM is not imported again
            assert {w.pid for w in second._workers}.isdisjoint(pids)
            assert stop_server(list_servers()[0].socket)
            assert still_alive([server]) == [] and not list(runtime.glob("*/*"))  # nothing left behind
            # the workers are the pool's, not the server's
            assert _answers(second, stub.url, 4) == _expected(4)
        finally:
            second.close()


def test_kept_workers_end_when_their_runs_process_is_killed(runtime: Path) -> None:
    code = (
        "import sys, time\n"
        "from agentbench.llm.processes import LLMProcessPool\n"
        "pool = LLMProcessPool(2)\n"
        "while not all(w.pid for w in pool._workers):  # each worker's first line is its pid\n"
        "    time.sleep(0.01)\n"
        "print(*[w.pid for w in pool._workers], flush=True)\n"
        "from agentbench.llm.kept import identity\n"
        "print(json.dumps(identity()), flush=True)\n"
        "sys.stdin.read()\n"
    )
    server = _start_server()
    child = subprocess.Popen(
        [sys.executable, "-c", "import json\n" + code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        # os.environ, as a command started from this shell would have it: a native library loaded by an
        # earlier test may have set variables in this process's C environment that os.environ never saw
        env=dict(os.environ),
    )
    try:
        assert child.stdout is not None
        workers = [int(pid) for pid in child.stdout.readline().split()]
        theirs, ours = json.loads(child.stdout.readline()), json.loads(json.dumps(identity()))
        theirs["env"], ours["env"] = dict(theirs["env"]), dict(ours["env"])
        differences = {k for k in theirs.keys() | ours.keys() if theirs.get(k) != ours.get(k)}
        variables = {
            k for k in theirs["env"].keys() | ours["env"].keys() if theirs["env"].get(k) != ours["env"].get(k)
        }
        assert not differences, (differences, variables)  # the same server serves this process and the child
        assert len(workers) == 2 and all(parent_of(pid) == server for pid in workers)
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert still_alive(workers) == []
        assert still_alive([server], wait=0.5) == [server]  # the server waits for the next run
    finally:
        child.kill()
        child.wait()


def test_an_idle_server_exits_and_leaves_nothing(runtime: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEEP_ENV, "1")
    server = _start_server()
    with running_stub(latency=0.01) as stub:
        pool = LLMProcessPool(1)
        try:
            assert _answers(pool, stub.url, 2) == _expected(2)
            assert parent_of(pool._workers[0].pid or 0) == server
        finally:
            pool.close()
    assert still_alive([server]) == []
    assert not list(runtime.glob("*/*"))


def test_a_server_serves_only_the_environment_it_was_started_in() -> None:
    """LiteLLM and httpx read the environment at import: a different key or proxy is another server;
    what changes from one shell command to the next is not."""
    env = {"PATH": "/usr/bin", "OPENAI_API_KEY": "sk-a", "PWD": "/a"}
    assert server_key({**env, "OPENAI_API_KEY": "sk-b"}) != server_key(env)
    assert server_key({**env, "HTTPS_PROXY": "http://proxy:3128"}) != server_key(env)
    assert server_key({**env, "PWD": "/b", "OLDPWD": "/a", "_": "/usr/bin/agentbench", KEEP_ENV: "9"}) == (
        server_key(env)
    )


def test_a_runtime_directory_others_can_enter_falls_back_with_a_warning(
    runtime: Path, caplog: pytest.LogCaptureFixture
) -> None:
    private = runtime / f"agentbench-{os.getuid()}"
    private.mkdir(mode=0o700)
    private.chmod(0o755)
    with running_stub(latency=0.01) as stub, caplog.at_level(logging.WARNING, logger="agentbench"):
        pool = LLMProcessPool(2)
        try:
            assert _answers(pool, stub.url, 4) == _expected(4)
            assert pool._workers[0].process is not None  # the run's own workers
        finally:
            pool.close()
    warnings = [r.getMessage() for r in caplog.records if "kept LiteLLM workers" in r.getMessage()]
    assert len(warnings) == 1 and "not a directory private to this user" in warnings[0]
    assert not list(private.iterdir())


def test_a_server_that_cannot_fork_falls_back_with_its_reason(
    runtime: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import os, sys, threading, time\n"
        "if 'agentbench.llm.server' in sys.orig_argv:  # a thread in the server once it has forked away\n"
        "    os.register_at_fork(after_in_child=lambda: threading.Thread(\n"
        "        target=time.sleep, args=(3600,), daemon=True).start())\n"
    )
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    LLMProcessPool(1).close()  # a first run: the server starts when it ends, and fails
    _wait_for(lambda: any(kept.FAILED in log.read_text() for log in runtime.glob("*/*.log")))
    with running_stub(latency=0.01) as stub, caplog.at_level(logging.WARNING, logger="agentbench"):
        pool = LLMProcessPool(2)
        try:
            assert _answers(pool, stub.url, 4) == _expected(4)
            assert pool._workers[0].process is not None  # the run's own (the others forked from it)
        finally:
            pool.close()
    warnings = [r.getMessage() for r in caplog.records if "kept LiteLLM workers" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "the last kept server failed: RuntimeError: LiteLLM's import started a thread" in warnings[0]
    assert list_servers() == [] and not list(runtime.glob("*/*.log"))  # the next run tries again


def test_runs_with_kept_workers_equal_runs_without_and_the_command_lists_and_stops_them(
    runtime: Path, tmp_path: Path
) -> None:
    pool = core_subset(4, tmp_path / "pool")
    records = {}
    with running_stub(latency=0.02, every=5, retry_after=0.2) as stub:
        for name, keep in (("own", "0"), ("kept1", "120"), ("kept2", "120"), ("kept_default", "120")):
            run_dir = tmp_path / name
            args = ["run", "--llm", "openai/stub", "--api-base", stub.url, "--pool", str(pool)]
            args += ["--embedder", "bm25", "--sandbox", "process", "--store-dir", str(tmp_path / "stores")]
            args += ["--run-dir", str(run_dir)]
            if name != "kept_default":  # at the default concurrency, calls stay in the run's process...
                args += ["--concurrency", "8", "--llm-processes", "2"]
            env = {"AGENTBENCH_CACHE_DIR": str(tmp_path / f"cache-{name}"), KEEP_ENV: keep}
            res = run_cli(*args, env=env)
            assert res.returncode == 0, res.stderr[-2000:]
            assert ("will be kept for the next runs" in res.stderr) == (name == "kept1"), res.stderr
            if name == "kept_default":  # ...unless a kept worker is there, with LiteLLM imported
                assert "calls made in 1 worker process (" in res.stderr, res.stderr
            if name == "kept1":  # it started a server as it ended: the next run uses it once it listens
                _wait_for(lambda: any(s.pid for s in list_servers()))
            lines = (run_dir / "records.jsonl").read_text().splitlines()
            records[name] = sorted(
                (r["query_id"], r["condition"], r["code"], r["status"], r["passed"])
                for r in map(json.loads, lines)
            )
    assert len(records["own"]) == 4 * 4
    assert records["own"] == records["kept1"] == records["kept2"] == records["kept_default"]
    (log,) = runtime.glob("*/*.log")
    assert log.read_text().count("agentbench: forked 2 worker(s) for a run") == 1  # kept2's
    assert log.read_text().count("agentbench: forked 1 worker(s) for a run") == 1  # kept_default's
    listed = run_cli("workers")
    server = _server_pid()
    assert listed.returncode == 0 and f"pid {server}: 0 run(s) connected" in listed.stdout
    stopped = run_cli("workers", "--stop")
    assert stopped.returncode == 0 and f"pid {server}: stopped" in stopped.stdout
    assert still_alive([server]) == []
    assert "no kept LiteLLM workers" in run_cli("workers").stdout


def test_kept_workers_serve_runs_below_the_concurrency_that_starts_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Below 32 requests in flight a run's own workers would cost their LiteLLM import; a kept one does
    not, so with workers kept there is always one."""
    monkeypatch.setattr(processes, "usable_cores", lambda: 2)
    assert [processes.default_processes(c) for c in (1, 4, 64, 256)] == [0, 0, 2, 2]
    monkeypatch.setenv(KEEP_ENV, "600")
    assert [processes.default_processes(c) for c in (1, 4, 64, 256)] == [1, 1, 2, 2]
    assert processes.worker_count(4, 0) == 0  # --llm-processes 0 still keeps every call in the run
    monkeypatch.setenv(KEEP_ENV, "0")
    assert processes.default_processes(4) == 0


@pytest.mark.parametrize("concurrency", [["--concurrency", "64"], []])
def test_a_bad_keep_setting_is_a_one_line_error(tmp_path: Path, concurrency: list[str]) -> None:
    pool = core_subset(2, tmp_path / "pool")
    with running_stub(latency=0.01) as stub:
        args = ["run", "--llm", "openai/stub", "--api-base", stub.url, "--pool", str(pool), "--embedder"]
        args += ["bm25", "--sandbox", "process", "--store-dir", str(tmp_path / "stores"), *concurrency]
        args += ["--run-dir", str(tmp_path / "run")]
        res = run_cli(*args, env={KEEP_ENV: "ten minutes", "AGENTBENCH_CACHE_DIR": str(tmp_path / "c")})
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{KEEP_ENV}='ten minutes' is not a number of seconds" in lines[0]
    assert not (tmp_path / "run").exists()


def test_listing_kept_workers_writes_nothing(tmp_path: Path) -> None:
    res = run_cli("workers", env={"XDG_RUNTIME_DIR": str(tmp_path)})
    assert res.returncode == 0 and "no kept LiteLLM workers" in res.stdout
    assert not list(tmp_path.iterdir())
