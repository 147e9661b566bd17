"""The tool-calling loop of the built-in agent (conditions ``agent`` and ``agent_rag``).

The model is prompted with the condition's template plus the tools, then alternates replies and tool
results until it submits, answers with a function and no call, or runs out of budget (:class:`.Budget`;
it is then scored on the last code it wrote, tested or submitted). Under the test-first rule
(:attr:`.Budget.test_first`, the default) an answer or a submit before the first ``run_tests`` is refused
with a note; a grammar-constrained model cannot even write one. Every step is recorded with its tokens.
Each reply comes from the LLM response cache when the same conversation was seen before, and tool results
are deterministic (exact search, cached sandbox verdicts), so a rerun replays the whole trajectory with
zero LLM calls.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

from ..llm.client import LLMClient
from .extract import extract_code
from .protocol import ToolProtocol, Turn
from .tools import (
    MAX_K,
    TEST_FIRST_RULE,
    TOOL_NAMES,
    Budget,
    ParsedCall,
    Tools,
    format_search,
    format_tests,
)

__all__ = ["LoopResult", "run_tool_loop"]


@dataclass
class LoopResult:
    messages: list[dict[str, Any]]
    response: str = ""
    code: str = ""
    error: str | None = None
    trajectory: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cached: bool = True
    llm_seconds: float = 0.0

    def add(self, turn: Turn) -> None:
        """Count a reply's tokens and record it in the trajectory."""
        result = turn.result
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        self.cost_usd += result.cost_usd
        self.cached = self.cached and result.cached
        self.llm_seconds += 0.0 if result.cached else result.latency_s
        self.response = result.text
        step = {
            "type": "assistant",
            "content": result.text,
            "tool_calls": [{"name": c.name, "arguments": c.raw} for c in turn.calls],
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
            "cached": result.cached,
        }
        if turn.grammar is not None:
            step["grammar"] = turn.grammar
        self.trajectory.append(step)


@dataclass
class _Counters:
    turns: int = 0
    tool_calls: int = 0
    valid_tool_calls: int = 0
    invalid_tool_calls: int = 0
    lenient_tool_calls: int = 0
    """valid calls written as a fenced JSON block rather than in <tool_call> tags"""
    replies_without_call: int = 0
    searches: int = 0
    test_runs: int = 0
    searches_after_failing_tests: int = 0
    refused_untested: int = 0
    """answers and submits refused by the test-first rule (before any run_tests)"""
    submitted: bool = False
    budget_exhausted: str | None = None
    tests_failed: bool = False
    """a run_tests call has reported a failing visible test"""
    last_cost: int = 0
    """prompt plus completion tokens of the last reply (the next one costs a little more)"""

    def spent(self, budget: Budget, used: int, elapsed: float) -> str | None:
        """The budget a new reply would exceed, or None."""
        if self.turns >= budget.max_turns:
            return "turns"
        if used >= budget.max_tokens:
            return "tokens"
        if budget.max_seconds is not None and elapsed >= budget.max_seconds:
            return "seconds"
        return None

    def last_reply(self, budget: Budget, used: int) -> bool:
        """Whether the next reply is the last the budget allows (its turn, its tool call, or about
        its tokens: the next reply is expected to cost a quarter more than the last)."""
        return (
            self.turns + 1 >= budget.max_turns
            or self.tool_calls + 1 >= budget.max_tool_calls
            or used + self.last_cost * 5 // 4 >= budget.max_tokens
        )

    def untested(self, test_first: bool, final: bool) -> bool:
        """Whether the test-first rule still refuses an answer or a submit (no run_tests yet, and not the
        last reply the budget allows)."""
        return test_first and self.test_runs == 0 and not final

    def stats(self, protocol: ToolProtocol) -> dict[str, Any]:
        stats = {k: v for k, v in vars(self).items() if k not in ("tests_failed", "last_cost")}
        stats["protocol"] = protocol.name
        if getattr(protocol, "constrained", False):
            stats["constrained"] = True
        return stats


def _system_note(messages: list[dict[str, Any]], note: str) -> list[dict[str, Any]]:
    out = [dict(m) for m in messages]
    if out and out[0]["role"] == "system":
        out[0]["content"] = out[0]["content"].rstrip() + "\n\n" + note
    else:
        out.insert(0, {"role": "system", "content": note})
    return out


