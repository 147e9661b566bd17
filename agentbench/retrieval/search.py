"""Opening the searcher for a pool and an embedder: BM25 in memory, or a dense embedder's Chroma store.

The ranking interface (:class:`Searcher`, :class:`Hit`) and the exact ranking helpers live in :mod:`.hits`
and are re-exported here, so ``from agentbench.retrieval.search import Hit, Searcher, open_searcher`` keeps
working.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..pools.models import Pool
from .embedders import DenseEmbedder, Embedder
from .hits import QUERY_BLOCK, Hit, Searcher, cosine_scores, rank_exact, tie_key, tie_ranks_for

if TYPE_CHECKING:
    from .embcache import EmbeddingCache

__all__ = [
    "QUERY_BLOCK",
    "Hit",
    "Searcher",
    "tie_key",
    "tie_ranks_for",
    "cosine_scores",
    "rank_exact",
    "open_searcher",
]


def open_searcher(
    pool: Pool,
    embedder: Embedder,
    *,
    store_dir: str | Path = "stores",
    chroma_url: str | None = None,
    embed_cache: EmbeddingCache | None = None,
    progress: bool = True,
) -> Searcher:
    """BM25 in memory, or a dense embedder's Chroma collection (built or reused) for ``pool``; on a
    bundled pool, minilm reads the vectors shipped with the package (:mod:`.bundled`) before its cache."""
    if embedder.sparse:
        from .bm25 import BM25Searcher

        return BM25Searcher(embedder, pool.corpus)
    if not isinstance(embedder, DenseEmbedder):
        raise ConfigError(f"embedder {embedder.name!r} is neither sparse nor dense")
    from .bundled import for_pool
    from .store import open_chroma

    if embed_cache is not None:
        embedder.use_cache(embed_cache)
    embedder.use_shipped(for_pool(pool, embedder))
    return open_chroma(pool, embedder, store_dir=store_dir, chroma_url=chroma_url, progress=progress)
