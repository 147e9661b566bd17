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

from ..pipeline.config import RunConfig
from ..pipeline.records import RunRecord
from ..retrieval.results import RetrievalResult
from .attribution import attribution, query_outcomes
from .stats import proportion, rate
from .summary import SUMMARY_VERSION, RunSummary

__all__ = ["summarize", "SUMMARY_VERSION"]


def _by(records: list[RunRecord], key) -> dict[str, list[RunRecord]]:
    groups: dict[str, list[RunRecord]] = defaultdict(list)
    for r in records:
        groups[key(r)].append(r)
    return dict(sorted(groups.items()))


def _passes(records: list[RunRecord]) -> dict:
    return proportion(sum(r.passed for r in records), len(records))


def _propagation(scored: list[RunRecord]) -> dict:
    buggy = [r for r in scored if r.context_passes is False]
    failed_buggy = [r for r in buggy if not r.passed]
    inherited = [r for r in failed_buggy if r.inherited_outcomes]
    line_known = [r for r in failed_buggy if r.mutated_line_reappears is not None]
    rag = [r for r in scored if r.condition == "rag"]
    rag_wrong = [r for r in rag if r.context_passes is False]
    kinds = ("canonical", "own_distractor", "other_snippet")
    by_bug = {}
    for bug, group in _by([r for r in buggy if r.context_bug_type], lambda r: r.context_bug_type).items():
        failed = [r for r in group if not r.passed]
        by_bug[bug] = {
            "n": len(group),
            "repair_rate": rate(sum(r.passed for r in group), len(group)),
            "bug_inheritance_rate": rate(sum(bool(r.inherited_outcomes) for r in failed), len(failed)),
        }
    return {
        "bug_inheritance_rate": rate(len(inherited), len(failed_buggy)),
        "bug_inheritance": {"failures_with_buggy_context": len(failed_buggy), "inherited": len(inherited)},
        "mutated_line_rate": rate(sum(bool(r.mutated_line_reappears) for r in line_known), len(line_known)),
        "repair_rate": rate(sum(r.passed for r in buggy), len(buggy)),
        "repair_rate_by_condition": {
            c: rate(sum(r.passed for r in g), len(g)) for c, g in _by(buggy, lambda r: r.condition).items()
        },
        "rag_pass_by_top1": {k: _passes([r for r in rag if r.context_kind == k]) for k in kinds},
        "retrieval_errors": len(rag_wrong),
        "retrieval_errors_became_failures": rate(sum(not r.passed for r in rag_wrong), len(rag_wrong)),
        "by_bug_type": by_bug,
    }


def _rerank_side_by_side(retrieval: dict, conditions: dict) -> dict:
    """--rerank (issue 7): the reranked retrieval and rag numbers, all on held-out asserts."""
    rr = retrieval.get("rerank")
    if not rr:
        return {}
    return {
        "retrieval_reranked_exec@1": rr.get("metrics", {}).get("exec@1"),
        "rag_reranked_pass_rate": conditions.get("rag_reranked", {}).get("pass_rate"),
    }


def _rerank(retrieval: dict, conditions: dict) -> dict:
    """What the reranking was, what it gained end to end and what it cost; empty without --rerank."""
    rr = retrieval.get("rerank")
    if not rr:
        return {}
    info = {
        k: rr.get(k) for k in ("name", "skipped", "k", "visible_tests", "seed", "scored_on", "top1_changed")
    }
    return {
        "rerank": info
        | {
            "exec@1_before": retrieval.get("metrics", {}).get("exec@1"),
            "exec@1_after": rr.get("metrics", {}).get("exec@1"),
            "rag_pass_rate": conditions.get("rag", {}).get("pass_rate"),
            "rag_reranked_pass_rate": conditions.get("rag_reranked", {}).get("pass_rate"),
            "cost": rr.get("cost", {}),
            "stats": rr.get("stats", {}),
        }
    }


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _agent(records: list[RunRecord]) -> dict | None:
    """Tool-using conditions: what the agents did with the tools and whether it repaired buggy context
    (repair and bug inheritance under agent_rag are comparable with rag's: same held-out asserts)."""
    by_condition = _by([r for r in records if r.tool_stats is not None], lambda r: r.condition)
    if not by_condition:
        return None
    out = {}
    for condition, group in by_condition.items():
        stats = [r.tool_stats or {} for r in group]
        scored = [r for r in group if r.scored]
        buggy = [r for r in scored if r.context_passes is False]
        failed_buggy = [r for r in buggy if not r.passed]
        valid = sum(s.get("valid_tool_calls", 0) for s in stats)
        invalid = sum(s.get("invalid_tool_calls", 0) for s in stats)
        turns = sum(s.get("turns", 0) for s in stats)
        out[condition] = {
            "n": len(group),
            "tool_calls_per_task": _mean([s.get("tool_calls", 0) for s in stats]),
            "turns_per_task": _mean([s.get("turns", 0) for s in stats if "turns" in s]),
            "searches_per_task": _mean([s.get("searches", 0) for s in stats]),
            "test_runs_per_task": _mean([s.get("test_runs", 0) for s in stats]),
            "searches_after_failing_tests": sum(s.get("searches_after_failing_tests", 0) for s in stats),
            "tasks_searching_after_failing_tests": sum(
                bool(s.get("searches_after_failing_tests")) for s in stats
            ),
            "valid_tool_call_rate": rate(valid, valid + invalid),
            "tagged_tool_call_rate": rate(
                valid - sum(s.get("lenient_tool_calls", 0) for s in stats), valid + invalid
            ),
            "replies_without_call_rate": rate(sum(s.get("replies_without_call", 0) for s in stats), turns),
            "submitted": sum(bool(s.get("submitted")) for s in stats),
            "budget_exhausted": sum(s.get("budget_exhausted") is not None for s in stats),
            "tokens_per_task": _mean([r.prompt_tokens + r.completion_tokens for r in group]),
            "cost_usd_per_task": round(sum(r.cost_usd for r in group if not r.cached) / len(group), 6),
            "repair": proportion(sum(r.passed for r in buggy), len(buggy)),
            "bug_inheritance": proportion(
                sum(bool(r.inherited_outcomes) for r in failed_buggy), len(failed_buggy)
            ),
        }
    return out


