"""``exec-visible``: the agent knows some of the tests.

Each candidate runs against the query's *visible* asserts in the sandbox; candidates passing all of them
move first, vector order kept among ties. A query with no visible assert keeps its vector order.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...execution.base import Job
from .base import Reranker, RerankInput, RerankOutcome, RerankStats, Sandbox, stable_order

__all__ = ["VisibleTestsReranker", "VisibleTestsStats"]


class VisibleTestsStats(RerankStats):
    """``exec-visible``'s statistics over all queries; a candidate of a query without visible asserts
    counts as passing them."""

    queries_with_a_visible_pass: int
    """Queries where at least one candidate passed every visible assert."""
    queries_where_all_pass_visible: int
    """Queries with candidates where every candidate passed every visible assert (nothing to separate)."""
    candidates_passing_visible: int
    """Candidates, over all queries, that passed every visible assert."""
    candidates: int
    """Candidates reranked, over all queries."""


class VisibleTestsReranker(Reranker):
    """``exec-visible``: candidates passing every visible assert first, vector order among ties."""

    name = "exec-visible"
    form = "exec-visible"
    stats_model = VisibleTestsStats

    def rerank(self, inputs: Sequence[RerankInput], sandbox: Sandbox) -> list[RerankOutcome]:
        jobs = [
            Job(c.code, inp.visible_tests, sandbox.timeout, inp.test_setup)
            for inp in inputs
            if inp.visible_tests
            for c in inp.candidates
        ]
        results = iter(sandbox.run(jobs, "reranking on visible asserts"))
        outcomes = []
        for inp in inputs:
            if inp.visible_tests:
                passes = [next(results).passed for _ in inp.candidates]
            else:  # nothing visible: every candidate ties, vector order stays
                passes = [True] * len(inp.candidates)
            outcomes.append(RerankOutcome(stable_order([not p for p in passes]), {"passes_visible": passes}))
        return outcomes

    def summarize(self, outcomes: Sequence[RerankOutcome]) -> VisibleTestsStats:
        passes = [o.details["passes_visible"] for o in outcomes]
        return VisibleTestsStats(
            queries_with_a_visible_pass=sum(any(p) for p in passes),
            queries_where_all_pass_visible=sum(all(p) for p in passes if p),
            candidates_passing_visible=sum(sum(p) for p in passes),
            candidates=sum(len(p) for p in passes),
        )
