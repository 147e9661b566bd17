"""The decoding grammar of ``local/`` agents (agent/grammar.py), checked with its Python equivalent: what
it admits, the adversarial replies it rejects, bad schemas, and that it reaches the cache key.
tests/test_grammar_local.py checks the same replies against llama.cpp's own grammar engine."""

from __future__ import annotations

import json

import pytest

from agentbench.agent import Agent
from agentbench.agent.grammar import GrammarError, check_schemas, reply_grammar
from agentbench.agent.protocol import NativeProtocol, TextProtocol, protocol_for
from agentbench.agent.tools import TOOL_SCHEMAS, parse_text_calls
from agentbench.errors import ConfigError
from agentbench.llm import LLMClient

FN = "merge_intervals"
CODE = "def merge_intervals(intervals):\n    return sorted(intervals)\n"


def call(name: str, arguments: dict, raw: str | None = None) -> str:
    body = raw if raw is not None else json.dumps({"name": name, "arguments": arguments})
    return f"<tool_call>\n{body}\n</tool_call>"


VALID = [
    call("run_tests", {"code": CODE}),
    call("submit", {"code": CODE}),
    call("submit", {"code": "import bisect\nfrom typing import List\n" + CODE}),
    call("submit", {"code": "import re\n" * 12 + CODE}),
    "```python\n" + "from typing import *\n" * 12 + CODE + "```",
    call("search_code", {"query": "merge overlapping intervals"}),
    call("search_code", {"query": "merge overlapping intervals", "k": 3}),
    call("search_code", {"query": 'quote " and \\ and \u00e9 and \t tab'}),
    "```python\n" + CODE + "```",
    "```python\nimport heapq\n" + CODE + "\ndef helper(x):\n    return `x`\n```",
]

ADVERSARIAL = {
    "the task's function as a tool": call(FN, {"intervals": [[1, 2]]}),
    "an unknown tool": call("run_code", {"code": CODE}),
    "missing argument": call("search_code", {"k": 2}),
    "missing code": call("run_tests", {}),
    "extra argument": call("run_tests", {"code": CODE, "tests": ["assert True"]}),
    "extra argument after optional": call("search_code", {"query": "q", "k": 2, "lang": "py"}),
    "wrong argument type": call("search_code", {"query": "q", "k": "3"}),
    "arguments as a string": call("search_code", {}, raw='{"name": "search_code", "arguments": "{}"}'),
    "two calls in one reply": call("run_tests", {"code": CODE}) + "\n" + call("submit", {"code": CODE}),
    "prose before the call": "Let me test it.\n" + call("run_tests", {"code": CODE}),
    "prose after the call": call("run_tests", {"code": CODE}) + "\nThat should work.",
    "code for another function": call("submit", {"code": "def solve(x):\n    return x\n"}),
    "raw newline in a JSON string": call(
        "submit", {}, raw='{"name": "submit", "arguments": {"code": "def ' + FN + '(x):\n    return x"}}'
    ),
    "unclosed call": call("submit", {"code": CODE})[: -len("</tool_call>")],
    "a fenced JSON call": '```json\n{"name": "submit", "arguments": {"code": "def merge_intervals(): pass"}}\n```',
    "prose before the answer": "Here is the code:\n```python\n" + CODE + "```",
    "prose after the answer": "```python\n" + CODE + "```\nDone.",
    "two code blocks": "```python\n" + CODE + "```\n```python\n" + CODE + "```",
    "answer without the function": "```python\ndef other(x):\n    return x\n```",
    "bare code": CODE,
    "imports looping past the limit": "```python\n" + "from typing import *\n" * 13 + CODE + "```",
    "imports looping past the limit in a call": call("submit", {"code": "import re\n" * 13 + CODE}),
    "empty reply": "",
}


@pytest.fixture(scope="module")
def grammar():
    return reply_grammar(TOOL_SCHEMAS, FN)


@pytest.mark.parametrize("reply", VALID)
def test_the_grammar_admits_calls_and_answers(grammar, reply: str) -> None:
    assert grammar.accepts(reply), reply
    calls = parse_text_calls(reply)
    assert len(calls) <= 1 and all(c.name in grammar.tools and c.arguments is not None for c in calls)


