"""The offline environment defaults, applied before any heavy library is imported.

Why: huggingface_hub, LiteLLM and Chroma all try the network at import or load time (model lookups, the
remote model-cost map, telemetry). Offline that means long stalls on retries, so agentbench asks for the
local behaviour unless the user already chose otherwise in the environment.

Nothing is set on import: the CLI applies the defaults when it starts, and library code just before it
imports one of those libraries (:mod:`agentbench.llm._litellm` for LiteLLM, :mod:`agentbench.retrieval`
for sentence-transformers and Chroma), so a program using the Python API gets them too.
"""

from __future__ import annotations

import os

__all__ = ["prepare_environment", "with_defaults"]

_DEFAULTS = {
    "HF_HUB_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TOKENIZERS_PARALLELISM": "false",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "ANONYMIZED_TELEMETRY": "False",
}


def prepare_environment() -> None:
    """Set offline/quiet defaults for variables the user has not set (idempotent)."""
    for key, value in _DEFAULTS.items():
        os.environ.setdefault(key, value)


def with_defaults(env: dict[str, str]) -> dict[str, str]:
    """``env`` as :func:`prepare_environment` would leave it, without changing this process's."""
    return {**_DEFAULTS, **env}
