"""LiteLLM calls in worker processes (agentbench.llm.processes): same answers, errors and retries as
in-process calls, against the real stub HTTP server and LiteLLM's own mock responses; a worker killed
mid-request is replaced and its requests retried."""

from __future__ import annotations

import asyncio
import http.server
import io
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentbench.errors import ModelError
from agentbench.llm import LLMClient
from agentbench.llm.processes import FORKS, LLMProcessPool, WireLimit, process_pool

from .conftest import ROOT, parent_of, run_cli, still_alive

sys.path.insert(0, str(ROOT / "bench"))
from stub_llm import running_stub  # noqa: E402


def _prompt(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"request {i}\n```python\ndef f_{i}(x):\n```"}]


@pytest.fixture
def no_local_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls made in this process fail the test: what succeeds was answered by a worker process."""
    from agentbench.llm._litellm import plain_litellm

    async def refuse(**_: object) -> None:
        raise AssertionError("litellm.acompletion was called in the test process")

    monkeypatch.setattr(plain_litellm(), "acompletion", refuse)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def _complete_all(client: LLMClient, n: int) -> list:
    async def go() -> list:
        return await asyncio.gather(*(client.complete(_prompt(i)) for i in range(n)))

    return asyncio.run(go())


def test_workers_answer_and_429s_are_retried_after_retry_after(tmp_path: Path, no_local_calls: None) -> None:
    with running_stub(latency=0.05, every=3, retry_after=0.5) as stub:
        client = LLMClient("openai/stub", api_base=stub.url, cache=False, concurrency=8, processes=2)
        results = _complete_all(client, 12)
        stats = stub.stats()
    assert [r.text for r in results] == [f"```python\ndef f_{i}(x):\n    return None\n```" for i in range(12)]
    assert all(r.ok and r.prompt_tokens > 0 for r in results)
    assert stats["rate_limited"] > 0 and stats["retries"] == stats["rate_limited"]
    assert stats["early_retries"] == 0 and stats["completions"] == stats["distinct_prompts"] == 12
    assert client.stats.calls == 12 and client.stats.retries == stats["rate_limited"]
    assert client.stats.errors == 0


@pytest.mark.parametrize(
    ("mock", "expected"),
    [
        ("litellm.ContextWindowExceededError", "ContextWindowExceededError"),
        ("litellm.RateLimitError", "RateLimitError"),
    ],
)
def test_per_request_errors_from_workers_become_llm_errors(
    tmp_path: Path, no_local_calls: None, mock: str, expected: str
) -> None:
    client = LLMClient(
        "openai/gpt-4o-mini",
        api_key="sk-test-not-real",
        params={"mock_response": mock},
        cache=False,
        max_retries=1,
        backoff_s=0.01,
        processes=1,
    )
    result = _complete_all(client, 1)[0]
    assert not result.ok and result.error.startswith(expected) and result.text == ""
    # a rate limit is retried (then given up), a too-long prompt is not
    assert result.attempts == (2 if expected == "RateLimitError" else 1)
    assert client.stats.errors == 1 and client.stats.calls == 0


def test_mock_response_from_a_worker_reports_usage_and_cost(tmp_path: Path, no_local_calls: None) -> None:
    client = LLMClient(
        "openai/gpt-4o",
        api_key="sk-test-not-real",
        params={"mock_response": "def f():\n    return 1"},
        cache=False,
        processes=1,
    )
    result = _complete_all(client, 1)[0]
    assert result.text == "def f():\n    return 1" and result.cost_usd > 0 and result.completion_tokens > 0


@pytest.fixture
def refusing_server() -> Iterator[str]:
    """An OpenAI-compatible URL that answers every request 401."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = json.dumps({"error": {"message": "invalid api key", "type": "invalid_request_error"}})
            self.send_response(401)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()


def test_a_refused_key_in_a_worker_is_a_model_error(refusing_server: str, no_local_calls: None) -> None:
    client = LLMClient("openai/stub", api_base=refusing_server, cache=False, processes=1)
    with pytest.raises(ModelError) as info:
        _complete_all(client, 1)
    message = str(info.value)
    assert message.startswith("openai/stub: AuthenticationError") and "export OPENAI_API_KEY" in message


