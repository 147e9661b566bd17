"""LLM client: cache, retries, error translation, key checks, usage and cost."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentbench.errors import ConfigError, ModelError
from agentbench.llm import LLMClient, ResponseCache, check_model, redact
from agentbench.llm._litellm import litellm_module, register_provider

litellm = litellm_module()
MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "write f"}]


class Scripted(litellm.CustomLLM):
    """A provider whose replies come from ``script``: each item is a reply text, an exception to raise,
    or a callable of the messages returning text. The last item repeats."""

    def __init__(self, *script: Any, delay: float = 0.0) -> None:
        super().__init__()
        self.script = list(script) or ["ok"]
        self.calls = 0
        self.delay = delay
        self.active = 0
        self.max_active = 0
        self.params: list[dict] = []

    async def acompletion(
        self, model: str, messages: list, model_response: Any, optional_params: dict, **_: Any
    ):
        self.calls += 1
        self.params.append(dict(optional_params))
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            item = self.script[min(self.calls - 1, len(self.script) - 1)]
            if isinstance(item, BaseException):
                raise item
            text = item(messages) if callable(item) else item
        finally:
            self.active -= 1
        model_response.choices[0].message.content = text
        model_response.usage = litellm.Usage(prompt_tokens=7, completion_tokens=3, total_tokens=10)
        return model_response


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "cache"))


def scripted(*script: Any, delay: float = 0.0) -> Scripted:
    handler = Scripted(*script, delay=delay)
    register_provider("scripted", handler)
    return handler


def client(tmp_path: Path, **kwargs: Any) -> LLMClient:
    kwargs.setdefault("cache", tmp_path / "llm")
    kwargs.setdefault("backoff_s", 0.0)
    return LLMClient(kwargs.pop("model", "scripted/m"), **kwargs)


def run(make: Callable[[], Any]) -> Any:
    """Run the awaitable ``make()`` builds inside a fresh event loop."""

    async def main() -> Any:
        return await make()

    return asyncio.run(main())


def rate_limit() -> Exception:
    return litellm.RateLimitError(message="slow down", llm_provider="scripted", model="m")


# ------------------------------------------------------------------------------------------------ cache


def test_rerun_is_served_from_cache_with_zero_llm_calls(tmp_path: Path) -> None:
    handler = scripted(lambda m: "reply to " + m[-1]["content"])
    prompts = [[{"role": "user", "content": f"task {i}"}] for i in range(5)]

    first = client(tmp_path)
    results = run(lambda: asyncio.gather(*(first.complete(p) for p in prompts)))
    assert [r.text for r in results] == [f"reply to task {i}" for i in range(5)]
    assert handler.calls == 5 and first.stats.calls == 5 and first.stats.cache_hits == 0
    assert first.stats.prompt_tokens == 35 and first.stats.completion_tokens == 15
    first.close()

    second = client(tmp_path)  # a new process would open the same store
    again = run(lambda: asyncio.gather(*(second.complete(p) for p in prompts)))
    assert handler.calls == 5, "the rerun must not call the LLM"
    assert second.stats.calls == 0 and second.stats.cache_hits == 5
    assert second.stats.prompt_tokens == 0 and second.stats.cost_usd == 0.0
    assert [r.text for r in again] == [r.text for r in results]
    assert all(r.cached for r in again) and again[0].prompt_tokens == 7


def test_cache_key_ignores_timeouts_and_retries_but_not_sampling(tmp_path: Path) -> None:
    base = client(tmp_path)
    key = base.key(MESSAGES)
    assert client(tmp_path, timeout_s=5, max_retries=9, concurrency=3, backoff_s=7).key(MESSAGES) == key
    assert client(tmp_path, api_key="sk-secret-value").key(MESSAGES) == key
    assert client(tmp_path, temperature=0.7).key(MESSAGES) != key
    assert client(tmp_path, max_tokens=10).key(MESSAGES) != key
    assert client(tmp_path, seed=1).key(MESSAGES) != key
    assert client(tmp_path, api_base="http://localhost:1").key(MESSAGES) != key
    assert client(tmp_path, model="scripted/other").key(MESSAGES) != key
    assert base.key(MESSAGES[1:]) != key


def test_errors_are_not_cached(tmp_path: Path) -> None:
    handler = scripted(rate_limit(), "fine")
    failing = client(tmp_path, max_retries=0)
    assert run(lambda: failing.complete(MESSAGES)).error
    retry = client(tmp_path, max_retries=0)
    result = run(lambda: retry.complete(MESSAGES))
    assert result.text == "fine" and not result.cached and handler.calls == 2


def test_no_cache(tmp_path: Path) -> None:
    handler = scripted("x")
    c = client(tmp_path, cache=False)
    run(lambda: c.complete(MESSAGES))
    run(lambda: c.complete(MESSAGES))
    assert handler.calls == 2 and c.stats.cache_hits == 0


def test_shared_cache_object_and_len(tmp_path: Path) -> None:
    scripted("x")
    cache = ResponseCache(tmp_path / "shared")
    run(lambda: client(tmp_path, cache=cache).complete(MESSAGES))
    assert len(cache) == 1


# ---------------------------------------------------------------------------------------------- retries


def test_retries_transient_errors_with_backoff(tmp_path: Path) -> None:
    handler = scripted(rate_limit(), litellm.InternalServerError("oops", "scripted", "m"), "finally")
    c = client(tmp_path)
    result = run(lambda: c.complete(MESSAGES))
    assert result.text == "finally" and result.attempts == 3
    assert handler.calls == 3 and c.stats.retries == 2 and c.stats.calls == 1 and c.stats.errors == 0


def test_error_after_retries_is_returned_not_raised(tmp_path: Path) -> None:
    handler = scripted(rate_limit())
    c = client(tmp_path, max_retries=2)
    result = run(lambda: c.complete(MESSAGES))
    assert not result.ok and result.error.startswith("RateLimitError") and result.text == ""
    assert handler.calls == 3 and c.stats.errors == 1 and c.stats.calls == 0


def test_backoff_grows_exponentially(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    delays: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        delays.append(seconds)

    scripted(rate_limit())
    c = client(tmp_path, max_retries=4, backoff_s=1.0, max_backoff_s=5.0)
    monkeypatch.setattr("agentbench.llm.client.asyncio.sleep", fake_sleep)
    run(lambda: c.complete(MESSAGES))
    assert len(delays) == 4
    assert 0.5 <= delays[0] <= 1 and 1 <= delays[1] <= 2 and 2 <= delays[2] <= 4 and 2.5 <= delays[3] <= 5


def test_request_specific_errors_are_not_retried(tmp_path: Path) -> None:
    too_long = litellm.ContextWindowExceededError(message="too long", model="m", llm_provider="scripted")
    handler = scripted(too_long)
    c = client(tmp_path)
    result = run(lambda: c.complete(MESSAGES))
    assert result.error.startswith("ContextWindowExceededError") and handler.calls == 1


@pytest.mark.parametrize(
    "exc",
    [
        litellm.AuthenticationError(message="bad key", llm_provider="scripted", model="m"),
        litellm.NotFoundError(message="no such model", llm_provider="scripted", model="m"),
    ],
)
def test_fatal_errors_raise_model_error(tmp_path: Path, exc: Exception) -> None:
    handler = scripted(exc)
    with pytest.raises(ModelError, match="scripted/m"):
        run(lambda: client(tmp_path).complete(MESSAGES))
    assert handler.calls == 1


def test_secrets_are_redacted_from_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCRIPTED_API_KEY", "supersecretvalue42")
    scripted(
        litellm.RateLimitError(
            message="key supersecretvalue42 sk-abcdefghijklmnop", llm_provider="s", model="m"
        )
    )
    result = run(lambda: client(tmp_path, max_retries=0).complete(MESSAGES))
    assert "supersecretvalue42" not in result.error and "sk-abcdefghijklmnop" not in result.error
    assert redact("x supersecretvalue42 y") == "x *** y"


# ----------------------------------------------------------------------------------- concurrency, params


def test_concurrency_is_bounded(tmp_path: Path) -> None:
    handler = scripted(lambda m: m[-1]["content"], delay=0.05)
    c = client(tmp_path, concurrency=2, cache=False)
    prompts = [[{"role": "user", "content": str(i)}] for i in range(8)]
    results = run(lambda: asyncio.gather(*(c.complete(p) for p in prompts)))
    assert [r.text for r in results] == [str(i) for i in range(8)]
    assert handler.max_active == 2


def test_deterministic_defaults_are_sent(tmp_path: Path) -> None:
    handler = scripted("x")
    run(lambda: client(tmp_path, cache=False).complete(MESSAGES))
    assert handler.params[0]["temperature"] == 0.0 and handler.params[0]["seed"] == 0


def test_client_usable_across_event_loops(tmp_path: Path) -> None:
    scripted("x")
    c = client(tmp_path, cache=False)
    assert run(lambda: c.complete(MESSAGES)).ok
    assert run(lambda: c.complete(MESSAGES)).ok


def test_with_key_mock_response_reports_usage_and_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    c = client(tmp_path, model="gpt-4o", params={"mock_response": "def f():\n    return 1"})
    c.check()
    result = run(lambda: c.complete(MESSAGES))
    assert result.text == "def f():\n    return 1"
    assert result.prompt_tokens > 0 and result.completion_tokens > 0 and result.cost_usd > 0
    assert c.stats.calls == 1 and c.stats.cost_usd == pytest.approx(result.cost_usd)


# ------------------------------------------------------------------------------------------- key checks


def test_missing_openai_key_fails_fast_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    started = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        check_model("gpt-4o")
    assert time.perf_counter() - started < 1.0
    message = str(info.value)
    assert "OPENAI_API_KEY" in message and "\n" not in message
    assert message == "OPENAI_API_KEY is not set: export it or choose --llm local/qwen2.5-coder-1.5b"


def _fresh_python(code: str, env: dict[str, str]) -> list[str]:
    """The lines ``code`` prints in a new interpreter (what it imports is then its own doing)."""
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_missing_key_check_is_fast_and_light() -> None:
    """The CLI's fail-fast path: no LiteLLM, no pydantic, well under a second including the import."""
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    code = (
        "import sys, time\n"
        "t = time.perf_counter()\n"
        "from agentbench.llm import check_model\n"
        "from agentbench.errors import ConfigError\n"
        "try:\n    check_model('gpt-4o')\n"
        "except ConfigError as e:\n    print(e)\n"
        "print(time.perf_counter() - t < 0.5, 'litellm' in sys.modules, 'pydantic' in sys.modules)\n"
        "from agentbench.llm import LLMClient\n"
        "try:\n    LLMClient('gpt-4o', cache=False).check()\n"
        "except ConfigError as e:\n    print(e)\n"
        "print('litellm' in sys.modules)\n"
    )
    message = "OPENAI_API_KEY is not set: export it or choose --llm local/qwen2.5-coder-1.5b"
    assert _fresh_python(code, env) == [message, "True False False", message, "False"]