@pytest.mark.parametrize("what", ADVERSARIAL)
def test_the_grammar_rejects_adversarial_replies(grammar, what: str) -> None:
    assert not grammar.accepts(ADVERSARIAL[what])


def test_the_last_reply_may_only_submit_or_answer() -> None:
    final = reply_grammar(TOOL_SCHEMAS, FN, ("submit",))
    assert final.tools == ("submit",)
    assert final.accepts(call("submit", {"code": CODE})) and final.accepts("```python\n" + CODE + "```")
    assert not final.accepts(call("run_tests", {"code": CODE}))
    assert not final.accepts(call("search_code", {"query": "q"}))
    assert "search_code" not in final.gbnf and "run_tests" not in final.gbnf and "submit" in final.gbnf


def test_the_gbnf_spells_the_same_language(grammar) -> None:
    gbnf = grammar.gbnf
    assert gbnf.startswith("root ::= ") and gbnf.count("::=") == 1
    for name in ("search_code", "run_tests", "submit"):
        assert json.dumps(f'<tool_call>\n{{"name": "{name}", "arguments": ') in gbnf
    assert f"def {FN}(" in gbnf and "[0-9]{0,15}" in gbnf


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"type": "object", "properties": {"q": {"$ref": "#/defs/q"}}}, "'$ref'"),
        ({"type": "object", "properties": {"q": {"type": "string", "pattern": "a+"}}}, "'pattern'"),
        ({"type": "object", "properties": {"q": {"type": "integer", "minimum": 0}}}, "narrow integer range"),
        ({"type": "object", "properties": {"q": {}}}, "type null"),
        ({"type": "object", "properties": {}, "required": ["q"]}, "required property 'q'"),
    ],
)
def test_a_schema_without_a_grammar_is_one_line(schema: dict, says: str) -> None:
    bad = [*TOOL_SCHEMAS, {"type": "function", "function": {"name": "lookup", "parameters": schema}}]
    with pytest.raises(GrammarError, match="tool lookup") as info:
        check_schemas(bad)
    assert says in str(info.value) and "\n" not in str(info.value)
    assert isinstance(info.value, ConfigError)  # the CLI's exit 2


def test_a_local_agent_checks_its_schemas_when_built(monkeypatch: pytest.MonkeyPatch) -> None:
    import agentbench.agent.generate as generate

    bad = [{"type": "function", "function": {"name": "x", "parameters": {"type": "tuple"}}}]
    monkeypatch.setattr(generate, "TOOL_SCHEMAS", bad)
    with pytest.raises(GrammarError, match='type "tuple"'):
        Agent(LLMClient("local/qwen2.5-coder-0.5b", cache=False))
    Agent(LLMClient("openai/gpt-4o-mini", cache=False))  # native function calling needs no grammar


def test_narrow_ranges_enums_and_arrays() -> None:
    schema = {
        "type": "function",
        "function": {
            "name": "pick",
            "parameters": {
                "type": "object",
                "properties": {
                    "n": {"type": "integer", "minimum": 1, "maximum": 5},
                    "mode": {"enum": ["fast", "exact"]},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "strict": {"type": "boolean"},
                },
                "required": ["n"],
            },
        },
    }
    g = reply_grammar([schema], FN)
    assert g.accepts(call("pick", {"n": 5, "mode": "exact", "tags": ["a", "b"], "strict": True}))
    assert g.accepts(call("pick", {"n": 1, "tags": []}))
    assert not g.accepts(call("pick", {"n": 6}))
    assert not g.accepts(call("pick", {"n": 2, "mode": "slow"}))
    assert not g.accepts(call("pick", {"mode": "fast"}))


