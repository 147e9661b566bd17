"""The tools of the tool-using conditions (``agent``, ``agent_rag``) and how a model calls them.

Three tools: ``search_code(query, k)`` (the run's retriever over the pool), ``run_tests(code)`` (the
sandbox, on the query's *visible* asserts only; the held-out ones score the task) and ``submit(code)``.

API models get them through LiteLLM's native function calling (OpenAI tool schemas). ``local/`` models get
the same tools described in the system prompt and answer in the format Qwen2.5 was trained on (its chat
template's own tool format), which the harness parses:

    <tool_call>
    {"name": "run_tests", "arguments": {"code": "def f(x): ..."}}
    </tool_call>

Their replies are decoded under a grammar (:mod:`.grammar`, :mod:`.protocol`) that admits only one such
call with valid arguments or a final code block, so the parser's lenient paths serve only unconstrained
text-protocol runs.

Tool results go back as ``tool`` messages (native) or as a user message holding
``<tool_response>...</tool_response>`` (text). A tool that fails (bad arguments, an unknown tool, a
sandbox error) returns an error text to the model; it never stops the run.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Budget",
    "SearchResult",
    "TestOutcome",
    "Tools",
    "ToolBudgetExhausted",
    "TOOL_NAMES",
    "TOOL_SCHEMAS",
    "text_protocol",
    "parse_text_calls",
    "ParsedCall",
]

TOOL_NAMES = ("search_code", "run_tests", "submit")
MAX_K = 5

TOOL_SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "search_code",
            "description": "Search the code base for functions matching a natural-language query; returns the "
            "top k snippets, best first.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "what the code should do"},
                    "k": {
                        "type": "integer",
                        "description": f"how many snippets (1 to {MAX_K})",
                        "default": 3,
                    },
                },
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run_tests",
            "description": "Run Python code defining the function against the task's visible tests; "
            "returns each assert with PASS, FAIL or the exception raised.",
            "parameters": {
                "type": "object",
                "properties": {"code": {"type": "string", "description": "the complete function"}},
                "required": ["code"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "submit",
            "description": "Submit the final solution (the complete function). Ends the task.",
            "parameters": {
                "type": "object",
                "properties": {"code": {"type": "string", "description": "the complete function"}},
                "required": ["code"],
            },
        },
    },
]


@dataclass(frozen=True)
class Budget:
    """Limits per task, enforced by the loop; a task that runs out is scored on its last code."""

    max_turns: int = 6
    """model replies"""
    max_tool_calls: int = 12
    max_tokens: int = 12000
    """prompt plus completion tokens over all replies"""
    max_seconds: float | None = None
    """wall time; off by default, because under machine load it would make verdicts depend on the
    machine's speed"""
    test_first: bool = True
    """the agent must run the visible tests (``run_tests``) before it may answer or submit: a model that
    may answer at once usually does (the local 1.5B did in 100 of 100 core tasks, never seeing a test), so
    the tools would measure nothing. Off for a task without visible tests, and for the last reply a
    budget allows."""
    # a conversation that outgrows the model's context window ends as budget "context" too


@dataclass(frozen=True)
class SearchResult:
    corpus_id: str
    code: str
    score: float


@dataclass(frozen=True)
class TestOutcome:
    __test__ = False  # not a pytest class

    test: str
    outcome: str
    """``pass``, ``FAIL`` or ``ERROR:<Exception>``"""


@dataclass
class Tools:
    """The tools for one task. Plug-in agents get them as ``task.search``/``task.run_tests`` (and
    ``asearch``/``arun_tests``); ``max_calls`` is enforced here too, so a plug-in cannot exceed the
    budget, and every call is logged for the record."""

    search_fn: Callable[[str, int], list[SearchResult]]
    run_tests_fn: Callable[[str], list[TestOutcome]]
    visible_tests: tuple[str, ...] = ()
    max_calls: int | None = None
    log: list[dict[str, Any]] = field(default_factory=list)

    def _spend(self, name: str) -> None:
        if self.max_calls is not None and len(self.log) >= self.max_calls:
            raise ToolBudgetExhausted(f"tool budget of {self.max_calls} calls used up")
        self.log.append({"name": name})

    def search(self, query: str, k: int = 3) -> list[SearchResult]:
        self._spend("search_code")
        results = self.search_fn(query, max(1, min(MAX_K, int(k))))
        self.log[-1]["n"] = len(results)
        return results

    def run_tests(self, code: str) -> list[TestOutcome]:
        self._spend("run_tests")
        outcomes = self.run_tests_fn(code)
        self.log[-1]["passed"] = sum(o.outcome == "pass" for o in outcomes)
        self.log[-1]["n"] = len(outcomes)
        return outcomes

    async def asearch(self, query: str, k: int = 3) -> list[SearchResult]:
        return await asyncio.to_thread(self.search, query, k)

    async def arun_tests(self, code: str) -> list[TestOutcome]:
        return await asyncio.to_thread(self.run_tests, code)

    def usage(self) -> dict[str, Any]:
        """What a plug-in agent did with the tools (the built-in loop keeps richer statistics)."""
        searches_after = 0
        failed = False
        for entry in self.log:
            if entry["name"] == "run_tests" and entry.get("passed", 0) < entry.get("n", 0):
                failed = True
            searches_after += entry["name"] == "search_code" and failed
        return {
            "tool_calls": len(self.log),
            "searches": sum(e["name"] == "search_code" for e in self.log),
            "test_runs": sum(e["name"] == "run_tests" for e in self.log),
            "searches_after_failing_tests": searches_after,
            "budget_exhausted": "tool_calls"
            if self.max_calls is not None and len(self.log) >= self.max_calls
            else None,
        }


