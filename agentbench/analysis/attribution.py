"""What retrieval did to this agent, query by query: paired effects against closed_book and oracle.

A run holds every condition for every query, so each query's outcomes can be paired. A ``rag`` failure
with a buggy top-1 on a query the model solves closed-book was caused by retrieval; on a query it also
fails closed-book, retrieval changed nothing. Definitions (queries with both conditions scored):

- retrieval-induced failure: closed_book passes, rag fails, the rag top-1 fails the query's tests;
- retrieval rescue: closed_book fails, rag passes;
- net effect of retrieval = rag − closed_book, cost of a buggy context = distractor − closed_book, value of
  the right context = oracle − closed_book (differences of pass rates on the same queries);
- retrieval's share of the oracle gain = (rag − closed_book) / (oracle − closed_book).

Each comes with its count, rate, a paired 95% bootstrap interval (queries resampled with replacement, one
seeded set of resamples for every number) and the exact McNemar p of its pair of conditions.

With repeated samples (``--samples`` above 1) a query's outcome under a condition is its pass fraction
over the scored samples, and the same definitions are read on fractions: a retrieval-induced failure is a
query whose rag fraction is below its closed_book one (top-1 failing), a rescue one whose rag fraction is
above; differences are of mean fractions; the McNemar p becomes the two-sided sign test of the per-query
differences (which it is, on 0/1 outcomes); a transition counts a fraction of at least a half as a pass.

The decomposition splits the rag pass rate over what the top-1 was, P(kind) × P(pass | kind), which sums
to the rag pass rate exactly, and sets it beside the counterfactual "had exec@1 been 1": rag's outcome
where the top-1 passes the tests, oracle's where it does not. The gap rag → counterfactual is what the
ranking costs; counterfactual → oracle is the model not using correct context as well as the canonical.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import binomtest

from ..pipeline.records import RunRecord
from .passk import query_passes
from .summary import (
    Attribution,
    CountEffect,
    Counterfactual,
    Decomposition,
    DifferenceEffect,
    KindShare,
    QueryOutcome,
    ShareOfGain,
    Unavailable,
)

__all__ = ["attribution", "query_outcomes", "retrieval_indicators", "TOP1_KINDS", "N_RESAMPLES"]

N_RESAMPLES = 5000
TOP1_KINDS = ("canonical", "own_distractor", "other_snippet", "none")
_PAIRS = {
    "net_effect_of_retrieval": ("closed_book", "rag"),
    "cost_of_buggy_context": ("closed_book", "distractor"),
    "value_of_right_context": ("closed_book", "oracle"),
}


def query_outcomes(records: Sequence[RunRecord]) -> dict[str, QueryOutcome]:
    """Per query: pass/fail of every scored condition (with repeated samples, its pass fraction over the
    scored samples), and the rag top-1's kind and correctness."""
    out: dict[str, QueryOutcome] = {}
    sampled = any(r.sample is not None for r in records)
    passes = query_passes(records) if sampled else {}
    for r in records:
        q = out.setdefault(
            r.query_id, QueryOutcome(query_id=r.query_id, top1_kind=None, top1_passes=None, outcomes={})
        )
        if r.scored:
            c, n = passes.get((r.query_id, r.condition), (0, 0))
            q.outcomes[r.condition] = c / n if sampled else bool(r.passed)
        if r.condition == "rag":
            q.top1_kind = r.context_kind
            q.top1_passes = r.context_passes
    return out


def retrieval_indicators(queries: dict[str, QueryOutcome]) -> dict[str, dict[str, int]]:
    """Per query with closed_book and rag scored: 1 when it is a retrieval-induced failure (closed_book
    passes, rag fails, the top-1 fails the tests) or a retrieval rescue (closed_book fails, rag passes)."""
    induced: dict[str, int] = {}
    rescued: dict[str, int] = {}
    for q, v in sorted(queries.items()):
        o = v.outcomes
        if "closed_book" in o and "rag" in o:  # on 0/1 outcomes: passes closed-book and fails with rag
            induced[q] = int(o["closed_book"] > o["rag"] and v.top1_passes is False)
            rescued[q] = int(o["rag"] > o["closed_book"])
    return {"retrieval_induced_failures": induced, "retrieval_rescues": rescued}


def _round(x: float | None) -> float | None:
    return None if x is None else round(float(x), 4)


