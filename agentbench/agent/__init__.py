"""Agent stage: talking to LLMs (LiteLLM, plus the offline ``local/`` models), prompts, code extraction.

    client = LLMClient("local/qwen2.5-coder-1.5b", concurrency=1)
    client.check()                                  # ConfigError in < 1 s if a key is missing
    agent = Agent(client)                           # templates from prompts/ (or Agent(client, prompt=PATH))
    task = Task.from_canonical(query.query_id, query.query, canonical.code, context=[...], tests=query.test_suite)
    generation = await agent.generate(task, "rag")  # Generation: messages, response, code, usage, cost, ...
    client.stats                                    # calls, cache_hits, prompt/completion tokens, cost_usd

Names are imported on first use (PEP 562), and LiteLLM and llama-cpp-python only on the first request, so
``from agentbench.agent import check_model`` stays cheap for the CLI's fail-fast path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports
from ._litellm import offline_defaults

offline_defaults()

_EXPORTS = {
    "CONDITIONS": "prompts",
    "DEFAULT_MODEL": "check",
    "GENERATION_SCHEMA_VERSION": "generate",
    "LOCAL_MODELS": "weights",
    "Agent": "generate",
    "AgentReply": "plugin",
    "PluginAgent": "plugin",
    "plugin_agent": "plugin",
    "Generation": "generate",
    "LLMClient": "llm",
    "LLMResult": "llm",
    "LLMStats": "llm",
    "LocalModelSpec": "weights",
    "PromptTemplate": "prompts",
    "ResponseCache": "cache",
    "Task": "prompts",
    "Usage": "generate",
    "cache_dir": "weights",
    "check_model": "check",
    "ensure_model": "weights",
    "extract_code": "extract",
    "function_signature": "prompts",
    "load_template": "prompts",
    "redact": "check",
    "render_context": "prompts",
}

__all__ = [
    "CONDITIONS",
    "DEFAULT_MODEL",
    "GENERATION_SCHEMA_VERSION",
    "LOCAL_MODELS",
    "Agent",
    "AgentReply",
    "Generation",
    "PluginAgent",
    "LLMClient",
    "LLMResult",
    "LLMStats",
    "LocalModelSpec",
    "PromptTemplate",
    "ResponseCache",
    "Task",
    "Usage",
    "cache_dir",
    "check_model",
    "ensure_model",
    "extract_code",
    "function_signature",
    "load_template",
    "plugin_agent",
    "redact",
    "render_context",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:
    from .cache import ResponseCache
    from .check import DEFAULT_MODEL, check_model, redact
    from .extract import extract_code
    from .generate import GENERATION_SCHEMA_VERSION, Agent, Generation, Usage
    from .llm import LLMClient, LLMResult, LLMStats
    from .plugin import AgentReply, PluginAgent, plugin_agent
    from .prompts import CONDITIONS, PromptTemplate, Task, function_signature, load_template, render_context
    from .weights import LOCAL_MODELS, LocalModelSpec, cache_dir, ensure_model
