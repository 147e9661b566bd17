"""Analysis stage: propagation metrics, confidence intervals, summaries and reports.

Names load on first use (PEP 562): a run imports ``analysis.noninferiority`` to parse its gate flags
before any work, and that must not pull in scipy.stats and the report renderers ahead of the first LLM
call (about 1.5 s on a 2-core machine).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

_EXPORTS = {
    "compare_sources": "compare",
    "load_run": "compare",
    "load_sources": "compare",
    "paired_stats": "compare",
    "evaluate_gate": "gate",
    "gate_results": "gate",
    "parse_thresholds": "gate",
    "write_junit": "gate",
    "render_html": "html",
    "write_html": "html",
    "gate_runs": "noninferiority",
    "paired_gate": "noninferiority",
    "paired_interval": "noninferiority",
    "parse_margins": "noninferiority",
    "plan_queries": "noninferiority",
    "summarize": "propagation",
    "render_report": "report",
    "write_report": "report",
    "proportion": "stats",
    "print_summary": "terminal",
}

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

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .compare import compare_sources, load_run, load_sources, paired_stats
    from .gate import evaluate_gate, gate_results, parse_thresholds, write_junit
    from .html import render_html, write_html
    from .noninferiority import gate_runs, paired_gate, paired_interval, parse_margins, plan_queries
    from .propagation import summarize
    from .report import render_report, write_report
    from .stats import proportion
    from .terminal import print_summary