def _mcnemar(a: np.ndarray, b: np.ndarray) -> float:
    """Exact McNemar p of paired 0/1 outcomes (two-sided binomial test of the discordant pairs); on pass
    fractions, the sign test of the per-query differences, which is the same test on 0/1 outcomes."""
    a_only, b_only = int(np.sum(a > b)), int(np.sum(b > a))
    return float(binomtest(b_only, a_only + b_only, 0.5).pvalue) if a_only + b_only else 1.0


def _ci(samples: np.ndarray) -> list[float] | None:
    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return None
    lo, hi = np.percentile(samples, [2.5, 97.5])
    return [round(float(lo), 4), round(float(hi), 4)]


class _Resamples:
    """One seeded set of bootstrap resamples per number of queries, shared by every statistic."""

    def __init__(self, seed: int, n_resamples: int) -> None:
        self.seed, self.n_resamples = seed, n_resamples
        self._by_n: dict[int, np.ndarray] = {}

    def __call__(self, n: int) -> np.ndarray:
        if n not in self._by_n:
            self._by_n[n] = np.random.default_rng(self.seed).integers(0, n, size=(self.n_resamples, n))
        return self._by_n[n]


def _count(indicator: np.ndarray, a: np.ndarray, b: np.ndarray, resample: _Resamples) -> CountEffect:
    n = int(indicator.size)
    idx = resample(n)
    return CountEffect(
        n=n,
        count=int(indicator.sum()),
        rate=_round(indicator.mean()),
        ci95=_ci(indicator[idx].mean(axis=1)),
        p_value=_round(_mcnemar(a, b)),
    )


def _difference(
    a: np.ndarray, b: np.ndarray, names: tuple[str, str], resample: _Resamples
) -> DifferenceEffect:
    n = int(a.size)
    idx = resample(n)
    return DifferenceEffect(
        n=n,
        baseline=names[0],
        other=names[1],
        baseline_rate=_round(a.mean()),
        other_rate=_round(b.mean()),
        difference=_round(b.mean() - a.mean()),
        ci95=_ci((b - a)[idx].mean(axis=1)),
        p_value=_round(_mcnemar(a, b)),
    )


def _paired(queries: dict[str, QueryOutcome], *conditions: str) -> tuple[list[str], list[np.ndarray]]:
    ids = sorted(q for q, v in queries.items() if all(c in v.outcomes for c in conditions))
    return ids, [np.array([queries[q].outcomes[c] for q in ids], dtype=float) for c in conditions]


def _unavailable(reason: str) -> Unavailable:
    return Unavailable(n=0, reason=reason)


def _missing(queries: dict[str, QueryOutcome], *conditions: str) -> str | None:
    present = {c for v in queries.values() for c in v.outcomes}
    absent = [c for c in conditions if c not in present]
    if absent:
        return f"needs the {' and '.join(absent)} condition{'s' if len(absent) > 1 else ''} in the run"
    return None


def _share_of_gain(queries: dict[str, QueryOutcome], resample: _Resamples) -> ShareOfGain | Unavailable:
    if reason := _missing(queries, "closed_book", "rag", "oracle"):
        return _unavailable(reason)
    ids, (cb, rag, oracle) = _paired(queries, "closed_book", "rag", "oracle")
    if not ids:
        return _unavailable("no query has closed_book, rag and oracle all scored")
    gain = oracle.mean() - cb.mean()
    out = ShareOfGain(
        n=len(ids), rag_gain=_round(rag.mean() - cb.mean()), oracle_gain=_round(gain), share=None, ci95=None
    )
    if gain == 0:
        out.reason = "oracle passes no more queries than closed_book: there is no gain to share"
        return out
    idx = resample(len(ids))
    with np.errstate(divide="ignore", invalid="ignore"):
        shares = (rag[idx].mean(axis=1) - cb[idx].mean(axis=1)) / (
            oracle[idx].mean(axis=1) - cb[idx].mean(axis=1)
        )
    out.share, out.ci95 = _round((rag.mean() - cb.mean()) / gain), _ci(shares)
    return out


