"""agentbench: what retrieval errors cost a RAG coding agent, measured end to end.

The Python API (see :mod:`agentbench.api` and the README's "Testing your own agent"):

    import agentbench
    result = agentbench.evaluate(pool="core", retriever=my_retriever, agent=my_agent, limit=10)
    scores = agentbench.retrieve(pool="core", retriever=my_retriever)

Names load on first use (PEP 562) so that ``import agentbench`` and the CLI's ``--help`` stay fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "evaluate": "api",
    "retrieve": "api",
    "retrieve_all": "api",
    "RunConfig": "pipeline",
    "RunResult": "pipeline",
    "RunRecord": "pipeline",
    "Task": "agent",
    "AgentReply": "agent",
    "CorpusDoc": "retrieval.plugin",
    "load_pool": "pools",
    "AgentbenchError": "errors",
    "ConfigError": "errors",
    "PoolError": "errors",
    "SandboxError": "errors",
    "ModelError": "errors",
    "RetrievalError": "errors",
}

__all__ = [
    "AgentReply",
    "AgentbenchError",
    "ConfigError",
    "CorpusDoc",
    "ModelError",
    "PoolError",
    "RetrievalError",
    "RunConfig",
    "RunRecord",
    "RunResult",
    "SandboxError",
    "Task",
    "evaluate",
    "load_pool",
    "retrieve",
    "retrieve_all",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from .agent import AgentReply, Task
    from .api import evaluate, retrieve, retrieve_all
    from .errors import AgentbenchError, ConfigError, ModelError, PoolError, RetrievalError, SandboxError
    from .pipeline import RunConfig, RunRecord, RunResult
    from .pools import load_pool
    from .retrieval.plugin import CorpusDoc