def _per_query(records: list[RunRecord]) -> list[dict]:
    """Each query's outcome under every condition it has a record for (None: not scored, e.g. an LLM
    error) and what its rag top-1 was."""
    conditions: dict[str, list[str]] = defaultdict(list)
    for r in records:
        conditions[r.query_id].append(r.condition)
    return [
        {
            "query_id": qid,
            "top1_kind": q["top1_kind"],
            "top1_passes": q["top1_passes"],
            "outcomes": {c: q["outcomes"].get(c) for c in conditions[qid]},
        }
        for qid, q in query_outcomes(records).items()
    ]


def _task_text(records: list[RunRecord]) -> str | None:
    kinds = {r.task_text for r in records}
    return None if not kinds else kinds.pop() if len(kinds) == 1 else "mixed"


def summarize(
    records: list[RunRecord], retrieval: RetrievalResult | dict, llm_stats: dict, config: RunConfig
) -> RunSummary:
    """The run's summary.json: retrieval-only and end-to-end numbers side by side."""
    if isinstance(retrieval, RetrievalResult):
        retrieval = retrieval.to_json_dict()
    scored = [r for r in records if r.scored]
    conditions = {}
    for condition in config.conditions:
        group = [r for r in records if r.condition == condition]
        ok = [r for r in group if r.scored]
        conditions[condition] = {
            **_passes(ok),
            "llm_errors": sum(r.status == "llm_error" for r in group),
            "infra_errors": sum(r.status == "infra_error" for r in group),
            "no_code": sum(r.status == "no_code" for r in group),
            "agent_errors": sum(r.status == "agent_error" for r in group),
            "retriever_errors": sum(r.status == "retriever_error" for r in group),
        }
    metrics = retrieval.get("metrics", {})
    summary = {
        "schema_version": SUMMARY_VERSION,
        "run": {
            "llm": config.agent_name,
            "embedder": config.retriever_name,
            "agent": config.agent,
            "retriever": config.retriever,
            "pool": config.pool,
            "seed": config.seed,
            "task_text": _task_text(records),
        },
        "n_queries": retrieval.get("n_queries"),
        "retrieval": {
            "model": retrieval.get("model"),
            "errors": len(retrieval.get("errors", [])),
            "metrics": metrics,
            "ci95": retrieval.get("ci95", {}),
            "diagnostics": retrieval.get("diagnostics", {}),
        },
        "conditions": conditions,
        "propagation": _propagation(scored),
        "attribution": attribution(records, seed=config.seed),
        "side_by_side": {
            "retrieval_exec@1": metrics.get("exec@1"),
            "rag_pass_rate": conditions.get("rag", {}).get("pass_rate"),
            "closed_book_pass_rate": conditions.get("closed_book", {}).get("pass_rate"),
            "oracle_pass_rate": conditions.get("oracle", {}).get("pass_rate"),
            "distractor_pass_rate": conditions.get("distractor", {}).get("pass_rate"),
            **_rerank_side_by_side(retrieval, conditions),
        },
        "by_domain": {
            d: {c: _passes([r for r in g if r.condition == c]) for c in config.conditions}
            for d, g in _by(scored, lambda r: r.domain).items()
        },
        **_rerank(retrieval, conditions),
        **({"agent": agent} if (agent := _agent(records)) else {}),
        "llm": {
            "model": config.agent_name,
            "calls": llm_stats.get("calls", 0),
            "cache_hits": llm_stats.get("cache_hits", 0),
            "errors": sum(r.status == "llm_error" for r in records),
            "prompt_tokens": sum(r.prompt_tokens for r in records),
            "completion_tokens": sum(r.completion_tokens for r in records),
            "cost_usd": round(sum(r.cost_usd for r in records if not r.cached), 6),
        },
        "per_query": _per_query(records),
        "timing": {
            "llm_seconds": round(sum(r.llm_seconds for r in records), 3),
            "exec_seconds": round(sum(r.exec_seconds for r in records), 3),
        },
    }
    return RunSummary.model_validate(summary)