def test_a_killed_worker_is_replaced_and_its_requests_retried(tmp_path: Path, no_local_calls: None) -> None:
    pool = process_pool(1)
    # answers take 3 s: all four requests are still at the server when the workers are killed
    with running_stub(latency=3.0) as stub:
        client = LLMClient("openai/stub", api_base=stub.url, cache=False, concurrency=8, processes=1)

        async def go() -> list:
            calls = [asyncio.ensure_future(client.complete(_prompt(i))) for i in range(4)]
            while stub.stats()["peak_in_flight"] < 4:  # every request reached the server through a worker
                await asyncio.sleep(0.05)
            victims = [w.pid for w in pool._workers]
            for pid in victims:
                os.kill(pid, signal.SIGKILL)
            return [await c for c in calls], victims

        results, victims = asyncio.run(go())
    assert all(r.ok for r in results) and [r.text for r in results] == [
        f"```python\ndef f_{i}(x):\n    return None\n```" for i in range(4)
    ]
    # each killed request was retried (one may be retried twice: sent to the other worker while it was
    # being killed, before its death could be seen)
    assert client.stats.retries >= 4 and client.stats.calls == 4 and client.stats.errors == 0
    assert not {w.pid for w in pool._workers} & set(victims)


def test_workers_keep_concurrency_on_the_wire_while_as_many_more_wait_ready(no_local_calls: None) -> None:
    pool = process_pool(2)
    with running_stub(latency=0.3) as stub:
        client = LLMClient("openai/stub", api_base=stub.url, cache=False, concurrency=4, processes=2)
        handed_out = [0]

        async def go() -> list:
            calls = [asyncio.ensure_future(client.complete(_prompt(i))) for i in range(32)]
            while not all(c.done() for c in calls):
                handed_out.append(sum(w.load for w in pool._workers))
                await asyncio.sleep(0.01)
            return [await c for c in calls]

        results = asyncio.run(go())
        stats = stub.stats()
    assert all(r.ok for r in results) and stats["completions"] == stats["distinct_prompts"] == 32
    # the stub never saw more than --concurrency at once, though the workers held up to twice as many
    assert stats["peak_in_flight"] == 4
    assert 4 < max(handed_out) <= 8


def _serve_in_this_process(
    monkeypatch: pytest.MonkeyPatch,
    kwargs: dict,
    n: int,
    limit: int,
    delay: float = 0.0,
    observe: Callable[[], None] | None = None,
) -> tuple[list[dict], int]:
    """Replies of the worker loop (run here, so a wrapper can watch its calls) to ``n`` requests of one
    client with wire limit ``limit``, and the most ``acompletion`` calls running at once; ``observe`` is
    called at the start of every call."""
    from agentbench.llm import worker as llm_worker
    from agentbench.llm._litellm import plain_litellm

    litellm = plain_litellm()
    real = litellm.acompletion
    running = {"now": 0, "peak": 0}

    async def watched(**call: object) -> object:
        if observe is not None:
            observe()
        running["now"] += 1
        running["peak"] = max(running["peak"], running["now"])
        try:
            await asyncio.sleep(delay)
            return await real(**call)
        finally:
            running["now"] -= 1

    monkeypatch.setattr(litellm, "acompletion", watched)
    lines = [
        {"id": i, "kwargs": {**kwargs, "messages": _prompt(i)}, "wire": {"group": "g", "limit": limit}}
        for i in range(n)
    ]
    out = io.BytesIO()
    asyncio.run(llm_worker.serve(io.BytesIO(b"".join(json.dumps(x).encode() + b"\n" for x in lines)), out))
    return [json.loads(line) for line in out.getvalue().splitlines()], running["peak"]


def test_a_provider_that_bypasses_the_gated_client_is_held_to_the_limit_for_its_whole_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # LiteLLM's mock responses never reach an HTTP client: the worker cannot see them on the wire, so it
    # bounds the calls themselves, as an in-process client's semaphore does
    kwargs = {"model": "openai/gpt-4o-mini", "api_key": "sk-test-not-real", "mock_response": "def f(): pass"}
    replies, peak = _serve_in_this_process(monkeypatch, kwargs, n=12, limit=3, delay=0.05)
    assert sorted(r["id"] for r in replies) == list(range(12))
    assert all(r["ok"] and r["gated"] is False for r in replies)
    assert peak == 3


