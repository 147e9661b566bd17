"""Constants other stages import without loading numpy (``agentbench --help`` imports them)."""

from __future__ import annotations

__all__ = ["DEFAULT_EMBEDDER", "EMBEDDER_FORMS", "DEFAULT_KS", "DEFAULT_RERANK_K"]

DEFAULT_EMBEDDER = "minilm"
EMBEDDER_FORMS = "minilm, st:<name-or-path>[?query_prompt=...&document_prompt=...], bm25, litellm:<model>"
DEFAULT_KS = (1, 3, 5, 10)
DEFAULT_RERANK_K = 10
"""``--rerank-k``'s default: the candidates reranked per query."""
