"""ExecRetrieval metrics as pure functions over per-query records.

Relevance is execution, not labels: a retrieved snippet is relevant to a query when it passes *all* of
that query's asserts. Another query's canonical normally fails (it defines a different function) and so
counts as a miss; a functionally equivalent snippet from elsewhere in the pool counts as a hit.

Per query, for each cutoff k:

- ``exec@k``: 1 if any of the top k passes, else 0;
- ``precision@k``: passing snippets in the top k divided by k (also when the pool has fewer than k);
- ``ndcg@k``: binary-relevance nDCG; the ideal ranking holds ``n_relevant`` passing snippets, where
  ``n_relevant`` counts the query's canonicals plus any other retrieved snippet that passes;
- ``exec_ndcg_gap@k`` = exec@k - ndcg@k: how much of exec@k comes from hits below rank 1;
- ``mrr``: reciprocal rank of the first passing snippet within the retrieved depth (0 if none).

Aggregates are unweighted means over queries; confidence intervals are percentile bootstrap intervals over
queries (seeded). Diagnostics follow the paper: which snippets win rank 1 when it fails.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ._defaults import DEFAULT_KS

__all__ = [
    "Ranked",
    "QueryRecord",
    "exec_at_k",
    "precision_at_k",
    "ndcg_at_k",
    "reciprocal_rank",
    "per_query_metrics",
    "CUTOFF_METRICS",
    "is_metric_name",
    "aggregate",
    "diagnostics",
    "bootstrap_ci",
    "confidence_intervals",
    "failure_type",
    "metric_names",
    "DEFAULT_KS",
]

Relation = Literal["canonical", "paired", "other"]


@dataclass(frozen=True)
class Ranked:
    """One retrieved snippet as seen by one query."""

    corpus_id: str
    passes: bool  # passes every one of this query's asserts
    label: str  # the pool's label ("correct"/"incorrect"); reported, never used for scoring
    bug_type: str  # "" for canonicals
    relation: Relation  # this query's canonical, one of its paired distractors, or anything else
    score: float


@dataclass(frozen=True)
class QueryRecord:
    query_id: str
    domain: str
    ranked: tuple[Ranked, ...]  # best first
    n_relevant: int  # passing snippets known for this query (the nDCG ideal)
    canonical_below_paired: bool | None = None  # None: no canonical or no paired distractor

    @property
    def passes(self) -> list[bool]:
        return [r.passes for r in self.ranked]


def exec_at_k(passes: Sequence[bool], k: int) -> float:
    return 1.0 if any(passes[:k]) else 0.0


def precision_at_k(passes: Sequence[bool], k: int) -> float:
    return sum(passes[:k]) / k


def ndcg_at_k(passes: Sequence[bool], k: int, n_relevant: int) -> float:
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, n_relevant)))
    if ideal == 0:
        return 0.0
    gained = sum(1.0 / math.log2(i + 2) for i, ok in enumerate(passes[:k]) if ok)
    return gained / ideal


def reciprocal_rank(passes: Sequence[bool]) -> float:
    for i, ok in enumerate(passes):
        if ok:
            return 1.0 / (i + 1)
    return 0.0


def per_query_metrics(record: QueryRecord, ks: Sequence[int] = DEFAULT_KS) -> dict[str, float]:
    passes = record.passes
    n_relevant = max(record.n_relevant, sum(passes))
    out: dict[str, float] = {}
    for k in ks:
        e, n = exec_at_k(passes, k), ndcg_at_k(passes, k, n_relevant)
        out[f"exec@{k}"] = e
        out[f"precision@{k}"] = precision_at_k(passes, k)
        out[f"ndcg@{k}"] = n
        out[f"exec_ndcg_gap@{k}"] = e - n
    out["mrr"] = reciprocal_rank(passes)
    return out


CUTOFF_METRICS = ("exec", "precision", "ndcg", "exec_ndcg_gap")
"""Metrics reported at every cutoff k, as ``<name>@<k>``; ``mrr`` has no cutoff."""


def metric_names(ks: Sequence[int] = DEFAULT_KS) -> list[str]:
    names = [f"{m}@{k}" for m in CUTOFF_METRICS for k in ks]
    return [*names, "mrr"]


def is_metric_name(name: str) -> bool:
    """Whether ``name`` is a retrieval metric at some cutoff (``exec@3``) or ``mrr``; the CI gate's test."""
    if name == "mrr":
        return True
    family, at, k = name.partition("@")
    return bool(at) and family in CUTOFF_METRICS and k.isdigit() and not k.startswith("0")


def _per_query_table(records: Sequence[QueryRecord], ks: Sequence[int]) -> dict[str, np.ndarray]:
    rows = [per_query_metrics(r, ks) for r in records]
    return {name: np.array([row[name] for row in rows], dtype=np.float64) for name in metric_names(ks)}


