"""The run summary (``summary.json``) as typed records; its JSON Schema is exported under ``docs/schema/``.

Versioned by ``schema_version``: a change that renames, retypes or drops a field bumps it; added fields
do not (readers ignore what they do not know, and :class:`~agentbench.models.Record` keeps it).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from ..models import Record
from ..retrieval.results import Number

__all__ = [
    "SUMMARY_VERSION",
    "RunSummary",
    "RunIdentity",
    "RetrievalSummary",
    "ConditionStats",
    "LLMUsage",
    "QueryOutcome",
    "SummaryTiming",
]

SUMMARY_VERSION = 2
"""2: adds ``attribution`` (paired per-query effects of retrieval) and ``per_query``."""


class RunIdentity(Record):
    llm: str
    """the agent's name: the LLM, or the agent plug-in"""
    embedder: str
    """the retriever's name: the embedder, or the retriever plug-in"""
    agent: str | None = None
    retriever: str | None = None
    pool: str
    seed: int
    task_text: Literal["spec", "query", "mixed"] | None = None
    """what generation prompts stated the task with: the pool's specs, its retrieval queries (a pool without
    specs), or both (some queries have specs)"""


class RetrievalSummary(Record):
    """The retrieval stage's headline numbers (the full results are in ``retrieval.json``)."""

    model: str | None = None
    errors: int = 0
    metrics: dict[str, Number] = Field(default_factory=dict)
    ci95: dict[str, list[Number | None] | None] = Field(default_factory=dict)
    diagnostics: dict[str, Any] = Field(default_factory=dict)


class ConditionStats(Record):
    """One condition: pass rate with a Wilson 95% interval over scored records, and the unscored ones."""

    n: int
    passed: int
    pass_rate: Number | None
    ci95: list[Number] | None
    llm_errors: int = 0
    infra_errors: int = 0
    no_code: int = 0
    agent_errors: int = 0
    retriever_errors: int = 0


class LLMUsage(Record):
    model: str
    calls: int
    cache_hits: int
    errors: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: Number


class QueryOutcome(Record):
    query_id: str
    top1_kind: str | None
    top1_passes: bool | None
    outcomes: dict[str, bool | None]
    """condition -> passed (None: not scored, e.g. an LLM error)"""


class SummaryTiming(Record):
    llm_seconds: Number
    exec_seconds: Number


class RunSummary(Record):
    """Retrieval-only and end-to-end numbers of one run, side by side."""

    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset({"rerank", "agent"})

    schema_version: int = SUMMARY_VERSION
    run: RunIdentity
    n_queries: int | None
    retrieval: RetrievalSummary
    conditions: dict[str, ConditionStats]
    propagation: dict[str, Any]
    """bug inheritance, mutated-line and repair rates, rag pass rate by top-1 kind (see
    :mod:`.propagation`)"""
    attribution: dict[str, Any] = Field(default_factory=dict)
    """retrieval-induced failures and rescues with CIs and McNemar p (see :mod:`.attribution`)"""
    side_by_side: dict[str, Number | None]
    by_domain: dict[str, dict[str, dict[str, Any]]]
    rerank: dict[str, Any] | None = None
    """with --rerank: exec@1 and rag pass rate before and after reranking, and its cost"""
    agent: dict[str, dict[str, Any]] | None = None
    """with the tool conditions (agent, agent_rag): per condition, tool calls, turns, searches, test runs,
    searches after a failing run_tests, valid tool-call rate, budgets run out, tokens and cost per task,
    and repair and bug inheritance under buggy context (Wilson CIs)"""
    llm: LLMUsage
    per_query: list[QueryOutcome] = Field(default_factory=list)
    timing: SummaryTiming
