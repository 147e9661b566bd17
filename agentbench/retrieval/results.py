"""The retrieval stage's result: ExecRetrieval's per-model results schema as typed records.

One :class:`RetrievalResult` per retriever and pool is what ``agentbench retrieve`` writes (one JSON file
each), what a run writes as ``retrieval.json`` and what the generation conditions plan from. Metric
tables are keyed by metric name (``exec@1``, ``ndcg@10``, ``mrr``: see :func:`.metrics.metric_names`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from ..models import Record
from .rerank.base import RerankStats
from .rerank.consensus import ConsensusStats
from .rerank.registry import with_typed_stats
from .rerank.visible import VisibleTestsStats

__all__ = [
    "RESULTS_VERSION",
    "TopResult",
    "QueryRow",
    "QueryFailure",
    "Timing",
    "RunInfo",
    "BugShare",
    "Diagnostics",
    "RerankCost",
    "RerankResult",
    "RetrievalResult",
]

RESULTS_VERSION = 1

Number = int | float
"""A number written as it was computed (an integer count stays an integer in the JSON)."""


class TopResult(Record):
    """One retrieved snippet of a query, with its execution verdict on the query's (scored) asserts."""

    rank: int
    corpus_id: str
    label: str = ""
    bug_type: str = ""
    similarity: Number | None = None
    passes_all_tests: bool
    test_results: list[str] = Field(default_factory=list)


class QueryRow(Record):
    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset({"rerank"})

    query_id: str
    query: str = ""
    correct_corpus_ids: list[str] = Field(default_factory=list)
    top_results: list[TopResult] = Field(default_factory=list)
    rerank: dict[str, Any] | None = None
    """In the reranked rows only: the visible asserts' positions and the reranker's details."""

    @property
    def ranked_ids(self) -> list[str]:
        return [r.corpus_id for r in self.top_results]


class QueryFailure(Record):
    """A query a retriever plug-in failed on (scored as a miss)."""

    query_id: str
    error: str


class Timing(Record):
    index_s: Number
    search_s: Number
    execute_s: Number
    rerank_s: Number
    metrics_s: Number
    total_s: Number
    encode_s: Number
    load_s: Number


class RunInfo(Record):
    executor: str
    timeout: Number
    seed: int
    n_resamples: int
    depth: int
    scored_on: Literal["all", "held_out"]
    store: str
    collection: str | None
    timing: Timing


class BugShare(Record):
    count: int
    share: Number


class Diagnostics(Record):
    """The paper's rank-1 failure analysis (shares are None when nothing was counted)."""

    rank1_failures: int = 0
    rank1_failures_paired: int = 0
    rank1_failure_paired_share: Number | None = None
    canonical_below_paired_share: Number | None = None
    canonical_below_paired_n: int = 0
    rank1_tied_share: Number | None = None
    by_bug_type: dict[str, BugShare] = Field(default_factory=dict)
    by_domain: dict[str, dict[str, Number]] = Field(default_factory=dict)


class RerankCost(Record):
    executions: int
    executed_now: int
    seconds: Number
    sandbox_seconds: Number


class RerankResult(Record):
    """The rerank stage: the same metrics for the reranked order, on the same held-out asserts.

    ``name`` is None when the reranker was skipped (``skipped`` says why); then nothing was reordered."""

    name: str | None
    skipped: str | None
    k: int
    visible_tests: str
    seed: int
    scored_on: Literal["held_out"]
    n_visible: int
    n_held_out: int
    top1_changed: int
    cost: RerankCost
    stats: VisibleTestsStats | ConsensusStats | RerankStats
    """The reranker's own statistics (its :attr:`~.rerank.base.Reranker.stats_model`); ``{}`` for a
    reranker without statistics or a skipped reranking."""
    metrics: dict[str, Number]
    ci95: dict[str, list[Number | None] | None]
    diagnostics: Diagnostics
    per_query: list[QueryRow]

    @model_validator(mode="before")
    @classmethod
    def _stats_of_the_reranker(cls, data: Any) -> Any:
        """Read ``stats`` as the model of the reranker ``name`` names, not by guessing from its keys."""
        return with_typed_stats(data)


class RetrievalResult(Record):
    """One retriever on one pool. Fields a reader can do without have defaults, so results files from
    other tools or older versions still load; agentbench itself always writes every field."""

    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset({"rerank", "run_info"})

    schema_version: int = RESULTS_VERSION
    model: str
    """the embedder's or retriever plug-in's name"""
    embedder_config: str | dict[str, Any] = Field(default_factory=dict)
    pool: str = ""
    pool_path: str | None = None
    n_queries: int = 0
    n_corpus: int = 0
    ks: list[int] = Field(default_factory=list)
    metrics: dict[str, Number] = Field(default_factory=dict)
    ci95: dict[str, list[Number | None] | None] = Field(default_factory=dict)
    diagnostics: Diagnostics = Field(default_factory=Diagnostics)
    errors: list[QueryFailure] = Field(default_factory=list)
    run_info: RunInfo | None = None
    per_query: list[QueryRow] = Field(default_factory=list)
    rerank: RerankResult | None = None

    def ranking(self) -> dict[str, list[str]]:
        """query_id -> corpus ids in retrieval order."""
        return {q.query_id: q.ranked_ids for q in self.per_query}

    def reranking(self) -> dict[str, list[str]]:
        """query_id -> corpus ids in reranked order; empty without a reranker that ran."""
        if self.rerank is None or self.rerank.name is None:
            return {}
        return {q.query_id: q.ranked_ids for q in self.rerank.per_query}