@pytest.mark.parametrize(
    "model",
    [
        "gpt-4o",
        "o3-mini",
        "openai/gpt-4o-mini",
        "anthropic/claude-3-5-sonnet-20241022",
        "claude-sonnet-4-20250514",
        "mistral/mistral-large-latest",
        "groq/llama3-8b-8192",
        "deepseek/deepseek-chat",
        "openrouter/meta-llama/llama-3-8b",
        "together_ai/meta-llama/Llama-3-8b",
        "fireworks_ai/accounts/x/models/y",
        "xai/grok-2",
    ],
)
def test_fast_key_table_agrees_with_litellm(model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentbench.llm.check import _KEY_VARS

    variable = next(v for prefix, v in _KEY_VARS if model.startswith(prefix))
    monkeypatch.delenv(variable, raising=False)
    assert variable in litellm.validate_environment(model=model)["missing_keys"]
    with pytest.raises(ConfigError, match=f"^{variable} is not set"):
        check_model(model)
    monkeypatch.setenv(variable, "x")
    check_model(model)


def test_prefixes_decided_without_litellm_are_litellm_providers() -> None:
    from agentbench.llm.check import _PREFIX_PROVIDERS

    for provider in sorted(_PREFIX_PROVIDERS):
        model = f"{provider}/some-model"
        assert litellm.get_llm_provider(model=model, api_base="http://127.0.0.1:9/v1")[1] == provider, model


def test_known_provider_with_its_key_or_a_base_url_is_checked_without_litellm() -> None:
    """The run's process may never need LiteLLM (worker processes make the calls): the check of a model
    whose provider and key are known must not import it."""
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-not-sent"}
    env.pop("ANTHROPIC_API_KEY", None)
    code = (
        "import sys\n"
        "from agentbench.errors import ConfigError\n"
        "from agentbench.llm import check_model\n"
        "check_model('openai/gpt-4o-mini')\n"
        "check_model('hosted_vllm/my-model', api_base='http://127.0.0.1:8000/v1')\n"
        "check_model('ollama/llama3')\n"
        "try:\n    check_model('anthropic/claude-3-5-haiku-latest')\n"
        "except ConfigError as e:\n    print(e)\n"
        "print('litellm' in sys.modules)\n"
    )
    missing = "ANTHROPIC_API_KEY is not set: export it or choose --llm local/qwen2.5-coder-1.5b"
    assert _fresh_python(code, env) == [missing, "False"]


def test_other_providers_go_through_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COHERE_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="^COHERE_API_KEY is not set"):
        check_model("cohere/command-r")
    check_model("ollama/llama3")  # local server, no key; default base URL


