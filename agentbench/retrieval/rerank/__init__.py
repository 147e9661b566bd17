"""The rerank stage (``--rerank``): one module per reranker, chosen through a registry.

- :mod:`.base`: what a reranker is given (:class:`RerankInput`: visible asserts only) and returns, the
  sandbox it runs candidates through, and :class:`RerankStats`, the base of each reranker's statistics;
- :mod:`.visible` (``exec-visible``), :mod:`.consensus` (``exec-consensus``), :mod:`.ce` (``ce:<model>``):
  the rerankers, each with its own statistics model;
- :mod:`.registry`: :func:`register` and :func:`parse_reranker`;
- :mod:`.stage`: :class:`Reranking`, applying a reranker to search results under the visible/held-out
  split of :mod:`agentbench.pools.split`.

Names load on first use (PEP 562): the settings parse ``--rerank`` without loading numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_exports

if TYPE_CHECKING:
    from .base import (
        Candidate,
        Reranker,
        RerankerUnavailable,
        RerankInput,
        RerankOutcome,
        RerankStats,
        Sandbox,
        stable_order,
    )
    from .ce import CrossEncoderReranker
    from .consensus import ConsensusReranker, ConsensusStats
    from .registry import parse_reranker, register, registered, reranker_forms, stats_model_for
    from .stage import Reranking, entry_function, make_reranking, rerank_stage
    from .visible import VisibleTestsReranker, VisibleTestsStats

_LAZY = {
    "Candidate": "base",
    "Reranker": "base",
    "RerankerUnavailable": "base",
    "RerankInput": "base",
    "RerankOutcome": "base",
    "RerankStats": "base",
    "Sandbox": "base",
    "stable_order": "base",
    "CrossEncoderReranker": "ce",
    "ConsensusReranker": "consensus",
    "ConsensusStats": "consensus",
    "VisibleTestsReranker": "visible",
    "VisibleTestsStats": "visible",
    "parse_reranker": "registry",
    "register": "registry",
    "registered": "registry",
    "reranker_forms": "registry",
    "stats_model_for": "registry",
    "Reranking": "stage",
    "entry_function": "stage",
    "make_reranking": "stage",
    "rerank_stage": "stage",
}

__all__ = [
    "Candidate",
    "Reranker",
    "RerankerUnavailable",
    "RerankInput",
    "RerankOutcome",
    "RerankStats",
    "Sandbox",
    "stable_order",
    "CrossEncoderReranker",
    "ConsensusReranker",
    "ConsensusStats",
    "VisibleTestsReranker",
    "VisibleTestsStats",
    "parse_reranker",
    "register",
    "registered",
    "reranker_forms",
    "stats_model_for",
    "Reranking",
    "entry_function",
    "make_reranking",
    "rerank_stage",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
