"""Exception tree for agentbench.

AgentbenchError            root; the CLI prints its message on one line and exits 2
├── ConfigError            bad flag, unknown model/embedder, missing API key
├── PoolError              malformed or missing pool files
├── SandboxError           Docker engine down, image missing, executor failure
├── ModelError             LLM or embedding provider failure
└── RetrievalError         vector store problems

Third-party exceptions are translated where they are raised (``raise PoolError(...) from exc``) so the
message names the likely cause and the fix.
"""

from __future__ import annotations

__all__ = ["AgentbenchError", "ConfigError", "PoolError", "SandboxError", "ModelError", "RetrievalError"]


class AgentbenchError(Exception):
    """Root of all errors agentbench reports to users."""


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
