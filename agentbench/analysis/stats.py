"""Confidence intervals for proportions (Wilson score, via scipy) and Holm's multiple-test correction."""

from __future__ import annotations

from collections.abc import Sequence

from scipy.stats import binomtest

from .summary import Proportion

__all__ = ["proportion", "rate", "holm"]


def rate(k: int, n: int) -> float | None:
    return round(k / n, 4) if n else None


def proportion(k: int, n: int) -> Proportion:
    """``k`` of ``n`` with its Wilson interval, which behaves at 0 and 1 and small n."""
    if n == 0:
        return Proportion(n=0, passed=0, pass_rate=None, ci95=None)
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return Proportion(n=n, passed=k, pass_rate=round(k / n, 4), ci95=[round(ci.low, 4), round(ci.high, 4)])


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values (Holm 1979, "A simple sequentially rejective multiple test
    procedure", Scand. J. Statist. 6:65-70), in the order given; None (an untestable pair) stays None and
    is not counted in the family.

    Why: a leaderboard of m rows makes m - 1 neighbouring comparisons, and at 0.05 each, some would look
    significant by chance. Holm controls the family-wise error rate like Bonferroni, with more power. The
    i-th smallest of the m tested p-values is multiplied by m - i + 1, the running maximum keeps the
    adjusted values in the order of the raw ones, and they are capped at 1; an adjusted p below alpha is
    exactly a rejection by Holm's step-down procedure at alpha. (scipy has only the Benjamini-Hochberg and
    -Yekutieli false-discovery corrections; statsmodels' ``multipletests(method="holm")`` is the same.)
    """
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(tested)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out
