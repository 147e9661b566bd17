"""The real offline model: local/qwen2.5-coder-0.5b through LiteLLM with the ``local`` provider."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import pytest

from agentbench.agent import Agent, Task
from agentbench.errors import ConfigError
from agentbench.llm import LLMClient
from agentbench.llm._litellm import litellm_module

MODEL = "local/qwen2.5-coder-0.5b"

pytestmark = pytest.mark.slow


def _available() -> str | None:
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed"
    try:
        LLMClient(MODEL, cache=False).check()
    except ConfigError as exc:
        return str(exc)
    return None


@pytest.fixture(scope="module")
def model_ready() -> None:
    reason = _available()
    if reason:
        pytest.skip(reason)


def test_local_model_writes_a_working_function(model_ready: None, tmp_path: Path) -> None:
    client = LLMClient(MODEL, cache=tmp_path / "c.sqlite", max_tokens=256, concurrency=1)
    task = Task.from_canonical(
        "q_add",
        "Return the sum of two integers.",
        "def add_numbers(a, b):\n    return a + b\n",
        tests=["assert add_numbers(2, 3) == 5"],
    )
    generation = asyncio.run(Agent(client).generate(task, "closed_book"))
    assert generation.status == "ok", generation.response
    namespace: dict = {}
    exec(generation.code, namespace)
    assert namespace["add_numbers"](2, 3) == 5
    assert generation.usage.prompt_tokens > 10 and generation.usage.completion_tokens > 0
    assert generation.cost_usd == 0.0 and client.stats.calls == 1

    again = asyncio.run(Agent(client).generate(task, "closed_book"))  # served from the cache
    assert again.cached and again.response == generation.response and client.stats.calls == 1


def test_sync_completion_is_deterministic(model_ready: None) -> None:
    litellm = litellm_module()
    messages = [{"role": "user", "content": "Write a Python function is_even(n). Only code."}]
    replies = [
        litellm.completion(model=MODEL, messages=messages, temperature=0.0, max_tokens=64, seed=0)
        for _ in range(2)
    ]
    assert replies[0].choices[0].message.content == replies[1].choices[0].message.content
    assert "is_even" in replies[0].choices[0].message.content
    assert replies[0].usage.completion_tokens > 0 and replies[0].model == MODEL
