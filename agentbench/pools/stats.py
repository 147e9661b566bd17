"""Pool summary numbers (`agentbench pool stats`)."""

from __future__ import annotations

from collections import Counter

from .models import Pool

__all__ = ["pool_stats"]


def pool_stats(pool: Pool) -> dict:
    """Counts a user checks before trusting a pool: size, domains, distractors per query, bug types."""
    per_query = Counter(len(q.paired_distractor_corpus_ids) for q in pool.queries)
    n = len(pool.queries)
    return {
        "pool": pool.name,
        "queries": n,
        "snippets": len(pool.corpus),
        "canonicals": sum(s.label == "correct" for s in pool.corpus),
        "distractors": sum(s.label == "incorrect" for s in pool.corpus),
        "domains": dict(sorted(Counter(q.domain for q in pool.queries).items())),
        "distractors_per_query": {str(k): per_query[k] for k in sorted(per_query, reverse=True)},
        "share_with_4_distractors": round(per_query[4] / n, 4) if n else 0.0,
        "bug_types": dict(sorted(Counter(s.bug_type for s in pool.corpus if s.bug_type).items())),
    }
