"""Prompt templates, signatures and the Agent.generate step (with a scripted LiteLLM provider)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import agentbench.agent as agent_api
import agentbench.llm as llm_api
from agentbench.agent import (
    CONDITIONS,
    Agent,
    Generation,
    Task,
    function_signature,
    load_template,
    render_context,
)
from agentbench.agent.prompts import prompts_dir
from agentbench.errors import ConfigError, ModelError
from agentbench.llm import LLMClient
from agentbench.llm._litellm import litellm_module, register_provider

REPO = Path(__file__).resolve().parents[1]
CANONICAL = "from datetime import date\n\n\ndef days_between(a: date, b: date) -> int:\n    return abs((b - a).days)\n"
TESTS = ["assert days_between(date(2020, 1, 1), date(2020, 1, 3)) == 2"]


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("AGENTBENCH_PROMPTS_DIR", raising=False)


def task(context: list[str] | None = None) -> Task:
    return Task.from_canonical("q_0001", "Days between two dates", CANONICAL, context or [], TESTS)


def test_public_names() -> None:
    assert sorted(agent_api.__all__) == sorted(
        [
            "CONDITIONS", "GENERATION_SCHEMA_VERSION", "Agent", "Generation", "PromptTemplate", "Task", "Usage",
            "extract_code", "function_signature", "load_template", "render_context", "AgentReply",
            "PluginAgent", "plugin_agent",
        ]
    )  # fmt: skip
    assert sorted(llm_api.__all__) == sorted(
        [
            "DEFAULT_MODEL", "LOCAL_MODELS", "LLMClient", "LLMResult", "LLMStats", "LocalModelSpec",
            "ResponseCache", "cache_dir", "check_model", "ensure_model", "redact",
        ]
    )  # fmt: skip
    for api in (agent_api, llm_api):
        for name in api.__all__:
            assert hasattr(api, name)


# ------------------------------------------------------------------------------------------- signatures


def test_signature_from_canonical() -> None:
    assert function_signature(CANONICAL) == ("days_between", "def days_between(a: date, b: date) -> int:")


def test_signature_prefers_the_function_the_tests_call() -> None:
    code = "def helper(x):\n    return x\n\n\ndef main(x):\n    return helper(x)\n"
    assert function_signature(code) == ("main", "def main(x):")  # not called by another function
    assert function_signature(code, ["assert helper(1) == 1"]) == ("helper", "def helper(x):")


def test_multiline_signature_keeps_header_without_comment() -> None:
    code = 'def grade(score,\n          cutoffs=(60, 70),  # low to high\n          letters="FD"):  # doc\n    """x"""\n    return 1\n'
    assert (
        function_signature(code)[1]
        == 'def grade(score,\n          cutoffs=(60, 70),  # low to high\n          letters="FD"):'
    )


def test_one_line_function_signature() -> None:
    assert function_signature("def f(a, *args, k=1, **kw): return a\n") == (
        "f",
        "def f(a, *args, k=1, **kw):",
    )


def test_signature_errors() -> None:
    with pytest.raises(ConfigError, match="does not parse"):
        function_signature("def (:")
    with pytest.raises(ConfigError, match="no top-level function"):
        function_signature("x = 1\n")


# ---------------------------------------------------------------------------------------------- prompts


def test_repo_prompts_exist_for_every_condition_and_render() -> None:
    assert prompts_dir() == REPO / "prompts"
    for condition in CONDITIONS:
        messages = load_template(condition).render(task(["def days_between(a, b):\n    return 0"]))
        assert [m["role"] for m in messages] == ["system", "user"]
        user = messages[1]["content"]
        assert "Days between two dates" in user and "def days_between(a: date, b: date) -> int:" in user
        assert ("return 0" in user) == (condition != "closed_book")
        assert "$" not in user


def test_context_conditions_share_wording() -> None:
    texts = {c: (REPO / "prompts" / f"{c}.md").read_text() for c in ("rag", "oracle", "distractor")}
    assert len(set(texts.values())) == 1


def test_render_context_fences_each_snippet() -> None:
    assert render_context(["a = 1\n", "b = 2"]) == "```python\na = 1\n```\n\n```python\nb = 2\n```"
    assert render_context([]) == ""


def test_custom_prompt_file_and_directory(tmp_path: Path) -> None:
    single = tmp_path / "one.txt"
    single.write_text("Implement $function_name: $task\n$context")
    messages = load_template("rag", single).render(task(["X"]))
    assert messages == [
        {"role": "user", "content": "Implement days_between: Days between two dates\n```python\nX\n```"}
    ]

    d = tmp_path / "dir"
    d.mkdir()
    (d / "oracle.md").write_text("<!-- system -->\nS $$5\n<!-- user -->\nU ${signature}\n")
    assert load_template("oracle", d).render(task()) == [
        {"role": "system", "content": "S $5"},
        {"role": "user", "content": "U def days_between(a: date, b: date) -> int:"},
    ]
    with pytest.raises(ConfigError, match="prompt template not found: .*rag.md"):
        load_template("rag", d)


def test_prompts_dir_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "closed_book.md").write_text("only $task")
    monkeypatch.setenv("AGENTBENCH_PROMPTS_DIR", str(tmp_path))
    assert load_template("closed_book").render(task()) == [
        {"role": "user", "content": "only Days between two dates"}
    ]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("Write $tsak", r"unknown variable \$tsak"),
        ("costs $5", "stray"),
        ("<!-- system -->\nonly system", "no user message"),
        ("preamble\n<!-- user -->\nx", "text before"),
    ],
)
def test_bad_templates(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "t.md"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_template("rag", path)


def test_unknown_condition() -> None:
    with pytest.raises(ConfigError, match="unknown condition 'open_book'"):
        load_template("open_book")


# ---------------------------------------------------------------------------------------------- generate


class Echo(litellm_module().CustomLLM):
    def __init__(self, reply: Any) -> None:
        super().__init__()
        self.reply = reply
        self.calls = 0

    async def acompletion(self, model: str, messages: list, model_response: Any, **_: Any):
        self.calls += 1
        if isinstance(self.reply, BaseException):
            raise self.reply
        model_response.choices[0].message.content = self.reply
        model_response.usage = litellm_module().Usage(prompt_tokens=50, completion_tokens=20, total_tokens=70)
        return model_response


REPLY = (
    "Here you go:\n```python\nfrom datetime import date\n\ndef days_between(a, b):\n    return abs((b - a).days)\n```\n"
    "Example:\n```python\nprint(days_between(date(2020, 1, 1), date(2020, 1, 2)))\n```"
)


def generate(
    tmp_path: Path, reply: Any, condition: str = "rag", **kwargs: Any
) -> tuple[Generation, Echo, LLMClient]:
    handler = Echo(reply)
    register_provider("echo", handler)
    client = LLMClient("echo/m", cache=tmp_path / "c.sqlite", backoff_s=0, **kwargs)
    generation = asyncio.run(
        Agent(client).generate(task(["def days_between(a, b):\n    return 0"]), condition)
    )
    return generation, handler, client


def test_generate_records_everything(tmp_path: Path) -> None:
    g, handler, client = generate(tmp_path, REPLY)
    assert g.status == "ok" and g.error is None and not g.cached
    assert g.code == "from datetime import date\n\ndef days_between(a, b):\n    return abs((b - a).days)"
    assert g.response == REPLY and g.task_id == "q_0001" and g.condition == "rag" and g.model == "echo/m"
    assert g.messages[0]["role"] == "system" and "return 0" in g.messages[1]["content"]
    assert (
        g.usage.prompt_tokens == 50 and g.usage.completion_tokens == 20 and g.function_name == "days_between"
    )
    assert g.schema_version == 1 and g.seconds >= g.llm_seconds > 0
    assert Generation.model_validate_json(g.model_dump_json()) == g

    again = asyncio.run(Agent(client).generate(task(["def days_between(a, b):\n    return 0"]), "rag"))
    assert again.cached and again.code == g.code and handler.calls == 1 and again.llm_seconds == 0


def test_generate_no_code(tmp_path: Path) -> None:
    g, _, _ = generate(tmp_path, "I don't know.")
    assert g.status == "no_code" and g.code == "" and g.error is None


def test_generate_llm_error_is_recorded(tmp_path: Path) -> None:
    litellm = litellm_module()
    g, handler, client = generate(
        tmp_path,
        litellm.ServiceUnavailableError(message="down", llm_provider="echo", model="m"),
        max_retries=1,
    )
    assert g.status == "llm_error" and g.error.startswith("ServiceUnavailableError") and g.code == ""
    assert handler.calls == 2 and client.stats.errors == 1


def test_generate_fatal_error_raises(tmp_path: Path) -> None:
    litellm = litellm_module()
    with pytest.raises(ModelError, match="AuthenticationError"):
        generate(tmp_path, litellm.AuthenticationError(message="invalid key", llm_provider="echo", model="m"))


def test_secrets_not_in_generation_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-live-0123456789abcdef"
    monkeypatch.setenv("ECHO_API_KEY", secret)
    litellm = litellm_module()
    ok, _, _ = generate(tmp_path, REPLY, api_key=secret)
    failed, _, _ = generate(
        tmp_path,
        litellm.RateLimitError(message=f"limit for key {secret}", llm_provider="echo", model="m"),
        max_retries=0,
        api_key=secret,
    )
    for g in (ok, failed):
        assert secret not in json.dumps(g.model_dump())
    stored = b"".join(p.read_bytes() for p in (tmp_path / "c.sqlite").rglob("*") if p.is_file())
    assert stored and secret.encode() not in stored
