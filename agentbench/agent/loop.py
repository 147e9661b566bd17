"""The tool-calling loop of the built-in agent (conditions ``agent`` and ``agent_rag``).

The model is prompted with the condition's template plus the tools, then alternates replies and tool
results until it submits, answers with a function and no call, or runs out of budget (:class:`.Budget`;
it is then scored on the last code it wrote, tested or submitted). Every step is recorded with its tokens.
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

from ..llm.client import LLMClient, LLMResult
from .extract import extract_code
from .tools import (
    MAX_K,
    TOOL_NAMES,
    TOOL_SCHEMAS,
    Budget,
    ParsedCall,
    Tools,
    format_search,
    format_tests,
    parse_native_arguments,
    parse_text_calls,
    text_protocol,
)

__all__ = ["LoopResult", "run_tool_loop"]

NUDGE = (
    "Use the tools: call run_tests to check a function against the visible tests, search_code to look for "
    "code, and submit with your final function."
)
TEXT_NUDGE = NUDGE + (
    ' Write each call as <tool_call>\n{"name": "run_tests", "arguments": {"code": "def ..."}}\n</tool_call>'
)


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
    submitted: bool = False
    budget_exhausted: str | None = None
    tests_failed: bool = False
    """a run_tests call has reported a failing visible test"""


def _system_note(messages: list[dict[str, Any]], note: str) -> list[dict[str, Any]]:
    out = [dict(m) for m in messages]
    if out and out[0]["role"] == "system":
        out[0]["content"] = out[0]["content"].rstrip() + "\n\n" + note
    else:
        out.insert(0, {"role": "system", "content": note})
    return out


def _calls(result: LLMResult, native: bool) -> tuple[list[ParsedCall], list[str]]:
    """The calls of a reply and their ids (native function calls, else the text protocol's blocks)."""
    if native and result.tool_calls:
        parsed = [
            ParsedCall(c.name, parse_native_arguments(c.arguments), c.arguments) for c in result.tool_calls
        ]
        return parsed, [c.id or f"call_{i}" for i, c in enumerate(result.tool_calls)]
    parsed = parse_text_calls(result.text)
    return parsed, [f"call_{i}" for i in range(len(parsed))]


async def run_tool_loop(
    llm: LLMClient,
    messages: list[dict[str, Any]],
    tools: Tools,
    function_name: str,
    budget: Budget,
    native: bool,
) -> LoopResult:
    started = time.perf_counter()
    if native:
        note = "The visible tests run_tests uses are:\n" + "\n".join(tools.visible_tests)
        note += "\nCall submit with your final function when you are done."
    else:
        note = text_protocol(tools.visible_tests)
    messages = _system_note(messages, note)
    out = LoopResult(messages=messages)
    n = _Counters()
    last_code = ""
    schemas = TOOL_SCHEMAS if native else None
    while True:
        if n.turns >= budget.max_turns:
            n.budget_exhausted = "turns"
            break
        if out.prompt_tokens + out.completion_tokens >= budget.max_tokens:
            n.budget_exhausted = "tokens"
            break
        if budget.max_seconds is not None and time.perf_counter() - started >= budget.max_seconds:
            n.budget_exhausted = "seconds"
            break
        result = await llm.complete(messages, schemas)
        n.turns += 1
        if not result.ok:
            if n.turns > 1 and "ContextWindowExceeded" in (result.error or ""):
                n.budget_exhausted = "context"  # the conversation outgrew the model: score the last code
            else:
                out.error = result.error
            break
        out.prompt_tokens += result.prompt_tokens
        out.completion_tokens += result.completion_tokens
        out.cost_usd += result.cost_usd
        out.cached = out.cached and result.cached
        out.llm_seconds += 0.0 if result.cached else result.latency_s
        out.response = result.text
        calls, ids = _calls(result, native)
        out.trajectory.append(
            {
                "type": "assistant",
                "content": result.text,
                "tool_calls": [{"name": c.name, "arguments": c.raw} for c in calls],
                "prompt_tokens": result.prompt_tokens,
                "completion_tokens": result.completion_tokens,
                "cached": result.cached,
            }
        )
        if native and result.tool_calls:
            messages.append(
                {
                    "role": "assistant",
                    "content": result.text or None,
                    "tool_calls": [
                        {"id": i, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                        for i, c in zip(ids, result.tool_calls, strict=True)
                    ],
                }
            )
        else:
            messages.append({"role": "assistant", "content": result.text})
        if not calls:
            n.replies_without_call += 1
            code = extract_code(result.text, function_name)
            if code:  # a plain answer with a function: taken as the submission
                last_code, n.submitted = code, True
                break
            nudge = NUDGE if native else TEXT_NUDGE
            messages.append({"role": "user", "content": nudge})
            out.trajectory.append({"type": "user", "content": nudge})
            continue
        replies: list[tuple[str, str, str]] = []  # (id, name, text)
        done = False
        for call, call_id in zip(calls, ids, strict=True):
            if n.tool_calls >= budget.max_tool_calls:
                n.budget_exhausted = "tool_calls"
                done = True
                break
            n.tool_calls += 1
            text, code, valid = await _run_tool(call, tools, function_name, n)
            if code:
                last_code = code
            n.valid_tool_calls += valid
            n.invalid_tool_calls += not valid
            n.lenient_tool_calls += valid and call.lenient
            out.trajectory.append(
                {
                    "type": "tool",
                    "name": call.name or "(unparsed)",
                    "arguments": call.raw,
                    "result": text,
                    "valid": valid,
                }
            )
            replies.append((call_id, call.name, text))
            if call.name == "submit" and valid:
                n.submitted = True
                done = True
                break
        if native and result.tool_calls:
            answered = {i for i, _, _ in replies}
            for i, name, text in replies:
                messages.append({"role": "tool", "tool_call_id": i, "name": name, "content": text})
            for i, c in zip(ids, result.tool_calls, strict=True):  # every call needs an answer
                if i not in answered:
                    messages.append({"role": "tool", "tool_call_id": i, "name": c.name, "content": "not run"})
        elif replies:
            body = "\n".join(f"<tool_response>\n{text}\n</tool_response>" for _, _, text in replies)
            messages.append({"role": "user", "content": body})
        if done:
            break
    out.code = last_code
    out.messages = messages
    out.stats = {
        "turns": n.turns,
        "tool_calls": n.tool_calls,
        "valid_tool_calls": n.valid_tool_calls,
        "invalid_tool_calls": n.invalid_tool_calls,
        "lenient_tool_calls": n.lenient_tool_calls,
        "replies_without_call": n.replies_without_call,
        "searches": n.searches,
        "test_runs": n.test_runs,
        "searches_after_failing_tests": n.searches_after_failing_tests,
        "submitted": n.submitted,
        "budget_exhausted": n.budget_exhausted,
        "protocol": "native" if native else "text",
    }
    return out


def _code_arg(call: ParsedCall, function_name: str) -> str | None:
    raw = (call.arguments or {}).get("code")
    if not isinstance(raw, str) or not raw.strip():
        return None
    return extract_code(raw, function_name) or extract_code(f"```python\n{raw}\n```", function_name) or None


async def _run_tool(
    call: ParsedCall, tools: Tools, function_name: str, n: _Counters
) -> tuple[str, str, bool]:
    """(result text, code the call carried, whether the call was valid). Tool failures become text."""
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
        return "submitted", code, True
    except Exception as exc:  # a tool that fails is the model's to see, never the run's end
        return f"error: {type(exc).__name__}: {json.dumps(str(exc))[1:-1]}", "", True
