"""The ``local`` LiteLLM provider with a fake llama (fast; the real model is in test_agent_local.py)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentbench.llm import LLMClient
from agentbench.llm import local as local_mod
from agentbench.llm._litellm import litellm_module

MODEL = "local/qwen2.5-coder-0.5b"


class FakeLlama:
    def __init__(self, fail: Exception | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail = fail
        self.active = 0
        self.max_active = 0
        self._guard = threading.Lock()

    def create_chat_completion(self, messages: list, **params: Any) -> dict:
        with self._guard:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            self.calls.append({"messages": messages, **params})
            if self.fail is not None:
                raise self.fail
            threading.Event().wait(0.02)
            return {
                "choices": [
                    {"message": {"role": "assistant", "content": "echo: " + messages[-1]["content"]}}
                ],
                "usage": {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15},
            }
        finally:
            with self._guard:
                self.active -= 1


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeLlama]:
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path))
    llama = FakeLlama()
    monkeypatch.setitem(local_mod._models, "qwen2.5-coder-0.5b", (llama, threading.Lock()))
    yield llama


def test_sync_completion_maps_params_and_usage(fake: FakeLlama) -> None:
    litellm = litellm_module()
    resp = litellm.completion(
        model=MODEL,
        messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}],
        temperature=0.0,
        max_tokens=33,
        seed=7,
        stop="```\n",
    )
    assert resp.choices[0].message.content == "echo: hi" and resp.model == MODEL
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (11, 4)
    call = fake.calls[0]
    assert call["messages"] == [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]
    assert (call["temperature"], call["max_tokens"], call["seed"], call["stop"]) == (0.0, 33, 7, ["```\n"])


def test_defaults_are_greedy(fake: FakeLlama) -> None:
    litellm_module().completion(model=MODEL, messages=[{"role": "user", "content": "x"}])
    assert (
        fake.calls[0]["temperature"] == 0.0
        and fake.calls[0]["seed"] == 0
        and fake.calls[0]["max_tokens"] == 512
    )


def test_async_calls_are_serialised_on_the_model_lock(fake: FakeLlama) -> None:
    client = LLMClient(MODEL, cache=False, concurrency=4)

    async def main() -> list:
        return await asyncio.gather(
            *(client.complete([{"role": "user", "content": str(i)}]) for i in range(6))
        )

    results = asyncio.run(main())
    assert [r.text for r in results] == [f"echo: {i}" for i in range(6)]
    assert fake.max_active == 1 and client.stats.calls == 6 and client.stats.cost_usd == 0.0
    assert client.stats.prompt_tokens == 66 and client.stats.completion_tokens == 24


def test_context_overflow_is_an_llm_error_without_retries(fake: FakeLlama) -> None:
    fake.fail = ValueError("Requested tokens (5000) exceed context window of 4096")
    client = LLMClient(MODEL, cache=False, backoff_s=0)
    result = asyncio.run(client.complete([{"role": "user", "content": "long"}]))
    assert result.error.startswith("ContextWindowExceededError") and len(fake.calls) == 1


def test_threads_default_to_usable_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTBENCH_LLAMA_THREADS", raising=False)
    assert local_mod.llama_threads() >= 1
    monkeypatch.setenv("AGENTBENCH_LLAMA_THREADS", "3")
    assert local_mod.llama_threads() == 3