def test_protocols_and_the_cache_key() -> None:
    local, api = (
        LLMClient("local/qwen2.5-coder-0.5b", cache=False),
        LLMClient("openai/gpt-4o-mini", cache=False),
    )
    assert isinstance(protocol_for(api), NativeProtocol)
    text = protocol_for(local)
    assert isinstance(text, TextProtocol) and text.constrained and text.name == "text"
    messages = [{"role": "user", "content": "hi"}]
    gbnf = reply_grammar(TOOL_SCHEMAS, FN).gbnf
    final = reply_grammar(TOOL_SCHEMAS, FN, ("submit",)).gbnf
    keys = {local.key(messages), local.key(messages, grammar=gbnf), local.key(messages, grammar=final)}
    assert len(keys) == 3  # a reply cached without the grammar (or under another) is never reused
    assert local.key(messages, grammar=None) == local.key(messages)  # unconstrained keys are unchanged


class _Scripted:
    """An LLM stand-in (plumbing only) that records the grammar it was given and keeps to it: it runs the
    tests while it may, and submits under the final grammar."""

    is_local = True

    def __init__(self, prompt_tokens: int = 100) -> None:
        self.grammars: list[str | None] = []
        self.prompt_tokens = prompt_tokens

    async def complete(self, messages, tools=None, grammar=None):
        from agentbench.llm.client import LLMResult

        self.grammars.append(grammar)
        text = call("run_tests" if "run_tests" in grammar else "submit", {"code": CODE})
        assert reply_grammar(TOOL_SCHEMAS, FN).accepts(text)
        return LLMResult(model="local/x", text=text, prompt_tokens=self.prompt_tokens, completion_tokens=20)


@pytest.mark.parametrize(
    ("budget", "prompt_tokens", "labels"),
    [
        ({"max_turns": 3}, 100, ["test_first", "reply", "final"]),
        ({"max_tool_calls": 2}, 100, ["test_first", "final"]),
        ({"max_turns": 1}, 100, ["final"]),
        # 1000 + 1000 used, the next reply expected at 1250: 3000 would be passed by the third
        ({"max_tokens": 3000}, 980, ["test_first", "reply", "final"]),
        ({"max_turns": 3, "test_first": False}, 100, ["reply", "reply", "final"]),
    ],
)
def test_the_budgets_last_reply_is_decoded_under_the_final_grammar(
    budget: dict, prompt_tokens: int, labels: list[str]
) -> None:
    import asyncio

    from agentbench.agent.loop import run_tool_loop
    from agentbench.agent.tools import Budget, TestOutcome, Tools

    llm = _Scripted(prompt_tokens)
    tools = Tools(lambda q, k: [], lambda code: [TestOutcome("assert True", "FAIL")], ("assert True",))
    messages = [{"role": "user", "content": "write merge_intervals"}]
    out = asyncio.run(
        run_tool_loop(llm, messages, tools, FN, Budget(**budget), TextProtocol(constrained=True))
    )
    assert [s["grammar"] for s in out.trajectory if s["type"] == "assistant"] == labels
    final = reply_grammar(TOOL_SCHEMAS, FN, ("submit",)).gbnf
    assert [g == final for g in llm.grammars] == [label == "final" for label in labels]
    assert out.stats["constrained"] and out.stats["protocol"] == "text" and out.code == CODE.strip()
    assert out.stats["submitted"] and out.stats["budget_exhausted"] is None


def test_before_the_tests_have_run_a_reply_may_only_search_or_test() -> None:
    first = reply_grammar(TOOL_SCHEMAS, FN, ("search_code", "run_tests"), answer=False)
    assert first.accepts(call("run_tests", {"code": CODE}))
    assert first.accepts(call("search_code", {"query": "merge intervals"}))
    assert not first.accepts("```python\n" + CODE + "```")  # no answer before a test run
    assert not first.accepts(call("submit", {"code": CODE}))
    assert "```python" not in first.gbnf and "submit" not in first.gbnf


class _Eager:
    """A stand-in (plumbing only) for a model that answers at once, then tests, then answers again."""

    is_local = False

    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)
        self.seen: list[list[dict]] = []

    async def complete(self, messages, tools=None, grammar=None):
        from agentbench.llm.client import LLMResult

        self.seen.append([dict(m) for m in messages])
        return LLMResult(model="x", text=self.replies.pop(0), prompt_tokens=10, completion_tokens=5)


ANSWER = "```python\n" + CODE + "```"


