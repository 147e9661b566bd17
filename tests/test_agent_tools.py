"""The tool-using conditions with a scripted provider (plumbing): native function calls, the text protocol,
budgets, tool errors, held-out scoring, replay from the cache, plug-in agents with tools."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agentbench.agent.loop import run_tool_loop
from agentbench.agent.protocol import TextProtocol
from agentbench.agent.tools import Budget, SearchResult, TestOutcome, Tools, parse_text_calls
from agentbench.api import evaluate_config
from agentbench.llm import LLMClient
from agentbench.llm._litellm import litellm_module, register_provider
from agentbench.pipeline import RunConfig
from agentbench.pools import load_pool
from agentbench.pools.split import VisibleTests, split_tests

from .conftest import core_subset

litellm = litellm_module()


def _blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


class Toolster(litellm.CustomLLM):
    """Runs the context snippet's code through run_tests, searches, then submits the first search hit
    that it has not tried; with ``text=True`` it writes calls in the text protocol instead of natively."""

    def __init__(self, text: bool = False, plan: tuple[str, ...] = ("run_tests", "search_code", "submit")):
        super().__init__()
        self.text = text
        self.plan = plan
        self.calls = 0

    async def acompletion(self, model, messages, model_response, optional_params, **_):
        self.calls += 1
        answered = sum(m["role"] == "tool" for m in messages) + sum(
            m["role"] == "user" and "<tool_response>" in (m["content"] or "") for m in messages
        )
        step = self.plan[min(answered, len(self.plan) - 1)]
        first_user = next(m["content"] for m in messages if m["role"] == "user")
        task = re.search(r"Task: (.*)", first_user).group(1)
        signature = _blocks(first_user)[-1].strip()
        code = (_blocks(first_user)[:-1] or [signature + "\n    return None\n"])[0]
        found = [b for m in messages if m["role"] in ("tool", "user") for b in _blocks(m["content"] or "")]
        if step == "submit" and found:
            code = found[-1]
        args = {"query": task, "k": 2} if step == "search_code" else {"code": code}
        if step == "garbage":
            content, calls = "<tool_call>{not json</tool_call>", []
        elif self.text:
            content, calls = f"<tool_call>\n{json.dumps({'name': step, 'arguments': args})}\n</tool_call>", []
        else:
            content = ""
            calls = [
                litellm.utils.ChatCompletionMessageToolCall(
                    id=f"call_{answered}",
                    type="function",
                    function={"name": step, "arguments": json.dumps(args)},
                )
            ]
        model_response.choices[0].message.content = content
        if calls:
            model_response.choices[0].message.tool_calls = calls
        model_response.usage = litellm.Usage(prompt_tokens=100, completion_tokens=20, total_tokens=120)
        return model_response


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return core_subset(4, tmp_path_factory.mktemp("pool") / "core4")


def _run(tmp_path: Path, pool: Path, name: str, provider: Toolster, **kw) -> object:
    register_provider("toolster", provider)
    config = RunConfig(
        llm="toolster/m",
        embedder="bm25",
        pool=str(pool),
        sandbox="process",
        conditions=kw.pop("conditions", ["rag", "agent_rag", "agent"]),
        run_dir=str(tmp_path / name),
        store_dir=str(tmp_path / "stores"),
        concurrency=2,
        **kw,
    )
    return evaluate_config(config, client=LLMClient("toolster/m", concurrency=2), show_progress=False)


def test_parse_text_calls() -> None:
    calls = parse_text_calls(
        'x <tool_call>\n{"name": "run_tests", "arguments": {"code": "def f(): pass"}}\n</tool_call>'
        '<tool_call>{"name": "search_code", "arguments": "{\\"query\\": \\"q\\"}"}</tool_call>'
        "<tool_call>{oops</tool_call><tool_call>"
        '{"name": "submit", "arguments": {"code": "def f(): return 1"}}'
    )
    assert [c.name for c in calls] == ["run_tests", "search_code", "", "submit"]
    assert calls[1].arguments == {"query": "q"} and calls[2].arguments is None
    # without tags, a fenced JSON call to a tool is accepted and marked lenient; other JSON is not a call
    fenced = parse_text_calls('```json\n{"name": "submit", "arguments": {"code": "def f(): pass"}}\n```')
    assert [(c.name, c.lenient) for c in fenced] == [("submit", True)]
    assert parse_text_calls('```json\n{"a": 1}\n```') == []
    # a code argument written as a Python triple-quoted string (not JSON) is salvaged, as lenient
    triple = '```json\n{"name": "run_tests", "arguments": {"code": """\ndef f():\n    return 1\n"""}}\n```'
    (salvaged,) = parse_text_calls(triple)
    assert salvaged.lenient and salvaged.arguments == {"code": "def f():\n    return 1\n"}


def test_agent_conditions_with_native_tool_calls(tmp_path: Path, pool: Path) -> None:
    result = _run(tmp_path, pool, "native", Toolster())
    tooled = [r for r in result.records if r.condition in ("agent", "agent_rag")]
    assert len(tooled) == 8
    for rec in tooled:
        stats = rec.tool_stats
        assert stats.protocol == "native" and stats.submitted and stats.budget_exhausted is None
        assert stats.tool_calls == stats.valid_tool_calls == 3 and stats.turns == 3
        assert stats.searches == 1 and stats.test_runs == 1
        kinds = [s["type"] for s in rec.trajectory]
        assert kinds == ["assistant", "tool", "assistant", "tool", "assistant", "tool"]
        assert (
            rec.trajectory[1]["name"] == "run_tests" and "visible tests pass" in rec.trajectory[1]["result"]
        )
        assert rec.prompt_tokens == 300 and rec.completion_tokens == 60
        # the tool messages went back as role "tool" answers to the calls' ids
        assert [m["tool_call_id"] for m in rec.messages if m["role"] == "tool"] == [
            "call_0",
            "call_1",
            "call_2",
        ]
    # every condition is scored on the held-out asserts, the split is recorded
    summary = result.summary
    assert result.retrieval.run_info.scored_on == "held_out"
    queries = {q.query_id: q for q in load_pool(pool).queries}
    held_out = {
        q.query_id: split_tests(q.test_suite, VisibleTests.parse("0.5"), 0, q.query_id).held_out
        for q in load_pool(pool).queries
    }
    assert all(len(r.results) == len(held_out[r.query_id]) for r in tooled)
    for rec in tooled:  # the split is recorded: which asserts run_tests showed
        split = split_tests(queries[rec.query_id].test_suite, VisibleTests.parse("0.5"), 0, rec.query_id)
        assert rec.tool_stats.visible_tests == list(split.visible_idx)
    visible_run = next(s for s in tooled[0].trajectory if s["type"] == "tool")["result"]
    n_visible = len(load_pool(pool).queries[0].test_suite) - len(held_out[tooled[0].query_id])
    assert visible_run.startswith(tuple(f"{i}/{n_visible} visible" for i in range(n_visible + 1)))
    assert summary.agent["agent_rag"].tool_calls_per_task == 3.0
    # the trajectories are readable in the HTML report's per-query browser, and reported in the text
    from agentbench.analysis import load_sources, render_html, render_report
    from agentbench.analysis.compare import load_run

    (source,) = load_sources([result.run_dir])
    assert set(source.outcomes["agent_rag.repair"]) == {
        r.query_id for r in tooled[:4] if r.context_passes is False
    }
    page = render_html(load_run(result.run_dir))
    assert page.count("trajectory (native)") == 8 and "visible tests pass" in page
    assert "tool calls per task" in render_report(summary)


def test_rerun_replays_every_step_from_the_cache(tmp_path: Path, pool: Path) -> None:
    first = Toolster()
    _run(tmp_path, pool, "a", first, conditions=["agent_rag"])
    again = Toolster()
    result = _run(tmp_path, pool, "b", again, conditions=["agent_rag"])
    assert first.calls == 12 and again.calls == 0
    assert result.summary.llm.calls == 0 and result.summary.llm.cache_hits == 12


def test_text_protocol_for_models_without_function_calling(tmp_path: Path) -> None:
    import asyncio

    register_provider("toolster", Toolster(text=True))
    tools = Tools(
        lambda q, k: [SearchResult("c_1", "def f(x):\n    return x + 1\n", 1.0)],
        lambda code: [TestOutcome("assert f(1) == 2", "pass" if "x + 1" in code else "FAIL")],
        visible_tests=("assert f(1) == 2",),
    )
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Task: add one\n```python\ndef f(x):\n```"},
    ]
    out = asyncio.run(
        run_tool_loop(LLMClient("toolster/m", cache=False), messages, tools, "f", Budget(), TextProtocol())
    )
    assert "<tools>" in out.messages[0]["content"] and "assert f(1) == 2" in out.messages[0]["content"]
    assert out.stats["protocol"] == "text" and out.stats["valid_tool_calls"] == 3 and out.stats["submitted"]
    assert out.code.strip() == "def f(x):\n    return x + 1"
    assert sum("<tool_response>" in m["content"] for m in out.messages if m["role"] == "user") == 3


def test_budgets_are_enforced_and_the_last_code_is_scored(tmp_path: Path, pool: Path) -> None:
    never = Toolster(plan=("run_tests",))  # tests forever, never submits
    result = _run(tmp_path, pool, "turns", never, conditions=["agent_rag"], max_turns=2)
    for rec in result.records:
        assert rec.tool_stats.turns == 2 and rec.tool_stats.budget_exhausted == "turns"
        assert rec.code and rec.status == "ok"  # scored on the code it last tested
    calls = Toolster(plan=("run_tests",))
    result = _run(tmp_path, pool, "calls", calls, conditions=["agent_rag"], max_tool_calls=1)
    assert all(r.tool_stats.budget_exhausted == "tool_calls" for r in result.records)
    assert result.summary.agent["agent_rag"].budget_exhausted == 4


def test_a_malformed_call_is_shown_to_the_model_not_raised(tmp_path: Path, pool: Path) -> None:
    result = _run(tmp_path, pool, "garbage", Toolster(plan=("garbage", "submit")), conditions=["agent"])
    for rec in result.records:
        assert rec.tool_stats.invalid_tool_calls >= 1
        bad = next(s for s in rec.trajectory if s["type"] == "tool" and not s["valid"])
        assert bad["result"].startswith("error:")


def test_plugin_agents_get_the_tools(tmp_path: Path, pool: Path) -> None:
    config = RunConfig(
        agent="examples.tool_agent:agent",
        embedder="bm25",
        pool=str(pool),
        sandbox="process",
        conditions=["rag", "agent_rag"],
        run_dir=str(tmp_path / "plugin"),
        store_dir=str(tmp_path / "stores"),
    )
    result = evaluate_config(config, show_progress=False)
    tooled = [r for r in result.records if r.condition == "agent_rag"]
    assert all(r.tool_stats.test_runs >= 1 for r in tooled)
    assert all(r.trajectory and r.trajectory[0]["name"] == "run_tests" for r in tooled)
    # the example keeps the first candidate that passes the visible tests: never worse than the context
    rag = {r.query_id: r.passed for r in result.records if r.condition == "rag"}
    assert sum(r.passed for r in tooled) >= sum(rag.values())
