"""Pool summary numbers (`agentbench pool stats`)."""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

from .build_report import read_build_report
from .models import Pool

__all__ = ["pool_stats"]


def pool_stats(pool: Pool) -> dict:
    """Counts a user checks before trusting a pool: size, domains, distractors per query, bug types, and
    (for a pool ``pool build`` wrote, which leaves its report beside the files) the mutants the builder
    rejected, by reason, duplicates included."""
    per_query = Counter(len(q.paired_distractor_corpus_ids) for q in pool.queries)
    paired = {c for q in pool.queries for c in q.paired_distractor_corpus_ids}
    n = len(pool.queries)
    report = read_build_report(pool.path) if pool.path else None
    return {
        "pool": pool.name,
        "queries": n,
        "snippets": len(pool.corpus),
        "canonicals": sum(s.label == "correct" for s in pool.corpus),
        "distractors": len(paired),
        "other_snippets": sum(s.label == "incorrect" and s.corpus_id not in paired for s in pool.corpus),
        "domains": dict(sorted(Counter(q.domain for q in pool.queries).items())),
        "distractors_per_query": {str(k): per_query[k] for k in sorted(per_query, reverse=True)},
        "share_with_4_distractors": round(per_query[4] / n, 4) if n else 0.0,
        "bug_types": dict(sorted(Counter(s.bug_type for s in pool.corpus if s.bug_type).items())),
        "failing_share": failing_share_stats(pool),
        "rejected_mutants": rejected_mutants(report),
        "top_up": top_up_stats(report),
    }


def top_up_stats(report: dict | None) -> dict[str, Any] | None:
    """Whether the build's top-up rule was on and how many distractors it gave (from the build report);
    None for a pool without one, or built before the rule was recorded."""
    if not report or not isinstance(report.get("top_up"), bool):
        return None
    return {"rule": report["top_up"], "distractors": int(report.get("topped_up") or 0)}


def rejected_mutants(report: dict | None) -> dict[str, int] | None:
    """Mutants the build rejected, by reason (from the pool's build report); None when it has none."""
    rejects = report.get("rejects") if report else None
    if not isinstance(rejects, dict):
        return None
    return {str(k): int(v) for k, v in sorted(rejects.items()) if isinstance(v, int)}


def failing_share_stats(pool: Pool) -> dict:
    """How much of its suite each distractor fails (from ``failing_tests`` in the distractor metadata).

    A realistic distractor fails a few asserts: one failing all of them is a crash, not a near-miss, and
    tells a reader little about why a retriever ranked it first. The builder takes such distractors only
    to top up a task short of near misses (``failing_all`` counts them).
    """
    suites = {q.query_id: len(q.test_suite) for q in pool.queries}
    shares = sorted(
        len(d.failing_tests) / suites[d.query_id]
        for d in pool.distractors
        if "failing_tests" in d.model_fields_set and suites.get(d.query_id)
    )
    if not shares:
        return {"distractors": 0}
    bins = Counter(min(int(x * 10), 9) if x < 1 else 10 for x in shares)
    labels = [f"{b / 10:.1f}-{(b + 1) / 10:.1f}" for b in range(10)] + ["1.0 (all)"]
    quartiles = statistics.quantiles(shares, n=4) if len(shares) > 1 else [shares[0]] * 3
    return {
        "distractors": len(shares),
        "median": round(statistics.median(shares), 4),
        "p25": round(quartiles[0], 4),
        "p75": round(quartiles[2], 4),
        "failing_all": sum(x >= 1 for x in shares),
        "histogram": {labels[b]: bins.get(b, 0) for b in range(11)},
    }
