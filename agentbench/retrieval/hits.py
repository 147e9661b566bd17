"""The one ranking interface every retrieval backend implements (:class:`Searcher`), its :class:`Hit`,
and exact ranking helpers. A leaf of the retrieval package: backends and callers import it, it imports none
of them (``as_langchain`` loads :mod:`.lc` on first use).

Why exact: pools are small and distractors differ from their canonical in one line, so their scores are
close; approximate search or an unstable tie order would change exec@1. Every backend therefore ranks by the
exact score (cosine for dense embedders, BM25 for the sparse one) and breaks exact ties by
:func:`tie_key`, a hash of the corpus id. The hash is deterministic but independent of how ids were
assigned: ordering ties by the id itself would systematically favour canonicals, which pool builders
number before their distractors (BM25 often scores a canonical and its operator-swapped mutant equally).
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..pools.models import Snippet

__all__ = [
    "Hit",
    "Searcher",
    "tie_key",
    "tie_ranks_for",
    "cosine_scores",
    "normalized_rows",
    "rank_exact",
    "QUERY_BLOCK",
]

QUERY_BLOCK = 64
"""Queries scored at once: bounds the score matrix held in memory (64 x 100k float64 = 51 MB)."""


@dataclass(frozen=True)
class Hit:
    """One retrieved snippet. ``rank`` is 1-based; ``score`` is cosine similarity or the BM25 score."""

    rank: int
    corpus_id: str
    score: float
    code: str


def tie_key(corpus_id: str) -> str:
    """Secondary sort key for exactly equal scores (see the module docstring)."""
    return hashlib.sha256(corpus_id.encode()).hexdigest()


def cosine_scores(queries: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """Exact cosine similarity in float64, shape (n_queries, n_docs); zero vectors score 0."""
    return normalized_rows(queries) @ normalized_rows(docs).T


def rank_exact(scores: np.ndarray, tie_ranks: np.ndarray, k: int) -> np.ndarray:
    """Positions of the top ``k`` scores, best first, exact ties ordered by ``tie_ranks`` (ascending).

    Sorts only the scores at or above the k-th best (every tie with it included), so a query costs a
    partition of the corpus rather than a full sort: the same answer as sorting everything.
    """
    scores = np.asarray(scores, dtype=np.float64)
    tie_ranks = np.asarray(tie_ranks)
    n = len(scores)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if k < n:
        kth = -np.partition(-scores, k - 1)[k - 1]
        if not np.isnan(kth):
            cand = np.flatnonzero(scores >= kth)
            return cand[np.lexsort((tie_ranks[cand], -scores[cand]))][:k]
    return np.lexsort((tie_ranks, -scores))[:k]


def normalized_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length in float64 (zero rows stay zero), as :func:`cosine_scores` does."""
    v = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return np.divide(v, norms, out=np.zeros_like(v), where=norms > 0)


def tie_ranks_for(ids: Sequence[str]) -> np.ndarray:
    """Rank of each id under :func:`tie_key`, for :func:`rank_exact`."""
    order = sorted(range(len(ids)), key=lambda i: tie_key(ids[i]))
    ranks = np.empty(len(ids), dtype=np.int64)
    ranks[order] = np.arange(len(ids))
    return ranks


class Searcher(ABC):
    """Ranks a fixed corpus for free-text queries."""

    def __init__(self, name: str, snippets: Sequence[Snippet]) -> None:
        self.name = name
        self.ids = [s.corpus_id for s in snippets]
        self.codes = {s.corpus_id: s.code for s in snippets}
        self.position = {cid: i for i, cid in enumerate(self.ids)}
        self.tie_ranks = tie_ranks_for(self.ids)

    @property
    def n_docs(self) -> int:
        return len(self.ids)

    @abstractmethod
    def score_all(self, queries: Sequence[str]) -> np.ndarray:
        """Exact scores of every document, shape (n_queries, n_docs), columns in ``self.ids`` order."""

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        """Top ``k`` hits per query (fewer when the corpus is smaller); scores blocks of queries so that
        at most ``QUERY_BLOCK`` x corpus scores are held at once."""
        out: list[list[Hit]] = []
        for start in range(0, len(queries), QUERY_BLOCK):
            block = self.score_all(queries[start : start + QUERY_BLOCK])
            out.extend(self._hits(row, rank_exact(row, self.tie_ranks, k)) for row in block)
        return out

    def scores_of(self, queries: Sequence[str], ids: Sequence[Sequence[str]]) -> list[dict[str, float]]:
        """Per query, the exact scores of the listed documents (unknown ids are left out); by blocks of
        ``score_all`` unless a backend can score a few documents more cheaply."""
        out: list[dict[str, float]] = []
        for start in range(0, len(queries), QUERY_BLOCK):
            rows = self.score_all(queries[start : start + QUERY_BLOCK])
            for row, wanted in zip(rows, ids[start : start + QUERY_BLOCK], strict=True):
                out.append({c: float(row[self.position[c]]) for c in wanted if c in self.position})
        return out

    def search(self, query: str, k: int = 10) -> list[Hit]:
        return self.search_many([query], k)[0]

    def _hits(self, scores: np.ndarray, positions: Sequence[int]) -> list[Hit]:
        out = []
        for rank, pos in enumerate(positions, start=1):
            cid = self.ids[pos]
            out.append(Hit(rank, cid, float(scores[pos]), self.codes[cid]))
        return out

    def as_langchain(self, k: int = 10) -> Any:
        """A LangChain ``BaseRetriever`` returning Documents (code, ``corpus_id`` metadata) in exact order."""
        from .lc import SearcherRetriever

        return SearcherRetriever(searcher=self, k=k)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release clients; safe to call twice."""

    def __enter__(self) -> Searcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
