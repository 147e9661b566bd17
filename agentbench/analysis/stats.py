"""Confidence intervals for proportions (Wilson score, via scipy)."""

from __future__ import annotations

from scipy.stats import binomtest

from .summary import Proportion

__all__ = ["proportion", "rate"]


def rate(k: int, n: int) -> float | None:
    return round(k / n, 4) if n else None


def proportion(k: int, n: int) -> Proportion:
    """``k`` of ``n`` with its Wilson interval, which behaves at 0 and 1 and small n."""
    if n == 0:
        return Proportion(n=0, passed=0, pass_rate=None, ci95=None)
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return Proportion(n=n, passed=k, pass_rate=round(k / n, 4), ci95=[round(ci.low, 4), round(ci.high, 4)])