def test_a_provider_with_its_own_http_client_is_held_to_the_limit_for_its_whole_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # hosted_vllm/ speaks the stub's API through LiteLLM's own HTTP handler, not through the client the
    # worker hands LiteLLM (litellm.aclient_session serves the OpenAI-SDK providers): its calls are held
    # to the limit whole, on the wire and in the worker alike
    with running_stub(latency=0.2) as stub:
        kwargs = {"model": "hosted_vllm/stub", "api_base": stub.url, "api_key": "no-key", "num_retries": 0}
        replies, peak = _serve_in_this_process(monkeypatch, kwargs, n=9, limit=3)
        stats = stub.stats()
    assert sorted(r["id"] for r in replies) == list(range(9))
    assert all(r["ok"] and r["gated"] is False for r in replies)
    assert stats["peak_in_flight"] == 3 and stats["completions"] == 9 and peak == 3


def test_requests_through_the_gated_client_hold_a_slot_only_on_the_wire(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with running_stub(latency=0.3) as stub:
        kwargs = {"model": "openai/stub", "api_base": stub.url, "api_key": "no-key", "num_retries": 0}
        replies, peak = _serve_in_this_process(monkeypatch, kwargs, n=12, limit=3)
        stats = stub.stats()
    assert sorted(r["id"] for r in replies) == list(range(12))
    assert all(r["ok"] and r["gated"] is True for r in replies)
    # once the first answer showed the transport, the calls ran at once and waited for the wire inside
    assert stats["peak_in_flight"] == 3 and stats["completions"] == 12 and peak > 3


def test_the_worker_hands_litellm_an_http_client_and_patches_no_class(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import httpx

    from agentbench.llm._litellm import plain_litellm

    litellm = plain_litellm()
    send, before = httpx.AsyncClient.send, litellm.aclient_session
    seen: list[tuple[bool, object]] = []

    def observe() -> None:
        seen.append((httpx.AsyncClient.send is send, litellm.aclient_session))

    with running_stub(latency=0.05) as stub:
        kwargs = {"model": "openai/stub", "api_base": stub.url, "api_key": "no-key", "num_retries": 0}
        replies, _ = _serve_in_this_process(monkeypatch, kwargs, n=4, limit=2, observe=observe)
    assert all(r["ok"] and r["gated"] for r in replies) and len(seen) == 5  # the warm-up call and 4
    # while serving: httpx's own send, and one client of the worker's handed to LiteLLM through its hook
    assert all(original for original, _ in seen) and len({id(session) for _, session in seen}) == 1
    session = seen[0][1]
    assert isinstance(session, httpx.AsyncClient) and session is not before and session.is_closed
    # afterwards LiteLLM's setting is what it was
    assert httpx.AsyncClient.send is send and litellm.aclient_session is before


def test_a_pool_that_grows_keeps_each_clients_wire_limit(no_local_calls: None) -> None:
    pool = LLMProcessPool(1)
    wire = WireLimit("grown", 4)
    try:
        with running_stub(latency=0.3) as stub:

            def kwargs(i: int) -> dict:
                return {
                    "model": "openai/stub",
                    "api_base": stub.url,
                    "api_key": "no-key",
                    "messages": _prompt(i),
                }

            async def go() -> list:
                await pool.complete(kwargs(0), wire)  # the first worker now holds this client to 4
                pool.grow(2)
                # one request to each worker, so both are up when the rest go out together
                await asyncio.gather(*(pool.complete(kwargs(i), wire) for i in range(1, 3)))
                return await asyncio.gather(*(pool.complete(kwargs(i), wire) for i in range(3, 19)))

            answers = asyncio.run(go())
            stats = stub.stats()
    finally:
        pool.close()
    assert len(answers) == 16 and all(a.gated for a in answers)
    assert stats["peak_in_flight"] == 4 and stats["completions"] == 19


def test_in_process_providers_never_go_to_workers() -> None:
    from agentbench.llm._litellm import in_process_provider

    assert in_process_provider("local/qwen2.5-coder-0.5b")
    assert not in_process_provider("openai/gpt-4o") and not in_process_provider("gpt-4o")


@pytest.mark.parametrize(
    ("model", "concurrency", "asked", "expected"),
    [
        ("openai/gpt-4o-mini", 64, None, "the default rule"),
        ("openai/gpt-4o-mini", 512, None, "the default rule"),
        ("openai/gpt-4o-mini", 16, None, 0),
        ("openai/gpt-4o-mini", 64, 0, 0),
        ("openai/gpt-4o-mini", 64, 1, 1),
        ("local/qwen2.5-coder-0.5b", 64, None, "none started"),
    ],
)
def test_runs_use_workers_at_high_concurrency_unless_told(
    model: str, concurrency: int, asked: int | None, expected: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One worker per 32 requests in flight by default (at most one per core and 4 in all, none on one core);
    ``--llm-processes`` overrides; a local model never leaves the run's process."""
    from agentbench.llm import processes
    from agentbench.pipeline import RunConfig
    from agentbench.pipeline.evaluate import _make_agent

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # the model check wants a key; nothing is sent
    started: list[int] = []  # pools asked for, by size (none is started: no call is made here)
    monkeypatch.setattr("agentbench.llm.client.process_pool", lambda n: started.append(n) or object())
    for cores in (1, 2, 8):
        monkeypatch.setattr(processes, "usable_cores", lambda cores=cores: cores)
        _, client = _make_agent(
            RunConfig(llm=model, concurrency=concurrency, llm_processes=asked), None, None
        )
        assert client is not None
        if expected == "none started":
            assert client._pool is None
            continue
        if expected == "the default rule":
            assert client.processes == (0 if cores == 1 else min(cores, 4, concurrency // 32))
        else:
            assert client.processes == expected
        assert (client._pool is not None) == (client.processes > 0)
        assert started == ([client.processes] if client.processes else [])
        started.clear()


def test_with_workers_the_run_process_never_imports_litellm() -> None:
    """Importing LiteLLM takes seconds: with workers making the calls, the run's own process checks the
    model, calls and records without it, so the import happens only in the workers, on other cores."""
    code = (
        "import asyncio, sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from stub_llm import running_stub\n"
        "from agentbench.llm import LLMClient\n"
        "with running_stub(latency=0.01) as stub:\n"
        "    client = LLMClient('openai/stub', api_base=stub.url, cache=False, concurrency=4, processes=1)\n"
        "    client.check()\n"
        "    async def go():\n"
        "        return await asyncio.gather(*(client.complete([{'role': 'user', 'content': f'q{i}'}])\n"
        "                                      for i in range(6)))\n"
        "    results = asyncio.run(go())\n"
        "print(all(r.ok for r in results), client.stats.calls, 'litellm' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    out = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "bench")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.stdout.split() == ["True", "6", "False"], out.stderr[-2000:]


def test_run_with_worker_processes_equals_run_without(tmp_path: Path) -> None:
    from .conftest import core_subset

    pool = core_subset(6, tmp_path / "pool")
    env = {"AGENTBENCH_CACHE_DIR": "", "OPENAI_API_KEY": "", "HF_HUB_OFFLINE": "1"}
    records = {}
    with running_stub(latency=0.02, every=5, retry_after=0.2) as stub:
        for processes in ("0", "2"):
            env["AGENTBENCH_CACHE_DIR"] = str(tmp_path / f"cache{processes}")
            run_dir = tmp_path / f"run{processes}"
            args = ["run", "--llm", "openai/stub", "--api-base", stub.url, "--pool", str(pool)]
            args += ["--embedder", "bm25", "--sandbox", "process", "--store-dir", str(tmp_path / "stores")]
            args += ["--concurrency", "8", "--llm-processes", processes, "--run-dir", str(run_dir)]
            res = run_cli(*args, env=env)
            assert res.returncode == 0, res.stderr[-2000:]
            announced = "agentbench: llm: openai/stub, calls made in 2 worker processes" in res.stderr
            assert announced == (processes == "2")
            lines = (run_dir / "records.jsonl").read_text().splitlines()
            records[processes] = sorted(
                (r["query_id"], r["condition"], r["code"], r["status"], r["passed"])
                for r in map(json.loads, lines)
            )
    assert records["0"] == records["2"] and len(records["0"]) == 6 * 4


def test_workers_that_cannot_start_stop_the_run_with_the_error(tmp_path: Path) -> None:
    """A LiteLLM that does not import fails every worker the same way: one line naming the error, exit
    code 2 and no run directory, rather than each request retried and recorded as an llm_error."""
    from .conftest import core_subset

    broken = tmp_path / "site" / "litellm"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text('raise ImportError("simulated broken LiteLLM install")\n')
    pool = core_subset(3, tmp_path / "pool")
    run_dir = tmp_path / "run"
    env = {"PYTHONPATH": str(tmp_path / "site"), "AGENTBENCH_CACHE_DIR": str(tmp_path / "cache")}
    with running_stub(latency=0.01) as stub:
        args = ["run", "--llm", "openai/stub", "--api-base", stub.url, "--pool", str(pool), "--embedder"]
        args += ["bm25", "--sandbox", "process", "--store-dir", str(tmp_path / "stores"), "--concurrency"]
        args += ["64", "--conditions", "closed_book", "--run-dir", str(run_dir)]
        res = run_cli(*args, env=env)
        requests = stub.stats()["requests"]
    last = res.stderr.strip().splitlines()[-1]
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert "LiteLLM worker process failed to start" in last and "simulated broken LiteLLM install" in last
    assert "no record was written" in last and not run_dir.exists() and requests == 0


def test_negative_llm_processes_is_one_line_error(tmp_path: Path) -> None:
    res = run_cli("run", "--llm-processes", "-1", "--run-dir", str(tmp_path / "r"))
    assert res.returncode == 2 and "--llm-processes must be 0 or more" in res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(not FORKS, reason="workers are forked from one import on Linux only")
def test_a_pools_workers_share_one_litellm_import_and_end_with_it(no_local_calls: None) -> None:
    """One worker imports LiteLLM and forks the others: they answer like it, their parent is that
    worker (not the run), and killing it ends them too, so no call outlives the pool."""
    pool = LLMProcessPool(3)
    try:
        with running_stub(latency=0.3) as stub:
            kwargs = {"model": "openai/stub", "api_base": stub.url, "api_key": "no-key"}
            wire = WireLimit("forks", 6)

            async def go() -> list:
                return await asyncio.gather(
                    *(pool.complete({**kwargs, "messages": _prompt(i)}, wire) for i in range(6))
                )

            answers = asyncio.run(go())
        first, *forks = pool._workers
        assert [a.fields["text"] for a in answers] == [
            f"```python\ndef f_{i}(x):\n    return None\n```" for i in range(6)
        ]
        assert first.process is not None and first.pid == first.process.pid
        assert all(w.process is None and w.pid is not None and parent_of(w.pid) == first.pid for w in forks)
        assert len({w.pid for w in pool._workers}) == 3
        os.kill(first.pid, signal.SIGKILL)
        assert still_alive([w.pid for w in forks if w.pid]) == []
    finally:
        pool.close()


def test_a_closed_pool_leaves_no_worker_process(no_local_calls: None) -> None:
    pool = LLMProcessPool(2)
    with running_stub(latency=0.05) as stub:
        kwargs = {"model": "openai/stub", "api_base": stub.url, "api_key": "no-key"}

        async def go() -> list:
            wire = WireLimit("closed", 2)
            return await asyncio.gather(
                *(pool.complete({**kwargs, "messages": _prompt(i)}, wire) for i in range(4))
            )

        asyncio.run(go())
    pids = [w.pid for w in pool._workers]
    assert len(pids) == 2 and all(pids)
    pool.close()
    assert still_alive([pid for pid in pids if pid]) == []


def test_workers_are_started_afresh_when_litellms_import_leaves_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_local_calls: None
) -> None:
    """A fork copies a thread's locks but not the thread: if anything started one by the time LiteLLM is
    imported, the first worker forks nothing and the pool replaces the other slots with workers of their
    own, which answer as well."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import sys, threading, time\n"
        "if 'agentbench.llm.worker' in sys.orig_argv:\n"
        "    threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()\n"
    )
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    from agentbench.llm import processes

    monkeypatch.setattr(processes, "_pool", None)  # a pool of this test's own, under the env above
    try:
        with running_stub(latency=0.2) as stub:
            client = LLMClient("openai/stub", api_base=stub.url, cache=False, concurrency=4, processes=2)
            results = _complete_all(client, 8)
        assert [r.text for r in results] == [
            f"```python\ndef f_{i}(x):\n    return None\n```" for i in range(8)
        ]
        assert client.stats.errors == 0
        pool = processes._pool
        assert pool is not None and pool.size == 2
        assert all(w.process is not None for w in pool._workers)  # both started afresh: no fork serves
    finally:
        if processes._pool is not None:
            processes._pool.close()
