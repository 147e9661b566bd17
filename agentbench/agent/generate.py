"""The agent step: render the condition's prompt for a task, ask the LLM, extract the code."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from ..llm.client import LLMClient
from .extract import extract_code
from .grammar import check_schemas
from .loop import run_tool_loop
from .prompts import PromptTemplate, Task, load_template
from .protocol import protocol_for
from .tools import TOOL_SCHEMAS, Budget

__all__ = ["Agent", "AgentLike", "Generation", "Usage", "GENERATION_SCHEMA_VERSION"]

GENERATION_SCHEMA_VERSION = 1


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Generation(BaseModel):
    """One generation for a (task, condition): everything the run stage records about the LLM step."""

    schema_version: int = GENERATION_SCHEMA_VERSION
    task_id: str
    condition: str
    model: str
    messages: list[dict[str, Any]]
    """The prompt as sent (system and user messages; with tools, the whole conversation)."""
    response: str = ""
    """The raw reply text ("" on ``llm_error``)."""
    code: str = ""
    """The extracted solution; "" when the reply held no function."""
    function_name: str
    usage: Usage = Usage()
    cost_usd: float = 0.0
    """Cost of the call that produced the reply (also when served from the cache)."""
    cached: bool = False
    error: str | None = None
    """Set when the LLM call failed after retries (an ``llm_error``, not a model failure), or when an agent
    plug-in raised or returned something unusable (an ``agent_error``, a failure of the agent under test)."""
    error_source: Literal["llm", "agent"] = "llm"
    attempts: int = 0
    llm_seconds: float = 0.0
    """Time waiting for the LLM (0 for cache hits)."""
    seconds: float = 0.0
    """Wall time of the whole step."""
    trajectory: list[dict[str, Any]] = []
    """With tools: every reply (its tool calls and tokens) and tool result, in order."""
    tool_stats: dict[str, Any] | None = None
    """With tools: turns, tool calls (valid, invalid), searches, test runs, searches after a failing
    run_tests, whether the agent submitted, and the budget it ran out of (None if none)."""

    @property
    def status(self) -> Literal["ok", "llm_error", "agent_error", "no_code"]:
        if self.error is not None:
            return "agent_error" if self.error_source == "agent" else "llm_error"
        return "ok" if self.code else "no_code"


class AgentLike(Protocol):
    """What the run stage drives: the built-in :class:`Agent` and plug-in agents (:mod:`.plugin`).

    ``task.tools`` is set for the tool-using conditions (see :mod:`.tools`)."""

    model: str

    async def generate(self, task: Task, condition: str) -> Generation: ...


class Agent:
    """The built-in agent: one LiteLLM call per task with the condition's prompt template. Plug-in agents
    (:mod:`.plugin`) implement the same ``generate(task, condition) -> Generation``.

    ``await Agent(client).generate(task, condition)``; templates come from ``prompt`` (a directory of
    ``<condition>.md`` files or one file) or the default ``prompts/`` directory."""

    def __init__(
        self, llm: LLMClient, prompt: str | Path | None = None, budget: Budget | None = None
    ) -> None:
        self.llm = llm
        self.prompt = prompt
        self.budget = budget or Budget()
        self._templates: dict[str, PromptTemplate] = {}
        self.protocol = protocol_for(llm)
        """How tool calls travel (:mod:`.protocol`): native for API models, a grammar for ``local/``."""
        if getattr(self.protocol, "constrained", False):
            check_schemas(TOOL_SCHEMAS)  # a schema no grammar can express stops the run here, at start

    def template(self, condition: str) -> PromptTemplate:
        if condition not in self._templates:
            self._templates[condition] = load_template(condition, self.prompt)
        return self._templates[condition]

    def messages(self, task: Task, condition: str) -> list[dict[str, str]]:
        return self.template(condition).render(task)

    async def generate(self, task: Task, condition: str) -> Generation:
        """Prompt the model for ``task`` under ``condition`` and extract its code. Never raises for a
        failed request (see :class:`Generation.error`); raises ModelError/ConfigError for fatal ones."""
        started = time.perf_counter()
        messages = self.messages(task, condition)
        fields: dict[str, Any]
        if task.tools is not None:
            loop = await run_tool_loop(
                self.llm, messages, task.tools, task.function_name, self.budget, self.protocol
            )
            fields = dict(
                messages=loop.messages,
                response=loop.response,
                code=loop.code,
                usage=Usage(prompt_tokens=loop.prompt_tokens, completion_tokens=loop.completion_tokens),
                cost_usd=loop.cost_usd,
                cached=loop.cached,
                error=loop.error,
                llm_seconds=loop.llm_seconds,
                trajectory=loop.trajectory,
                tool_stats=loop.stats,
            )
        else:
            result = await self.llm.complete(messages)
            fields = dict(
                messages=messages,
                response=result.text,
                code=extract_code(result.text, task.function_name) if result.ok else "",
                usage=Usage(prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens),
                cost_usd=result.cost_usd,
                cached=result.cached,
                error=result.error,
                attempts=result.attempts,
                llm_seconds=0.0 if result.cached else result.latency_s,
            )
        return Generation(
            task_id=task.task_id,
            condition=condition,
            model=self.llm.model,
            function_name=task.function_name,
            seconds=time.perf_counter() - started,
            **fields,
        )
