"""Agent stage: talking to LLMs (LiteLLM, plus the offline ``local/`` models), prompts, code extraction.

    client = LLMClient("local/qwen2.5-coder-1.5b", concurrency=1)
    client.check()                                  # ConfigError in < 1 s if a key is missing
    agent = Agent(client)                           # templates from prompts/ (or Agent(client, prompt=PATH))
    task = Task.from_canonical(query.query_id, query.query, canonical.code, context=[...], tests=query.test_suite)
    generation = await agent.generate(task, "rag")  # Generation: messages, response, code, usage, cost, ...
    client.stats                                    # calls, cache_hits, prompt/completion tokens, cost_usd

LiteLLM and llama-cpp-python are imported lazily, on the first request.
"""

from __future__ import annotations

from ._litellm import offline_defaults
from .cache import ResponseCache
from .extract import extract_code
from .generate import GENERATION_SCHEMA_VERSION, Agent, Generation, Usage
from .llm import DEFAULT_MODEL, LLMClient, LLMResult, LLMStats, check_model, redact
from .prompts import CONDITIONS, PromptTemplate, Task, function_signature, load_template, render_context
from .weights import LOCAL_MODELS, LocalModelSpec, cache_dir, ensure_model

offline_defaults()

__all__ = [
    "CONDITIONS",
    "DEFAULT_MODEL",
    "GENERATION_SCHEMA_VERSION",
    "LOCAL_MODELS",
    "Agent",
    "Generation",
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
    "redact",
    "render_context",
]