def _eager_run(replies: list[str], visible: tuple[str, ...] = ("assert True",), **budget):
    import asyncio

    from agentbench.agent.loop import run_tool_loop
    from agentbench.agent.protocol import TextProtocol
    from agentbench.agent.tools import Budget, TestOutcome, Tools

    ran: list[str] = []

    def run_tests(code: str) -> list[TestOutcome]:
        ran.append(code)
        return [TestOutcome(t, "pass") for t in visible]

    llm = _Eager(replies)
    tools = Tools(lambda q, k: [], run_tests, visible)
    messages = [{"role": "user", "content": "write merge_intervals"}]
    out = asyncio.run(run_tool_loop(llm, messages, tools, FN, Budget(**budget), TextProtocol()))
    return out, ran, llm


def test_an_answer_before_any_test_run_is_refused_and_the_tests_come_first() -> None:
    out, ran, llm = _eager_run(
        [ANSWER, call("submit", {"code": CODE}), call("run_tests", {"code": CODE}), ANSWER]
    )
    assert out.stats["refused_untested"] == 2 and out.stats["test_runs"] == 1 and out.stats["submitted"]
    assert ran == [CODE.strip()] and out.code == CODE.strip() and out.stats["turns"] == 4
    assert "before you submit" in llm.seen[0][0]["content"]  # the rule is stated up front
    notes = [s for s in out.trajectory if s["type"] == "user"]
    assert len(notes) == 1 and "run_tests" in notes[0]["content"]
    refused = [s for s in out.trajectory if s["type"] == "tool" and s["name"] == "submit"]
    assert refused[0]["result"].startswith("not submitted") and refused[0]["valid"]


@pytest.mark.parametrize(
    ("visible", "budget"),
    [(("assert True",), {"test_first": False}), ((), {}), (("assert True",), {"max_turns": 1})],
    ids=["rule off", "no visible tests", "last reply the budget allows"],
)
def test_an_immediate_answer_is_taken_where_the_rule_does_not_apply(visible, budget) -> None:
    out, ran, llm = _eager_run([ANSWER], visible, **budget)
    assert out.stats["submitted"] and out.stats["refused_untested"] == 0 and ran == []
    assert out.code == CODE.strip() and out.stats["turns"] == 1
    stated = "before you submit" in llm.seen[0][0]["content"]
    assert stated == (bool(visible) and "test_first" not in budget)


def test_an_api_model_is_told_to_test_before_it_submits() -> None:
    """Native function calling: an early submit gets a tool result refusing it, then the tests run."""
    import asyncio

    from agentbench.agent.loop import run_tool_loop
    from agentbench.agent.protocol import NativeProtocol
    from agentbench.agent.tools import Budget, TestOutcome, Tools
    from agentbench.llm.client import LLMResult, ToolCall

    def native(name: str) -> LLMResult:
        args = json.dumps({"code": CODE})
        return LLMResult(
            model="x", text="", tool_calls=[ToolCall(id=f"id_{name}", name=name, arguments=args)]
        )

    class _Native:
        is_local = False

        def __init__(self) -> None:
            self.replies = [native("submit"), native("run_tests"), native("submit")]
            self.seen: list[list[dict]] = []

        async def complete(self, messages, tools=None, grammar=None):
            assert tools and grammar is None
            self.seen.append([dict(m) for m in messages])
            return self.replies.pop(0)

    ran: list[str] = []
    tools = Tools(
        lambda q, k: [],
        lambda code: ran.append(code) or [TestOutcome("assert True", "pass")],
        ("assert True",),
    )
    llm = _Native()
    messages = [{"role": "user", "content": "write merge_intervals"}]
    out = asyncio.run(run_tool_loop(llm, messages, tools, FN, Budget(), NativeProtocol()))
    assert out.stats["refused_untested"] == 1 and out.stats["test_runs"] == 1 and out.stats["submitted"]
    assert out.stats["turns"] == 3 and ran == [CODE.strip()] and out.code == CODE.strip()
    refusal = [m for m in llm.seen[1] if m["role"] == "tool"]
    assert refusal[0]["tool_call_id"] == "id_submit" and refusal[0]["content"].startswith("not submitted")
