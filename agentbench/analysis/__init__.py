"""Analysis stage: propagation metrics, confidence intervals, summaries and reports."""

from .propagation import summarize
from .report import print_summary, write_report
from .stats import proportion

__all__ = ["summarize", "print_summary", "write_report", "proportion"]
