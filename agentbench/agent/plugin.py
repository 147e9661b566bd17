"""A user's agent behind the built-in agent's interface (``--agent module:attr`` / ``agent=``).

Accepted:

- a LangChain ``Runnable`` (anything with ``ainvoke``/``invoke``), invoked with a dict of the prompt-template
  variables (``task``, ``signature``, ``function_name``, ``context``: the snippets as rendered for
  templates) plus ``snippets`` (the context snippets as a list of strings);
- a callable, sync or ``async``, taking one argument: the :class:`~.prompts.Task` (``description``,
  ``signature``, ``function_name``, ``context``). Sync callables run in worker threads.

The agent is never told the condition: it sees a task and its context, as in production. It may return
code or a message containing code: a ``str``, a LangChain message (its ``content``; ``usage_metadata``
gives token counts), a dict with ``code``/``content``/``text`` (and optionally ``prompt_tokens``,
``completion_tokens``, ``cost_usd``), or an :class:`AgentReply`. The code is extracted as from an LLM
reply. A plug-in that raises or returns another type yields an ``agent_error`` record: a failure of the
agent under test, counted and shown apart. Calls are bounded by the run's ``--concurrency``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..llm.client import PerLoopSemaphore
from ..plugins import accepts, describe, load_spec
from .extract import extract_code
from .generate import Generation, Usage
from .prompts import Task

__all__ = ["AgentReply", "PluginAgent", "plugin_agent"]


@dataclass
class AgentReply:
    """What an agent plug-in may return to report usage along with its code."""

    code: str
    """Code, or a message containing code."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


class _Unusable(Exception):
    pass


def _is_runnable(obj: Any) -> bool:
    return not inspect.isclass(obj) and (
        callable(getattr(obj, "ainvoke", None)) or callable(getattr(obj, "invoke", None))
    )


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _text(content: Any) -> str:
    """A message's content: a string, or LangChain's list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p if isinstance(p, str) else p.get("text", "") for p in content if isinstance(p, str | dict)]
        return "".join(parts)
    raise _Unusable(f"returned a message whose content is {type(content).__name__}")


def _reply(out: Any) -> AgentReply:
    """Normalise what the plug-in returned (see the module docstring)."""
    if isinstance(out, AgentReply):
        return out
    if isinstance(out, str):
        return AgentReply(out)
    if isinstance(out, dict):
        body = next((out[k] for k in ("code", "content", "text") if k in out), None)
        if body is None:
            raise _Unusable(f"returned a dict without code/content/text (keys: {', '.join(map(str, out))})")
        usage = out.get("usage") if isinstance(out.get("usage"), dict) else out
        return AgentReply(
            _text(body),
            _int(usage.get("prompt_tokens") or usage.get("input_tokens")),
            _int(usage.get("completion_tokens") or usage.get("output_tokens")),
            float(out.get("cost_usd") or 0.0),
        )
    if hasattr(out, "content"):  # a LangChain message
        usage = getattr(out, "usage_metadata", None) or {}
        return AgentReply(
            _text(out.content), _int(usage.get("input_tokens")), _int(usage.get("output_tokens"))
        )
    raise _Unusable(f"returned {type(out).__name__}, expected code as a str (or a message containing code)")


class PluginAgent:
    """``await PluginAgent(obj).generate(task, condition)``, like :class:`~.generate.Agent`."""

    def __init__(self, target: Any, name: str, concurrency: int = 4) -> None:
        if _is_runnable(target):
            self.kind = "runnable"
        elif callable(target) and accepts(target, 1):
            self.kind = "callable"
        elif callable(target):
            raise ConfigError(
                f"agent {name}: it must take one argument (the task); its signature does not fit"
            )
        else:
            raise ConfigError(
                f"agent {name}: {type(target).__name__} is neither a LangChain Runnable nor a callable (task)"
            )
        self.target = target
        self.name = name
        self.concurrency = concurrency
        self.calls = 0
        self._semaphore = PerLoopSemaphore(concurrency)

    @property
    def model(self) -> str:
        """The name records and summaries show, as :attr:`Agent.model` for the built-in agent."""
        return self.name

    def inputs(self, task: Task) -> dict[str, Any]:
        return {**task.variables(), "snippets": list(task.context)}

    async def _call(self, task: Task) -> Any:
        target = self.target
        if self.kind == "runnable":
            if callable(getattr(target, "ainvoke", None)):
                out = await target.ainvoke(self.inputs(task))
            else:
                out = await asyncio.to_thread(target.invoke, self.inputs(task))
        elif _is_async(target):
            out = await target(task)
        else:
            out = await asyncio.to_thread(target, task)
        if inspect.isawaitable(out):
            out = await out
        return out

    async def generate(self, task: Task, condition: str) -> Generation:
        """Never raises for the plug-in's own failures: they become ``agent_error`` generations."""
        started = time.perf_counter()
        messages = [{"role": "input", "content": json.dumps(self.inputs(task), ensure_ascii=False)}]
        error = None
        reply = AgentReply("")
        async with self._semaphore():
            called = time.perf_counter()
            self.calls += 1
            try:
                reply = _reply(await self._call(task))
            except _Unusable as exc:
                error = f"agent {self.name}: {exc}"
            except Exception as exc:  # the agent under test failed on this task
                error = f"agent {self.name} raised {type(exc).__name__}: {exc}"
            waited = time.perf_counter() - called
        return Generation(
            task_id=task.task_id,
            condition=condition,
            model=self.name,
            messages=messages,
            response=reply.code,
            code=extract_code(reply.code, task.function_name) if error is None else "",
            function_name=task.function_name,
            usage=Usage(prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens),
            cost_usd=reply.cost_usd,
            error=error[:2000] if error else None,
            error_source="agent",
            attempts=1,
            llm_seconds=waited,
            seconds=time.perf_counter() - started,
            trajectory=list(task.tools.log) if task.tools is not None else [],
            tool_stats=task.tools.usage() if task.tools is not None else None,
        )


def plugin_agent(agent: Any, concurrency: int = 4) -> PluginAgent:
    """Resolve ``agent`` (an object, or a ``module:attr`` string) into an agent; bad shapes fail here."""
    if isinstance(agent, str):
        return PluginAgent(load_spec(agent, "agent"), agent, concurrency)
    return PluginAgent(agent, describe(agent), concurrency)
