"""Exception tree for agentbench.

AgentbenchError            root; the CLI prints its message on one line and exits 2
├── ConfigError            bad flag, unknown model/embedder, missing API key
├── PoolError              malformed or missing pool files
├── SandboxError           Docker engine down, image missing, executor failure
├── ModelError             LLM or embedding provider failure
├── RetrievalError         vector store problems
└── RunError               a run that could not finish: too many records lost to outages (exit 2), or an
                           interrupt (exit 130); finished records are kept and ``--resume`` continues

Third-party exceptions are translated where they are raised (``raise PoolError(...) from exc``) so the
message names the likely cause and the fix.
"""

from __future__ import annotations

__all__ = [
    "AgentbenchError",
    "ConfigError",
    "PoolError",
    "SandboxError",
    "ModelError",
    "RetrievalError",
    "RunError",
    "Interrupted",
]


class AgentbenchError(Exception):
    """Root of all errors agentbench reports to users."""

    exit_code = 2


class ConfigError(AgentbenchError):
    """Invalid configuration or command-line input."""


class PoolError(AgentbenchError):
    """A pool cannot be found, read or trusted."""


class SandboxError(AgentbenchError):
    """The execution sandbox cannot run code."""


class ModelError(AgentbenchError):
    """An LLM or embedding provider failed."""


class RetrievalError(AgentbenchError):
    """The vector store or retriever failed."""


class RunError(AgentbenchError):
    """A run that could not finish its work; what it finished is kept."""


class Interrupted(RunError):
    """Ctrl-C or SIGTERM stopped a run; the message says how to continue it."""

    exit_code = 130
