"""agentbench: what retrieval errors cost a RAG coding agent, measured end to end.

The Python API (see :mod:`agentbench.api` and docs/plugins.md):

    import agentbench
    result = agentbench.evaluate(pool="core", retriever=my_retriever, agent=my_agent, limit=10)
    scores = agentbench.retrieve(pool="core", retriever=my_retriever)

Names load on first use (PEP 562) so that ``import agentbench`` and the CLI's ``--help`` stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

_EXPORTS = {
    "evaluate": "api",
    "retrieve": "api",
    "retrieve_all": "api",
    "evaluate_config": "api",
    "evaluate_matrix": "api",
    "RetrievalSettings": "retrieval.settings",
    "RetrievalResult": "retrieval.results",
    "RunSummary": "analysis.summary",
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
    "RetrievalResult",
    "RetrievalSettings",
    "RunConfig",
    "RunRecord",
    "RunResult",
    "RunSummary",
    "SandboxError",
    "Task",
    "evaluate",
    "evaluate_config",
    "evaluate_matrix",
    "load_pool",
    "retrieve",
    "retrieve_all",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:
    from .agent import AgentReply, Task
    from .analysis.summary import RunSummary
    from .api import evaluate, evaluate_config, evaluate_matrix, retrieve, retrieve_all
    from .errors import AgentbenchError, ConfigError, ModelError, PoolError, RetrievalError, SandboxError
    from .pipeline import RunConfig, RunRecord, RunResult
    from .pools import load_pool
    from .retrieval.plugin import CorpusDoc
    from .retrieval.results import RetrievalResult
    from .retrieval.settings import RetrievalSettings
