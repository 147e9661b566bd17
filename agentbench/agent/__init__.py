"""Agent stage: prompts, code extraction, one-shot generation, the tool loop and plug-in agents, over an
:class:`~agentbench.llm.LLMClient` (the transport lives in :mod:`agentbench.llm`).

    client = LLMClient("local/qwen2.5-coder-1.5b", concurrency=1)
    agent = Agent(client)                           # templates from prompts/ (or Agent(client, prompt=PATH))
    task = Task.from_canonical(query.query_id, query.query, canonical.code, context=[...], tests=query.test_suite)
    generation = await agent.generate(task, "rag")  # Generation: messages, response, code, usage, cost, ...

Names are imported on first use (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

_EXPORTS = {
    "CONDITIONS": "prompts",
    "GENERATION_SCHEMA_VERSION": "generate",
    "Agent": "generate",
    "AgentReply": "plugin",
    "PluginAgent": "plugin",
    "plugin_agent": "plugin",
    "Generation": "generate",
    "PromptTemplate": "prompts",
    "Task": "prompts",
    "Usage": "generate",
    "extract_code": "extract",
    "function_signature": "prompts",
    "load_template": "prompts",
    "render_context": "prompts",
}

__all__ = [
    "CONDITIONS",
    "GENERATION_SCHEMA_VERSION",
    "Agent",
    "AgentReply",
    "Generation",
    "PluginAgent",
    "PromptTemplate",
    "Task",
    "Usage",
    "extract_code",
    "function_signature",
    "load_template",
    "plugin_agent",
    "render_context",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:
    from .extract import extract_code
    from .generate import GENERATION_SCHEMA_VERSION, Agent, Generation, Usage
    from .plugin import AgentReply, PluginAgent, plugin_agent
    from .prompts import CONDITIONS, PromptTemplate, Task, function_signature, load_template, render_context
