"""The work of a run: every (query, condition) with the context its condition gives it, ``--samples``
times (the samples of an item share its context: only the generation is drawn again).

Planning is pure (the retrieval stage's rankings and the run's settings in, work items out), so a resumed
run plans exactly the items of the run it continues, and a run's records are ordered by this plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..execution import Executor, Job
from ..execution.cache import ExecCache, run_cached
from ..pools import Pool, Query
from ..retrieval.results import RetrievalResult
from .conditions import Condition, PlanInputs, get_condition
from .config import RunConfig
from .records import ContextKind, RecordKey

__all__ = ["WorkItem", "plan_items", "context_verdicts"]


@dataclass
class WorkItem:
    """One (query, condition) of the run and the context its condition built for it."""

    query: Query
    condition: Condition
    context_ids: list[str]
    kind: ContextKind
    error: str | None = None
    """The retriever plug-in failed on this query: no generation, a ``retriever_error`` record."""
    sample: int | None = None
    """Which of the ``--samples`` generations this is (from 0); None in a one-sample run."""

    @property
    def key(self) -> RecordKey:
        """The ``(query_id, condition[, sample])`` of the item, as :attr:`RunRecord.key` is for its record."""
        if self.sample is None:
            return self.query.query_id, self.condition.name
        return self.query.query_id, self.condition.name, self.sample

    def suite(self, suites: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
        """The asserts the generation is judged on under this item's condition."""
        return self.condition.suite(self.query, suites[self.query.query_id])


def plan_items(pool: Pool, retrieval: RetrievalResult, config: RunConfig) -> list[WorkItem]:
    """Every (query, condition) of the run, in condition order, each condition building its context; with
    ``--samples`` N above 1, N items per (query, condition), sample by sample within a query."""
    inputs = PlanInputs(
        ranked=retrieval.ranking(),
        reranked=retrieval.reranking(),  # empty without a reranker that ran: no rag_reranked records
        errors={e.query_id: e.error for e in retrieval.errors},
        k=config.k,
        seed=config.seed,
    )
    items: list[WorkItem] = []
    for name in config.conditions:
        condition = get_condition(name)
        for q in pool.queries:
            ctx = condition.plan(q, inputs)
            if ctx is None:
                continue
            for sample in range(config.samples) if config.samples > 1 else (None,):
                items.append(WorkItem(q, condition, list(ctx.ids), ctx.kind, ctx.error, sample))
    return items


def context_verdicts(
    items: list[WorkItem],
    pool: Pool,
    executor: Executor,
    exec_cache: ExecCache,
    timeout: float,
    suites: dict[str, tuple[str, ...]],
) -> dict[tuple[str, str], list[str]]:
    """Per-assert outcomes of each first context snippet on its query's tests (cached executions)."""
    pairs = sorted({(it.query.query_id, it.context_ids[0]) for it in items if it.context_ids})
    setups = {q.query_id: q.test_setup or "" for q in pool.queries}
    jobs = [Job(pool.snippet(cid).code, suites[qid], timeout, setups[qid]) for qid, cid in pairs]
    results = run_cached(executor, jobs, exec_cache)
    return {pair: list(r.results) for pair, r in zip(pairs, results, strict=True)}
