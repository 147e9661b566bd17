"""`agentbench run` against a real OpenAI-compatible HTTP server (bench/stub_llm.py, a subprocess) that
answers 429 with Retry-After: retries, exactly-once records, and a server that is down.

The server's own counters say what the client did on the wire. Timing is not asserted here (the speed is
bench/api_throughput.py's job), except that no retry came before the Retry-After the server asked for.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import httpx
import pytest

from agentbench.llm import LLMClient
from agentbench.llm.client import retry_after

from .conftest import ROOT, core_subset, run_cli

sys.path.insert(0, str(ROOT / "bench"))
from stub_llm import reply_code, running_stub  # noqa: E402

CONDITIONS = ("closed_book", "rag", "oracle", "distractor")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A fresh cache, and no OpenAI key: a server at --api-base may not need one."""
    return {"AGENTBENCH_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": "", "HF_HUB_OFFLINE": "1"}


def _run(tmp_path: Path, url: str, env: dict[str, str], *extra: str):  # noqa: ANN202
    pool = tmp_path / "pool" if (tmp_path / "pool").exists() else core_subset(6, tmp_path / "pool")
    args = ["run", "--llm", "openai/stub", "--api-base", url, "--pool", str(pool)]
    args += ["--embedder", "bm25", "--sandbox", "process", "--store-dir", str(tmp_path / "stores")]
    return run_cli(*args, *extra, env=env)


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]


def test_rate_limited_run_records_every_query_once(tmp_path: Path, env: dict[str, str]) -> None:
    # every 4th request is refused for 1.5 s: longer than the first exponential backoff (0.5-1 s), so
    # an early retry would show that Retry-After was ignored
    with running_stub(latency=0.05, every=4, retry_after=1.5) as stub:
        res = _run(tmp_path, stub.url, env, "--concurrency", "8", "--run-dir", str(tmp_path / "run"))
        stats = stub.stats()
    assert res.returncode == 0, res.stderr[-2000:]
    records = _records(tmp_path / "run")
    keys = [(r["query_id"], r["condition"]) for r in records]
    assert len(keys) == len(set(keys)) == 6 * len(CONDITIONS)
    assert {c for _, c in keys} == set(CONDITIONS)
    assert all(r["status"] != "llm_error" and r["error"] is None for r in records)
    # the server refused some requests, and each refused prompt came back (after its Retry-After) and was
    # answered exactly once
    assert stats["rate_limited"] > 0
    assert stats["retries"] == stats["rate_limited"] and stats["early_retries"] == 0
    assert stats["repeated_completions"] == 0 and stats["completions"] == stats["distinct_prompts"]
    assert 1 <= stats["peak_in_flight"] <= 8
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["llm"]["calls"] == stats["completions"] and summary["llm"]["errors"] == 0
    assert summary["llm"]["calls"] + summary["llm"]["cache_hits"] == len(records)
    # deterministic replies: oracle echoes the canonical (passes), closed book a stub body (fails)
    by_condition = {c: [r for r in records if r["condition"] == c] for c in CONDITIONS}
    assert all(r["passed"] for r in by_condition["oracle"])
    assert not any(r["passed"] for r in by_condition["closed_book"])
    assert all(r["code"].rstrip().endswith("return None") for r in by_condition["closed_book"])


def test_run_with_worker_processes_keeps_concurrency_on_the_wire(tmp_path: Path, env: dict[str, str]) -> None:
    # the run hands the workers up to twice --concurrency requests; the wire must still see at most 4
    with running_stub(latency=0.3, every=5, retry_after=0.2) as stub:
        workers = ("--concurrency", "4", "--llm-processes", "2")
        res = _run(tmp_path, stub.url, env, *workers, "--run-dir", str(tmp_path / "run"))
        stats = stub.stats()
    assert res.returncode == 0, res.stderr[-2000:]
    keys = [(r["query_id"], r["condition"]) for r in _records(tmp_path / "run")]
    assert len(keys) == len(set(keys)) == 6 * len(CONDITIONS)
    assert stats["rate_limited"] > 0 and stats["early_retries"] == 0
    assert stats["repeated_completions"] == 0 and 1 <= stats["peak_in_flight"] <= 4


