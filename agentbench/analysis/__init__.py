"""Analysis stage: propagation metrics, confidence intervals, summaries and reports."""

from .compare import compare_sources, load_run, load_sources, paired_stats
from .gate import evaluate_gate, gate_results, parse_thresholds, write_junit
from .html import render_html, write_html
from .noninferiority import gate_runs, paired_gate, paired_interval, parse_margins, plan_queries
from .propagation import summarize
from .report import render_report, write_report
from .stats import proportion
from .terminal import print_summary

__all__ = [
    "summarize",
    "print_summary",
    "write_report",
    "render_report",
    "proportion",
    "load_run",
    "load_sources",
    "compare_sources",
    "paired_stats",
    "parse_thresholds",
    "evaluate_gate",
    "gate_results",
    "write_junit",
    "parse_margins",
    "paired_interval",
    "paired_gate",
    "gate_runs",
    "plan_queries",
    "render_html",
    "write_html",
]