def _decomposition(queries: dict[str, QueryOutcome]) -> Decomposition | Unavailable:
    if reason := _missing(queries, "rag"):
        return _unavailable(reason)
    rag_ids = sorted(q for q, v in queries.items() if "rag" in v.outcomes)
    n = len(rag_ids)
    kinds: dict[str, KindShare] = {}
    for kind in TOP1_KINDS:
        group = [q for q in rag_ids if (queries[q].top1_kind or "none") == kind]
        if not group:
            continue
        passed = sum(float(queries[q].outcomes["rag"]) for q in group)
        kinds[kind] = KindShare(
            n=len(group),
            share=_round(len(group) / n),
            pass_rate=_round(passed / len(group)),
            contribution=_round(passed / n),
        )
    rag_pass_rate = _round(sum(float(queries[q].outcomes["rag"]) for q in rag_ids) / n) if n else None
    out = Decomposition(
        n=n, rag_pass_rate=rag_pass_rate, by_top1_kind=kinds, counterfactual=_counterfactual(queries, rag_ids)
    )
    return out


def _counterfactual(queries: dict[str, QueryOutcome], rag_ids: list[str]) -> Counterfactual | Unavailable:
    """rag's outcome where the top-1 passes the tests, oracle's where it does not."""
    if "oracle" not in {c for v in queries.values() for c in v.outcomes}:
        return _unavailable("needs the oracle condition in the run")
    both = [q for q in rag_ids if "oracle" in queries[q].outcomes]
    if not both:
        return _unavailable("no query has both rag and oracle scored")
    rag = np.array([queries[q].outcomes["rag"] for q in both], dtype=float)
    oracle = np.array([queries[q].outcomes["oracle"] for q in both], dtype=float)
    correct = np.array([queries[q].top1_passes is True for q in both])
    counterfactual = np.where(correct, rag, oracle)
    return Counterfactual(
        n=len(both),
        rag_pass_rate=_round(rag.mean()),
        rag_pass_rate_if_exec1_were_1=_round(counterfactual.mean()),
        oracle_pass_rate=_round(oracle.mean()),
        ranking_cost=_round(counterfactual.mean() - rag.mean()),
        context_use_gap=_round(oracle.mean() - counterfactual.mean()),
    )


def attribution(
    records: Sequence[RunRecord], *, seed: int = 0, n_resamples: int = N_RESAMPLES
) -> Attribution:
    """The ``attribution`` section of summary.json (see the module docstring)."""
    queries = query_outcomes(records)
    resample = _Resamples(seed, n_resamples)
    effects: dict[str, CountEffect | DifferenceEffect | Unavailable] = {}
    if reason := _missing(queries, "closed_book", "rag"):
        effects["retrieval_induced_failures"] = _unavailable(reason)
        effects["retrieval_rescues"] = _unavailable(reason)
    else:
        ids, (cb, rag) = _paired(queries, "closed_book", "rag")
        for name, by_query in retrieval_indicators(queries).items():
            if not ids:
                effects[name] = _unavailable("no query has both closed_book and rag scored")
                continue
            indicator = np.array([by_query[q] for q in ids], dtype=float)
            effects[name] = _count(indicator, cb, rag, resample)
    for name, pair in _PAIRS.items():
        if reason := _missing(queries, *pair):
            effects[name] = _unavailable(reason)
            continue
        ids, (a, b) = _paired(queries, *pair)
        effects[name] = (
            _difference(a, b, pair, resample) if ids else _unavailable(f"no query has {pair} scored")
        )
    return Attribution(
        n_queries=len(queries),
        resamples=n_resamples,
        seed=seed,
        **effects,
        retrieval_share_of_oracle_gain=_share_of_gain(queries, resample),
        decomposition=_decomposition(queries),
        transitions=_transitions(queries),
    )


def _transitions(queries: dict[str, QueryOutcome]) -> dict[str, dict[str, int]]:
    """closed_book → rag outcome counts by the rag top-1's kind (the view the HTML report draws)."""
    counts: dict[str, dict[str, int]] = {}
    for v in queries.values():
        o = v.outcomes
        if "closed_book" not in o or "rag" not in o:
            continue
        key = f"{'pass' if o['closed_book'] >= 0.5 else 'fail'}→{'pass' if o['rag'] >= 0.5 else 'fail'}"
        kind = v.top1_kind or "none"
        counts.setdefault(key, {}).setdefault(kind, 0)
        counts[key][kind] += 1
    order = ("pass→pass", "pass→fail", "fail→pass", "fail→fail")
    return {k: dict(sorted(counts[k].items())) for k in order if k in counts}
