"""Retrieval stage: embedders, exact vector/BM25 search over pools, ExecRetrieval metrics.

Importing this package is cheap: names are loaded on first use (PEP 562), and torch,
sentence-transformers, chromadb, bm25s, LiteLLM and LangChain only when a model is loaded, a store opened
or a LangChain adapter requested. That keeps ``agentbench --help`` fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports
from ._defaults import DEFAULT_EMBEDDER, DEFAULT_KS, EMBEDDER_FORMS

if TYPE_CHECKING:
    from .embcache import EmbeddingCache, default_embedding_cache_path
    from .embedder_spec import EmbedderSpec
    from .embedders import (
        BM25Embedder,
        DenseEmbedder,
        Embedder,
        LiteLLMEmbedder,
        SentenceTransformerEmbedder,
        build_embedder,
        parse_embedder,
    )
    from .evaluate import evaluate_retrieval
    from .hits import Hit, Searcher
    from .metrics import QueryRecord, Ranked, aggregate, confidence_intervals, diagnostics
    from .search import open_searcher

_LAZY = {
    "EmbeddingCache": "embcache",
    "default_embedding_cache_path": "embcache",
    "BM25Embedder": "embedders",
    "DenseEmbedder": "embedders",
    "Embedder": "embedders",
    "LiteLLMEmbedder": "embedders",
    "SentenceTransformerEmbedder": "embedders",
    "parse_embedder": "embedders",
    "build_embedder": "embedders",
    "EmbedderSpec": "embedder_spec",
    "evaluate_retrieval": "evaluate",
    "QueryRecord": "metrics",
    "Ranked": "metrics",
    "aggregate": "metrics",
    "confidence_intervals": "metrics",
    "diagnostics": "metrics",
    "Hit": "hits",
    "Searcher": "hits",
    "open_searcher": "search",
}

__all__ = [
    "DEFAULT_EMBEDDER",
    "DEFAULT_KS",
    "EMBEDDER_FORMS",
    "BM25Embedder",
    "DenseEmbedder",
    "Embedder",
    "EmbedderSpec",
    "EmbeddingCache",
    "Hit",
    "LiteLLMEmbedder",
    "QueryRecord",
    "Ranked",
    "Searcher",
    "SentenceTransformerEmbedder",
    "aggregate",
    "build_embedder",
    "confidence_intervals",
    "default_embedding_cache_path",
    "diagnostics",
    "evaluate_retrieval",
    "open_searcher",
    "parse_embedder",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
