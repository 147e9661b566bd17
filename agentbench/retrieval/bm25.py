"""BM25 over code-aware tokens (bm25s), ranked through the same exact interface as dense stores.

The tokenizer (identifiers whole and split, operators kept, no stop words) is in :mod:`.tokens`, and is
re-exported here. The index is rebuilt in memory on every run: tokenizing a pool takes well under a second.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..pools.models import Snippet
from .embedders import BM25Embedder
from .hits import Searcher
from .tokens import TOKENIZER_VERSION, split_identifier, tokenize_code

__all__ = ["tokenize_code", "split_identifier", "BM25Searcher", "TOKENIZER_VERSION"]


class BM25Searcher(Searcher):
    """In-memory bm25s index over one pool's corpus."""

    def __init__(self, embedder: BM25Embedder, snippets: Sequence[Snippet]) -> None:
        super().__init__(embedder.name, snippets)
        import bm25s

        self.embedder = embedder
        self._bm25 = bm25s.BM25(k1=embedder.k1, b=embedder.b, method="lucene")
        if snippets:
            self._bm25.index([tokenize_code(s.code) for s in snippets], show_progress=False)

    def score_all(self, queries: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(queries), self.n_docs), dtype=np.float64)
        if not self.n_docs:
            return out
        for i, query in enumerate(queries):
            token_ids = self._bm25.get_tokens_ids(tokenize_code(query))
            if token_ids:
                out[i] = self._bm25.get_scores(token_ids)
        return out
