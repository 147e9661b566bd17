"""What the retrieval stage hands the rerank stage: per query, the hits in order and their verdicts.

Scoring (:mod:`.evaluate`) turns a ranking into metrics; the rerank stage (:mod:`.rerank`) turns a ranking
into another ranking of the same hits, so both orders are scored by the same code on the same verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..execution.base import ExecResult
from .hits import Hit

__all__ = ["Ranking"]


@dataclass(frozen=True)
class Ranking:
    hits: list[list[Hit]]
    """per query, best first"""
    verdicts: list[list[ExecResult]]
    """per query, the verdict of each hit on the query's scored asserts"""
    scores: list[dict[str, float]]
    """per query, the similarity of its canonicals and paired distractors (canonical-vs-paired diagnostics)"""

    def reordered(self, hits: list[list[Hit]]) -> Ranking:
        """The same hits in another order, each keeping its verdict."""
        by_id = [
            {h.corpus_id: v for h, v in zip(qh, qv, strict=True)}
            for qh, qv in zip(self.hits, self.verdicts, strict=True)
        ]
        verdicts = [[m[h.corpus_id] for h in qh] for qh, m in zip(hits, by_id, strict=True)]
        return Ranking(hits, verdicts, self.scores)