def aggregate(records: Sequence[QueryRecord], ks: Sequence[int] = DEFAULT_KS) -> dict[str, float]:
    """Unweighted means over queries (0.0 for an empty list)."""
    table = _per_query_table(records, ks)
    return {name: float(values.mean()) if len(values) else 0.0 for name, values in table.items()}


def failure_type(item: Ranked) -> str:
    """What a failing rank-1 snippet is: a bug type, ``other_canonical`` or ``own_canonical``."""
    if item.relation == "canonical":
        return "own_canonical"
    if item.bug_type:
        return item.bug_type
    return "other_canonical" if item.label == "correct" else "unknown"


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _rank1_failures(records: Sequence[QueryRecord]) -> list[QueryRecord]:
    return [r for r in records if r.ranked and not r.ranked[0].passes]


def diagnostics(records: Sequence[QueryRecord], ks: Sequence[int] = DEFAULT_KS) -> dict:
    """Rank-1 failure analysis, canonical-vs-paired scores, ties, and breakdowns by bug type and domain."""
    fails = _rank1_failures(records)
    paired = sum(r.ranked[0].relation == "paired" for r in fails)
    below = [r.canonical_below_paired for r in records if r.canonical_below_paired is not None]
    tied = sum(len(r.ranked) > 1 and r.ranked[0].score == r.ranked[1].score for r in records)
    bug_counts = Counter(failure_type(r.ranked[0]) for r in fails)
    by_domain: dict[str, list[QueryRecord]] = defaultdict(list)
    for r in records:
        by_domain[r.domain].append(r)
    return {
        "rank1_failures": len(fails),
        "rank1_failures_paired": paired,
        "rank1_failure_paired_share": _share(paired, len(fails)),
        "canonical_below_paired_share": _share(sum(below), len(below)),
        "canonical_below_paired_n": len(below),
        "rank1_tied_share": _share(tied, len(records)),
        "by_bug_type": {bug: {"count": n, "share": n / len(fails)} for bug, n in sorted(bug_counts.items())},
        "by_domain": {
            domain: {"n_queries": len(rs), **aggregate(rs, ks)} for domain, rs in sorted(by_domain.items())
        },
    }


def _bootstrap_rows(rows: np.ndarray, *, seed: int, n_resamples: int, confidence: float) -> list[list[float]]:
    """Percentile intervals of each row's mean, in one scipy call (batched: bounded memory, faster)."""
    means = rows.mean(axis=1)
    if rows.shape[1] < 2:
        return [[float(m), float(m)] for m in means]
    import inspect

    from scipy.stats import bootstrap

    gen = np.random.default_rng(seed)
    seeded = {"rng": gen} if "rng" in inspect.signature(bootstrap).parameters else {"random_state": gen}
    res = bootstrap(
        (rows,),
        np.mean,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        batch=1000,
        axis=-1,
        **seeded,  # scipy < 1.15 calls it random_state
    )
    low = np.atleast_1d(res.confidence_interval.low)
    high = np.atleast_1d(res.confidence_interval.high)
    constant = np.all(rows == rows[:, :1], axis=1)  # an interval of a constant is the constant itself
    return [
        [float(m), float(m)] if c else [float(lo), float(hi)]
        for m, c, lo, hi in zip(means, constant, low, high, strict=True)
    ]


def bootstrap_ci(
    values: Sequence[float], *, seed: int = 0, n_resamples: int = 5000, confidence: float = 0.95
) -> list[float]:
    """Percentile bootstrap interval of the mean (scipy, seeded); a constant sample gives [mean, mean]."""
    arr = np.asarray(values, dtype=np.float64)
    if len(arr) == 0:
        return [0.0, 0.0]
    return _bootstrap_rows(arr[None, :], seed=seed, n_resamples=n_resamples, confidence=confidence)[0]


def confidence_intervals(
    records: Sequence[QueryRecord],
    ks: Sequence[int] = DEFAULT_KS,
    *,
    seed: int = 0,
    n_resamples: int = 5000,
    confidence: float = 0.95,
) -> dict[str, list[float]]:
    """95% intervals for every aggregate metric and for the two diagnostic shares."""
    table = _per_query_table(records, ks)
    out: dict[str, list[float]] = {}
    if records:
        rows = np.stack(list(table.values()))
        cis = _bootstrap_rows(rows, seed=seed, n_resamples=n_resamples, confidence=confidence)
        out = dict(zip(table, cis, strict=True))
    else:
        out = {name: [0.0, 0.0] for name in table}
    fails = _rank1_failures(records)
    if fails:
        paired = [float(r.ranked[0].relation == "paired") for r in fails]
        out["rank1_failure_paired_share"] = bootstrap_ci(paired, seed=seed, n_resamples=n_resamples)
    below = [float(r.canonical_below_paired) for r in records if r.canonical_below_paired is not None]
    if below:
        out["canonical_below_paired_share"] = bootstrap_ci(below, seed=seed, n_resamples=n_resamples)
    return out
