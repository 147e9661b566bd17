"""How the tool loop talks to a model: native function calling, or the text protocol (optionally under a
decoding grammar). The loop (:mod:`.loop`) is the same for both; a protocol decides what a request
carries, how calls are read from a reply and how the conversation records calls and results.

- :class:`NativeProtocol` (API models): the tools as OpenAI schemas, calls in ``tool_calls``, results as
  ``tool`` messages answering each call id (a reply that writes a call as text is read as text).
- :class:`TextProtocol` (``local/`` models): the tools described in the system prompt in Qwen's format,
  calls parsed from ``<tool_call>`` blocks, results in one user message of ``<tool_response>`` blocks.
  ``constrained`` (the default for ``local/``) samples every reply under the grammar of
  :mod:`.grammar`: one call to an offered tool with valid arguments, or a final code block; the last
  reply the budget allows may only submit or answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..llm.client import LLMClient, LLMResult
from .grammar import reply_grammar
from .tools import (
    TEST_FIRST_RULE,
    TOOL_SCHEMAS,
    ParsedCall,
    final_instruction,
    parse_native_arguments,
    parse_text_calls,
    text_protocol,
)

__all__ = ["NativeProtocol", "TextProtocol", "ToolProtocol", "Turn", "protocol_for"]

NUDGE = (
    "Use the tools: call run_tests to check a function against the visible tests, search_code to look for "
    "code, and submit with your final function."
)
CALL_FORMAT = (
    ' Write each call as <tool_call>\n{"name": "run_tests", "arguments": {"code": "def ..."}}\n</tool_call>'
)
TEXT_NUDGE = NUDGE + CALL_FORMAT
TEST_NUDGE = TEST_FIRST_RULE + " Call run_tests with your function now."
FINAL_TOOLS = ("submit",)
"""What the last reply a budget allows may call (besides answering with a code block)."""
CHECK_TOOLS = ("search_code", "run_tests")
"""What a reply may call before the visible tests have run under the test-first rule (no answer either)."""


@dataclass
class Turn:
    """One reply's calls, with the ids their results answer (native calls keep the provider's)."""

    result: LLMResult
    calls: list[ParsedCall]
    ids: list[str]
    native: bool
    grammar: str | None = None
    """which grammar constrained the reply: ``reply`` (any tool or an answer), ``final`` (submit or an
    answer), ``test_first`` (search_code or run_tests), or None"""


class ToolProtocol:
    name = "text"
    nudge = TEXT_NUDGE
    test_nudge = TEST_NUDGE + CALL_FORMAT
    """the reply to an answer or a submit the test-first rule refuses"""

    def system_note(self, visible_tests: Sequence[str], test_first: bool = False) -> str:
        return text_protocol(visible_tests, test_first)

    async def ask(
        self,
        llm: LLMClient,
        messages: list[dict[str, Any]],
        function_name: str,
        final: bool,
        must_test: bool = False,
    ) -> Turn:
        """The model's next reply. ``final``: the budget allows no reply after this one; ``must_test``:
        the test-first rule still forbids an answer or a submit (the loop enforces it where no grammar
        does)."""
        return self.read(await llm.complete(messages))

    def read(self, result: LLMResult, grammar: str | None = None) -> Turn:
        if result.tool_calls:
            calls = [
                ParsedCall(c.name, parse_native_arguments(c.arguments), c.arguments)
                for c in result.tool_calls
            ]
            ids = [c.id or f"call_{i}" for i, c in enumerate(result.tool_calls)]
            return Turn(result, calls, ids, native=True)
        calls = parse_text_calls(result.text)
        return Turn(result, calls, [f"call_{i}" for i in range(len(calls))], native=False, grammar=grammar)

    @staticmethod
    def assistant_message(turn: Turn) -> dict[str, Any]:
        if not turn.native:
            return {"role": "assistant", "content": turn.result.text}
        return {
            "role": "assistant",
            "content": turn.result.text or None,
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for i, c in zip(turn.ids, turn.result.tool_calls, strict=True)
            ],
        }

    @staticmethod
    def result_messages(turn: Turn, replies: list[tuple[str, str, str]]) -> list[dict[str, Any]]:
        """The messages carrying ``replies`` (call id, tool name, result text) back to the model."""
        if not turn.native:
            if not replies:
                return []
            body = "\n".join(f"<tool_response>\n{text}\n</tool_response>" for _, _, text in replies)
            return [{"role": "user", "content": body}]
        out = [
            {"role": "tool", "tool_call_id": i, "name": name, "content": text} for i, name, text in replies
        ]
        answered = {i for i, _, _ in replies}
        for i, c in zip(turn.ids, turn.result.tool_calls, strict=True):  # every call needs an answer
            if i not in answered:
                out.append({"role": "tool", "tool_call_id": i, "name": c.name, "content": "not run"})
        return out


class NativeProtocol(ToolProtocol):
    name = "native"
    nudge = NUDGE
    test_nudge = TEST_NUDGE

    def system_note(self, visible_tests: Sequence[str], test_first: bool = False) -> str:
        note = "The visible tests run_tests uses are:\n" + "\n".join(visible_tests)
        return note + "\n" + final_instruction(test_first)

    async def ask(
        self,
        llm: LLMClient,
        messages: list[dict[str, Any]],
        function_name: str,
        final: bool,
        must_test: bool = False,
    ) -> Turn:
        return self.read(await llm.complete(messages, TOOL_SCHEMAS))


class TextProtocol(ToolProtocol):
    def __init__(self, constrained: bool = False) -> None:
        self.constrained = constrained

    async def ask(
        self,
        llm: LLMClient,
        messages: list[dict[str, Any]],
        function_name: str,
        final: bool,
        must_test: bool = False,
    ) -> Turn:
        if not self.constrained:
            return self.read(await llm.complete(messages))
        if final:
            kind, grammar = "final", reply_grammar(TOOL_SCHEMAS, function_name, FINAL_TOOLS)
        elif must_test:
            kind = "test_first"
            grammar = reply_grammar(TOOL_SCHEMAS, function_name, CHECK_TOOLS, answer=False)
        else:
            kind, grammar = "reply", reply_grammar(TOOL_SCHEMAS, function_name)
        result = await llm.complete(messages, grammar=grammar.gbnf)
        return self.read(result, kind)


def protocol_for(llm: LLMClient) -> ToolProtocol:
    """Native function calling for API models; the grammar-constrained text protocol for ``local/``."""
    return TextProtocol(constrained=True) if llm.is_local else NativeProtocol()
