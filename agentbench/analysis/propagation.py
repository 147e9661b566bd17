"""How retrieval errors propagate into generated code: the run summary.

Definitions (records with ``llm_error`` or ``infra_error`` are excluded everywhere and counted apart):
- buggy context: the first context snippet fails at least one of the query's asserts;
- bug inheritance rate: among failed generations with buggy context, the share whose per-assert pass/fail
  pattern equals the context snippet's; ``mutated_line_rate`` is the share where the distractor's edited
  line (or its missing guard) reappears in the generated code;
- repair rate: the pass rate of generations given buggy context;
- retrieval errors that became failures: among ``rag`` records whose top-1 fails the tests, the share that
  failed end to end.

With ``--rerank`` every verdict is on each query's held-out asserts, and ``rerank`` compares ``rag`` with
``rag_reranked`` (the same prompt with the reranked top-k) and retrieval exec@1 before and after.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from ..pipeline.config import RunConfig
from ..pipeline.records import RunRecord
from ..retrieval.results import RerankResult, RetrievalResult
from .attribution import attribution, query_outcomes
from .passk import samples_summary
from .stats import proportion, rate
from .summary import (
    SUMMARY_VERSION,
    AgentStats,
    BugInheritance,
    BugTypeEffect,
    ConditionStats,
    LLMUsage,
    Propagation,
    Proportion,
    QueryOutcome,
    RerankSummary,
    RetrievalSummary,
    RunIdentity,
    RunSummary,
    SummaryTiming,
    Top1Passes,
)

__all__ = ["summarize", "SUMMARY_VERSION"]


def _by(records: list[RunRecord], key: Callable[[RunRecord], str]) -> dict[str, list[RunRecord]]:
    groups: dict[str, list[RunRecord]] = defaultdict(list)
    for r in records:
        groups[key(r)].append(r)
    return dict(sorted(groups.items()))


def _passes(records: list[RunRecord]) -> Proportion:
    return proportion(sum(r.passed for r in records), len(records))


def _propagation(scored: list[RunRecord]) -> Propagation:
    buggy = [r for r in scored if r.context_passes is False]
    failed_buggy = [r for r in buggy if not r.passed]
    inherited = [r for r in failed_buggy if r.inherited_outcomes]
    line_known = [r for r in failed_buggy if r.mutated_line_reappears is not None]
    rag = [r for r in scored if r.condition == "rag"]
    rag_wrong = [r for r in rag if r.context_passes is False]
    by_bug = {}
    for bug, group in _by([r for r in buggy if r.context_bug_type], lambda r: r.context_bug_type).items():
        failed = [r for r in group if not r.passed]
        by_bug[bug] = BugTypeEffect(
            n=len(group),
            repair_rate=rate(sum(r.passed for r in group), len(group)),
            bug_inheritance_rate=rate(sum(bool(r.inherited_outcomes) for r in failed), len(failed)),
        )
    return Propagation(
        bug_inheritance_rate=rate(len(inherited), len(failed_buggy)),
        bug_inheritance=BugInheritance(
            failures_with_buggy_context=len(failed_buggy), inherited=len(inherited)
        ),
        mutated_line_rate=rate(sum(bool(r.mutated_line_reappears) for r in line_known), len(line_known)),
        repair_rate=rate(sum(r.passed for r in buggy), len(buggy)),
        repair_rate_by_condition={
            c: rate(sum(r.passed for r in g), len(g)) for c, g in _by(buggy, lambda r: r.condition).items()
        },
        rag_pass_by_top1=Top1Passes(
            canonical=_passes([r for r in rag if r.context_kind == "canonical"]),
            own_distractor=_passes([r for r in rag if r.context_kind == "own_distractor"]),
            other_snippet=_passes([r for r in rag if r.context_kind == "other_snippet"]),
        ),
        retrieval_errors=len(rag_wrong),
        retrieval_errors_became_failures=rate(sum(not r.passed for r in rag_wrong), len(rag_wrong)),
        by_bug_type=by_bug,
    )


def _pass_rate(conditions: dict[str, ConditionStats], name: str) -> float | None:
    c = conditions.get(name)
    return None if c is None else c.pass_rate


def _rerank_side_by_side(rr: RerankResult | None, conditions: dict[str, ConditionStats]) -> dict:
    """--rerank: the reranked retrieval and rag numbers, all on held-out asserts."""
    if rr is None:
        return {}
    return {
        "retrieval_reranked_exec@1": rr.metrics.get("exec@1"),
        "rag_reranked_pass_rate": _pass_rate(conditions, "rag_reranked"),
    }


def _rerank(retrieval: RetrievalResult, conditions: dict[str, ConditionStats]) -> RerankSummary | None:
    """What the reranking was, what it gained end to end and what it cost; None without --rerank."""
    rr = retrieval.rerank
    if rr is None:
        return None
    return RerankSummary(
        name=rr.name,
        skipped=rr.skipped,
        k=rr.k,
        visible_tests=rr.visible_tests,
        seed=rr.seed,
        scored_on=rr.scored_on,
        top1_changed=rr.top1_changed,
        exec1_before=retrieval.metrics.get("exec@1"),
        exec1_after=rr.metrics.get("exec@1"),
        rag_pass_rate=_pass_rate(conditions, "rag"),
        rag_reranked_pass_rate=_pass_rate(conditions, "rag_reranked"),
        cost=rr.cost,
        stats=rr.stats,
    )


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _agent(records: list[RunRecord]) -> dict[str, AgentStats] | None:
    """Tool-using conditions: what the agents did with the tools and whether it repaired buggy context
    (repair and bug inheritance under agent_rag are comparable with rag's: same held-out asserts)."""
    by_condition = _by([r for r in records if r.tool_stats is not None], lambda r: r.condition)
    if not by_condition:
        return None
    out = {}
    for condition, group in by_condition.items():
        stats = [r.tool_stats for r in group if r.tool_stats is not None]
        scored = [r for r in group if r.scored]
        buggy = [r for r in scored if r.context_passes is False]
        failed_buggy = [r for r in buggy if not r.passed]
        valid = sum(s.valid_tool_calls or 0 for s in stats)
        invalid = sum(s.invalid_tool_calls or 0 for s in stats)
        turns = sum(s.turns or 0 for s in stats)
        out[condition] = AgentStats(
            n=len(group),
            tool_calls_per_task=_mean([s.tool_calls for s in stats]),
            turns_per_task=_mean([s.turns for s in stats if s.turns is not None]),
            searches_per_task=_mean([s.searches for s in stats]),
            test_runs_per_task=_mean([s.test_runs for s in stats]),
            tasks_running_tests=sum(bool(s.test_runs) for s in stats),
            refused_untested=sum(s.refused_untested or 0 for s in stats),
            searches_after_failing_tests=sum(s.searches_after_failing_tests for s in stats),
            tasks_searching_after_failing_tests=sum(bool(s.searches_after_failing_tests) for s in stats),
            valid_tool_call_rate=rate(valid, valid + invalid),
            tagged_tool_call_rate=rate(
                valid - sum(s.lenient_tool_calls or 0 for s in stats), valid + invalid
            ),
            replies_without_call_rate=rate(sum(s.replies_without_call or 0 for s in stats), turns),
            submitted=sum(bool(s.submitted) for s in stats),
            budget_exhausted=sum(s.budget_exhausted is not None for s in stats),
            tokens_per_task=_mean([r.prompt_tokens + r.completion_tokens for r in group]),
            cost_usd_per_task=round(sum(r.cost_usd for r in group if not r.cached) / len(group), 6),
            repair=proportion(sum(r.passed for r in buggy), len(buggy)),
            bug_inheritance=proportion(
                sum(bool(r.inherited_outcomes) for r in failed_buggy), len(failed_buggy)
            ),
        )
    return out


def _per_query(records: list[RunRecord]) -> list[QueryOutcome]:
    """Each query's outcome under every condition it has a record for (None: not scored, e.g. an LLM
    error) and what its rag top-1 was."""
    conditions: dict[str, list[str]] = defaultdict(list)
    for r in records:
        conditions[r.query_id].append(r.condition)
    return [
        QueryOutcome(
            query_id=qid,
            top1_kind=q.top1_kind,
            top1_passes=q.top1_passes,
            outcomes={c: q.outcomes.get(c) for c in conditions[qid]},
        )
        for qid, q in query_outcomes(records).items()
    ]


def _task_text(records: list[RunRecord]) -> str | None:
    kinds = {r.task_text for r in records}
    return None if not kinds else kinds.pop() if len(kinds) == 1 else "mixed"


def _retrieval(retrieval: RetrievalResult | None) -> RetrievalSummary:
    if retrieval is None:
        return RetrievalSummary(model=None, errors=0, metrics={}, ci95={}, diagnostics={})
    return RetrievalSummary(
        model=retrieval.model,
        errors=len(retrieval.errors),
        metrics=dict(retrieval.metrics),
        ci95=dict(retrieval.ci95),
        diagnostics=retrieval.diagnostics.to_json_dict(),
    )


def summarize(
    records: list[RunRecord], retrieval: RetrievalResult | dict | None, llm_stats: dict, config: RunConfig
) -> RunSummary:
    """The run's summary.json: retrieval-only and end-to-end numbers side by side. ``retrieval`` is None
    (or ``{}``) when the run stopped before its retrieval finished."""
    if isinstance(retrieval, dict):
        retrieval = RetrievalResult.model_validate(retrieval) if retrieval else None
    scored = [r for r in records if r.scored]
    conditions: dict[str, ConditionStats] = {}
    for condition in config.conditions:
        group = [r for r in records if r.condition == condition]
        ok = [r for r in group if r.scored]
        conditions[condition] = ConditionStats(
            **dict(_passes(ok)),
            llm_errors=sum(r.status == "llm_error" for r in group),
            infra_errors=sum(r.status == "infra_error" for r in group),
            no_code=sum(r.status == "no_code" for r in group),
            agent_errors=sum(r.status == "agent_error" for r in group),
            retriever_errors=sum(r.status == "retriever_error" for r in group),
        )
    metrics = retrieval.metrics if retrieval is not None else {}
    return RunSummary(
        schema_version=SUMMARY_VERSION,
        run=RunIdentity(
            llm=config.agent_name,
            embedder=config.retriever_name,
            agent=config.agent,
            retriever=config.retriever,
            pool=config.pool,
            seed=config.seed,
            task_text=_task_text(records),
        ),
        n_queries=retrieval.n_queries if retrieval is not None else None,
        retrieval=_retrieval(retrieval),
        conditions=conditions,
        propagation=_propagation(scored),
        attribution=attribution(records, seed=config.seed),
        side_by_side={
            "retrieval_exec@1": metrics.get("exec@1"),
            "rag_pass_rate": _pass_rate(conditions, "rag"),
            "closed_book_pass_rate": _pass_rate(conditions, "closed_book"),
            "oracle_pass_rate": _pass_rate(conditions, "oracle"),
            "distractor_pass_rate": _pass_rate(conditions, "distractor"),
            **_rerank_side_by_side(retrieval.rerank if retrieval is not None else None, conditions),
        },
        by_domain={
            d: {c: _passes([r for r in g if r.condition == c]) for c in config.conditions}
            for d, g in _by(scored, lambda r: r.domain).items()
        },
        rerank=_rerank(retrieval, conditions) if retrieval is not None else None,
        agent=_agent(records),
        llm=LLMUsage(
            model=config.agent_name,
            calls=llm_stats.get("calls", 0),
            cache_hits=llm_stats.get("cache_hits", 0),
            errors=sum(r.status == "llm_error" for r in records),
            prompt_tokens=sum(r.prompt_tokens for r in records),
            completion_tokens=sum(r.completion_tokens for r in records),
            cost_usd=round(sum(r.cost_usd for r in records if not r.cached), 6),
        ),
        per_query=_per_query(records),
        timing=SummaryTiming(
            llm_seconds=round(sum(r.llm_seconds for r in records), 3),
            exec_seconds=round(sum(r.exec_seconds for r in records), 3),
        ),
        samples=samples_summary(records, config.samples, config.conditions),
    )