def test_unknown_model_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown model 'no-such-model-xyz'"):
        check_model("no-such-model-xyz")


def test_unknown_bare_model_with_key_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    with pytest.raises(ConfigError, match="unknown model 'gpt-nonexistent'.*openai/gpt-nonexistent"):
        check_model("gpt-nonexistent")


def test_unknown_model_at_call_time_raises_model_error(tmp_path: Path) -> None:
    c = LLMClient("no-such-model-xyz", cache=False)
    with pytest.raises(ModelError, match="unknown model 'no-such-model-xyz'"):
        run(lambda: c.complete(MESSAGES))


def test_several_missing_variables_are_all_named(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AZURE_API_KEY", "AZURE_API_BASE", "AZURE_API_VERSION"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError, match="^AZURE_.*, AZURE_.* are not set: export them or choose --llm"):
        check_model("azure/my-deployment")


def test_unknown_local_model_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown local model"):
        check_model("local/qwen-99b")


def test_api_base_skips_key_requirement(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    check_model("openai/my-served-model", api_base="http://localhost:8000/v1")


def test_invalid_concurrency() -> None:
    with pytest.raises(ConfigError, match="concurrency"):
        LLMClient("scripted/m", concurrency=0, cache=False)


def test_api_key_is_not_stored_in_the_response_cache(tmp_path: Path) -> None:
    secret = "sk-live-0123456789abcdef"
    scripted("a reply")
    c = client(tmp_path, api_key=secret)
    assert run(lambda: c.complete(MESSAGES)).ok and len(c.cache) == 1
    c.close()
    stored = b"".join(p.read_bytes() for p in (tmp_path / "llm").rglob("*") if p.is_file())
    assert b"a reply" in stored and secret.encode() not in stored