async def run_tool_loop(
    llm: LLMClient,
    messages: list[dict[str, Any]],
    tools: Tools,
    function_name: str,
    budget: Budget,
    protocol: ToolProtocol,
) -> LoopResult:
    """Replies and tool results until the model submits, answers with the function and no call, or a
    budget runs out; ``protocol`` says how calls travel (:mod:`.protocol`)."""
    started = time.perf_counter()
    test_first = budget.test_first and bool(tools.visible_tests)  # the rule needs tests to run
    messages = _system_note(messages, protocol.system_note(tools.visible_tests, test_first))
    out = LoopResult(messages=messages)
    n = _Counters()
    last_code = ""
    while True:
        used = out.prompt_tokens + out.completion_tokens
        n.budget_exhausted = n.spent(budget, used, time.perf_counter() - started)
        if n.budget_exhausted:
            break
        final = n.last_reply(budget, used)
        must_test = n.untested(test_first, final)
        turn = await protocol.ask(llm, messages, function_name, final, must_test)
        n.turns += 1
        if not turn.result.ok:
            if n.turns > 1 and "ContextWindowExceeded" in (turn.result.error or ""):
                n.budget_exhausted = "context"  # the conversation outgrew the model: score the last code
            else:
                out.error = turn.result.error
            break
        out.add(turn)
        n.last_cost = turn.result.prompt_tokens + turn.result.completion_tokens
        messages.append(protocol.assistant_message(turn))
        if not turn.calls:
            n.replies_without_call += 1
            code = extract_code(turn.result.text, function_name)
            if code and not must_test:  # a plain answer: the submission
                last_code, n.submitted = code, True
                break
            last_code = code or last_code
            n.refused_untested += bool(code)
            nudge = protocol.test_nudge if code else protocol.nudge
            messages.append({"role": "user", "content": nudge})
            out.trajectory.append({"type": "user", "content": nudge})
            continue
        replies: list[tuple[str, str, str]] = []  # (id, name, text)
        for call, call_id in zip(turn.calls, turn.ids, strict=True):
            if n.tool_calls >= budget.max_tool_calls:
                n.budget_exhausted = "tool_calls"
                break
            n.tool_calls += 1
            untested = n.untested(test_first, final)  # a run_tests earlier in this turn counts
            text, code, valid = await _run_tool(call, tools, function_name, n, untested)
            last_code = code or last_code
            n.valid_tool_calls += valid
            n.invalid_tool_calls += not valid
            n.lenient_tool_calls += valid and call.lenient
            name = call.name or "(unparsed)"
            out.trajectory.append(
                {"type": "tool", "name": name, "arguments": call.raw, "result": text, "valid": valid}
            )
            replies.append((call_id, call.name, text))
            if call.name == "submit" and valid and not untested:
                n.submitted = True
                break
        messages.extend(protocol.result_messages(turn, replies))
        if n.submitted or n.budget_exhausted:
            break
    out.code, out.messages, out.stats = last_code, messages, n.stats(protocol)
    return out


def _code_arg(call: ParsedCall, function_name: str) -> str | None:
    raw = (call.arguments or {}).get("code")
    if not isinstance(raw, str) or not raw.strip():
        return None
    return extract_code(raw, function_name) or extract_code(f"```python\n{raw}\n```", function_name) or None


async def _run_tool(
    call: ParsedCall, tools: Tools, function_name: str, n: _Counters, must_test: bool = False
) -> tuple[str, str, bool]:
    """(result text, code the call carried, whether the call was valid). Tool failures become text;
    ``must_test``: a submit is refused (the test-first rule), its code kept as the last written."""
    if call.name not in TOOL_NAMES:
        known = ", ".join(TOOL_NAMES)
        what = f"unknown tool {call.name!r}" if call.name else "the call is not valid JSON"
        return f"error: {what}; the tools are {known}", "", False
    if call.arguments is None:
        return f"error: the arguments of {call.name} must be a JSON object", "", False
    try:
        if call.name == "search_code":
            query = call.arguments.get("query")
            if not isinstance(query, str) or not query.strip():
                return "error: search_code needs a non-empty string 'query'", "", False
            k = call.arguments.get("k", 3)
            k = (
                max(1, min(MAX_K, int(k)))
                if isinstance(k, int | float | str) and str(k).strip().isdigit()
                else 3
            )
            n.searches += 1
            n.searches_after_failing_tests += n.tests_failed
            results = await asyncio.to_thread(tools.search_fn, query, k)
            return format_search(results), "", True
        code = _code_arg(call, function_name)
        if code is None:
            return f"error: {call.name} needs 'code' holding a function named {function_name}", "", False
        if call.name == "run_tests":
            n.test_runs += 1
            outcomes = await asyncio.to_thread(tools.run_tests_fn, code)
            n.tests_failed = n.tests_failed or any(o.outcome != "pass" for o in outcomes)
            return format_tests(outcomes), code, True
        if must_test:
            n.refused_untested += 1
            return f"not submitted: {TEST_FIRST_RULE}", code, True
        return "submitted", code, True
    except Exception as exc:  # a tool that fails is the model's to see, never the run's end
        return f"error: {type(exc).__name__}: {json.dumps(str(exc))[1:-1]}", "", True