class ToolBudgetExhausted(RuntimeError):
    """Raised to a plug-in agent that calls a tool past the run's --max-tool-calls."""


def text_protocol(visible_tests: Sequence[str], test_first: bool = False) -> str:
    """The system-prompt section that describes the tools to a model without native function calling;
    ``test_first``: the test-first rule applies (the loop decides, see :attr:`Budget.test_first`)."""
    specs = "\n".join(json.dumps(t["function"], ensure_ascii=False) for t in TOOL_SCHEMAS)
    return (
        "# Tools\n\nYou may call one or more functions to assist with the task.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        f"{specs}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>\n\n'
        "Results come back inside <tool_response></tool_response>. The visible tests run_tests uses are:\n"
        + "\n".join(visible_tests)
        + "\n"
        + final_instruction(test_first)
    )


TEST_FIRST_RULE = "Run your function against the visible tests with run_tests before you submit it."


def final_instruction(test_first: bool) -> str:
    """The system prompt's last line on how to finish (with the test-first rule when it applies)."""
    done = "Call submit with your final function when you are done."
    return f"{TEST_FIRST_RULE} {done}" if test_first else done


@dataclass(frozen=True)
class ParsedCall:
    name: str
    arguments: dict[str, Any] | None
    """None when the arguments are not a JSON object"""
    raw: str
    lenient: bool = False
    """written as a fenced JSON block instead of inside <tool_call> tags (accepted, counted apart)"""


_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_FENCED = re.compile(r"```(?:json)?\s*\n(\{.*?\})\s*```", re.S)


def parse_text_calls(text: str) -> list[ParsedCall]:
    """``<tool_call>{...}</tool_call>`` blocks of a reply (a missing closing tag at the end is tolerated);
    a block that is not ``{"name", "arguments"}`` JSON is returned with ``name=""`` (an invalid call).

    Without any tag, a fenced JSON block holding ``{"name": <tool>, "arguments": {...}}`` for one of the
    tools is accepted too (small models often write the call that way); such calls are ``lenient``."""
    calls = [_parse_block(m.group(1).strip()) for m in _CALL.finditer(text)]
    if calls:
        return calls
    for m in _FENCED.finditer(text):
        try:
            data = json.loads(m.group(1))
        except json.JSONDecodeError:
            if (call := _salvage(m.group(1))) is not None:
                calls.append(call)
            continue
        if isinstance(data, dict) and isinstance(data.get("name"), str) and "arguments" in data:
            call = _parse_block(m.group(1))
            calls.append(ParsedCall(call.name, call.arguments, call.raw, lenient=True))
    return calls


_NAME = re.compile(r'"name"\s*:\s*"(run_tests|submit)"')
_TRIPLE = re.compile(r'"""\s*\n?(.*?)"""', re.S)


def _salvage(block: str) -> ParsedCall | None:
    """A run_tests/submit call whose code is not a valid JSON string (a Python triple-quoted string, raw
    newlines): the code is taken as written. Accepted as a lenient call."""
    name = _NAME.search(block)
    if name is None or "def " not in block:
        return None
    triple = _TRIPLE.search(block)
    code = triple.group(1) if triple else block[block.index("def ") :].rsplit('"', 1)[0]
    return ParsedCall(name.group(1), {"code": code}, block, lenient=True)


def _parse_block(raw: str) -> ParsedCall:
    if raw.startswith("```"):
        raw = raw.strip("`").removeprefix("json").strip()
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        return ParsedCall("", None, raw)
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return ParsedCall("", None, raw)
    args = data.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            args = None
    return ParsedCall(data["name"], args if isinstance(args, dict) else None, raw)


def parse_native_arguments(arguments: str) -> dict[str, Any] | None:
    try:
        data = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def format_search(results: Sequence[SearchResult]) -> str:
    if not results:
        return "no results"
    return "\n\n".join(
        f"[{i}] {r.corpus_id} (score {r.score:.3f})\n```python\n{r.code.rstrip()}\n```"
        for i, r in enumerate(results, start=1)
    )


def format_tests(outcomes: Sequence[TestOutcome]) -> str:
    if not outcomes:
        return "no visible tests"
    passed = sum(o.outcome == "pass" for o in outcomes)
    lines = [f"{passed}/{len(outcomes)} visible tests pass"]
    for o in outcomes:
        label = "PASS" if o.outcome == "pass" else o.outcome
        lines.append(f"{label}: {o.test}")
    return "\n".join(lines)