def test_resume_after_rate_limited_run_calls_nothing(tmp_path: Path, env: dict[str, str]) -> None:
    with running_stub(latency=0.0, every=3, retry_after=0.1) as stub:
        first = _run(tmp_path, stub.url, env, "--concurrency", "4", "--run-dir", str(tmp_path / "run"))
        assert first.returncode == 0, first.stderr[-2000:]
        stub.reset()
        again = _run(
            tmp_path, stub.url, env, "--concurrency", "4", "--run-dir", str(tmp_path / "run"), "--resume"
        )
        assert again.returncode == 0, again.stderr[-2000:]
        assert stub.stats()["requests"] == 0
    keys = [(r["query_id"], r["condition"]) for r in _records(tmp_path / "run")]
    assert len(keys) == len(set(keys)) == 6 * len(CONDITIONS)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_api_base_is_one_line_error(tmp_path: Path, env: dict[str, str]) -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    res = _run(tmp_path, url, env, "--run-dir", str(tmp_path / "run"), "--limit", "1")
    assert res.returncode == 2
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert "cannot reach --api-base" in lines[0] and url in lines[0] and "start the server" in lines[0]
    assert not (tmp_path / "run").exists()


def test_missing_key_without_api_base_is_still_one_line_error(tmp_path: Path, env: dict[str, str]) -> None:
    res = run_cli(
        "run", "--llm", "openai/gpt-4o-mini", "--limit", "1", "--run-dir", str(tmp_path / "r"), env=env
    )
    assert res.returncode == 2 and "OPENAI_API_KEY" in res.stderr and "Traceback" not in res.stderr


def test_retry_after_is_read_from_the_response_headers(tmp_path: Path) -> None:
    import litellm

    def limited(headers: dict[str, str]) -> Exception:
        response = httpx.Response(429, headers=headers, request=httpx.Request("POST", "http://stub/v1"))
        return litellm.RateLimitError(
            message="slow down", llm_provider="openai", model="m", response=response
        )

    assert retry_after(limited({"retry-after-ms": "1500", "retry-after": "2"})) == 1.5
    assert retry_after(limited({"retry-after": "3"})) == 3.0
    assert retry_after(limited({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) is None
    assert retry_after(limited({})) is None
    assert retry_after(ValueError("no response")) is None


def test_stub_replies_echo_the_context_or_a_stub_body() -> None:
    rag = "Task: t\n\n```python\ndef f(x):\n    return x + 1\n```\n\nUse exactly this signature:\n\n```python\ndef f(x):\n```"
    assert reply_code(rag) == "def f(x):\n    return x + 1"
    closed = "Task: t\n\nUse exactly this signature:\n\n```python\ndef f(x, y=2):\n```"
    assert reply_code(closed) == "def f(x, y=2):\n    return None"


def test_api_base_without_key_sends_a_placeholder_only_when_none_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert LLMClient("openai/m", api_base="http://127.0.0.1:1/v1", cache=False)._api_key == "no-key"
    assert LLMClient("openai/m", api_base="http://127.0.0.1:1/v1", api_key="k", cache=False)._api_key == "k"
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert LLMClient("openai/m", api_base="http://127.0.0.1:1/v1", cache=False)._api_key is None
    assert LLMClient("openai/m", cache=False)._api_key is None


def test_identical_requests_in_flight_share_one_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    messages = [{"role": "user", "content": "```python\ndef f(x):\n```"}]
    with running_stub(latency=0.3) as stub:
        client = LLMClient("openai/stub", api_base=stub.url, cache=tmp_path / "llm")

        async def both() -> list:
            return await asyncio.gather(client.complete(messages), client.complete(messages))

        results = asyncio.run(both())
        stats = stub.stats()
    assert [r.text for r in results] == ["```python\ndef f(x):\n    return None\n```"] * 2
    assert stats["requests"] == 1 and client.stats.calls == 1 and client.stats.cache_hits == 1
