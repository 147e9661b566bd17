"""Repeated samples (``--samples N``): pass@k, each query's pass fraction and the flaky queries.

One generation per (query, condition) says whether the model solved a query once; with N samples at a
temperature above 0 the chance that at least one of k tries passes is estimated for every k <= N with the
unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models Trained on Code", eq. 1): with
n scored samples of which c pass,

    pass@k = 1 - C(n - c, k) / C(n, k) = 1 - prod_{i = n - c + 1}^{n} (1 - k / i)

(the product form avoids the huge binomials), averaged over the queries. A query whose samples disagree
(0 < passes < n) is flaky: its outcome under one sample is a coin toss, which the per-query pass fraction
(passes / n) keeps for the paired analyses (:mod:`.attribution`, :mod:`.compare`, :mod:`.noninferiority`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from ..models import Record
from ..pipeline.records import RunRecord
from ..retrieval.results import Number

__all__ = ["pass_at_k", "query_passes", "samples_summary", "SamplesSummary", "ConditionPassAtK"]
__all__ += ["QueryPassFraction"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al.'s unbiased pass@k of one query with ``n`` samples, ``c`` of them passing (``k <= n``)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:  # every draw of k samples holds a passing one
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


class QueryPassFraction(Record):
    """One (query, condition) over its samples."""

    query_id: str
    condition: str
    n: int
    """samples scored (llm_error and infra_error ones are not)"""
    passed: int
    fraction: Number | None
    """passed / n (None when no sample was scored)"""


class ConditionPassAtK(Record):
    """One condition's pass@k for k = 1..N, the mean of the per-query estimates."""

    n_queries: int
    """queries with at least one scored sample"""
    pass_at_k: dict[str, Number | None]
    """``pass@k`` -> its mean over the queries with at least k scored samples (None if there is none)"""
    flaky: int
    """queries whose samples disagree"""


class SamplesSummary(Record):
    """With ``--samples`` above 1: pass@k per condition, each query's pass fraction and the flaky queries."""

    samples: int
    """generations per (query, condition): N"""
    estimator: str = "Chen et al. 2021 unbiased pass@k"
    conditions: dict[str, ConditionPassAtK]
    per_query: list[QueryPassFraction]
    """every (query, condition) with its samples' pass fraction, in query order"""
    flaky: list[QueryPassFraction]
    """the (query, condition) pairs whose samples disagree: 0 < passed < n"""


def query_passes(records: Sequence[RunRecord]) -> dict[tuple[str, str], tuple[int, int]]:
    """``(query_id, condition)`` -> (passing, scored) samples, in record order."""
    out: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for r in records:
        counts = out[(r.query_id, r.condition)]
        if r.scored:
            counts[0] += int(r.passed)
            counts[1] += 1
    return {key: (c, n) for key, (c, n) in out.items()}


def samples_summary(
    records: Sequence[RunRecord], samples: int, conditions: Sequence[str]
) -> SamplesSummary | None:
    """The ``samples`` section of summary.json; None for a one-sample run (its summary stays as it was)."""
    if samples <= 1:
        return None
    passes = query_passes(records)
    per_query = [
        QueryPassFraction(query_id=q, condition=cond, n=n, passed=c, fraction=round(c / n, 4) if n else None)
        for (q, cond), (c, n) in passes.items()
    ]
    per_query.sort(
        key=lambda p: (p.query_id, list(conditions).index(p.condition) if p.condition in conditions else 0)
    )
    flaky = [p for p in per_query if 0 < p.passed < p.n]
    out: dict[str, ConditionPassAtK] = {}
    for cond in conditions:
        group = [p for p in per_query if p.condition == cond and p.n]
        estimates: dict[str, Number | None] = {}
        for k in range(1, samples + 1):
            values = [pass_at_k(p.n, p.passed, k) for p in group if p.n >= k]
            estimates[f"pass@{k}"] = round(float(np.mean(values)), 4) if values else None
        out[cond] = ConditionPassAtK(
            n_queries=len(group), pass_at_k=estimates, flaky=sum(p in flaky for p in group)
        )
    return SamplesSummary(samples=samples, conditions=out, per_query=per_query, flaky=flaky)


FRACTION_METHOD = "paired t interval of per-query pass-fraction differences"


def paired_fraction_interval(diffs: Sequence[float]) -> tuple[float, float, float]:
    """Mean of per-query pass-fraction differences (run - baseline) and its two-sided 95% t interval.

    With repeated samples a query's outcome is a fraction, not 0/1, so Newcombe's interval for paired
    proportions does not apply; the differences of a query's fractions are independent across queries and
    bounded, and their mean is close to normal for the query counts a gate is run on. One query, or
    differences all equal, give the widest ([-1, 1]) or a zero-width interval."""
    from scipy.stats import t

    d = np.asarray(diffs, dtype=float)
    if d.size == 0:
        raise ValueError("a paired interval needs at least one pair")
    mean = float(d.mean())
    if d.size == 1:
        return mean, -1.0, 1.0
    half = float(t.ppf(0.975, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size))
    return mean, max(mean - half, -1.0), min(mean + half, 1.0)
