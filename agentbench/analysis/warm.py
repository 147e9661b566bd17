"""The analysis stage's imports, made while a run waits on its agent.

scipy.stats alone takes half a second to import on a 2-core machine: paid after the last answer, it is
half a second between a run's last record and its summary. A run whose answers come from a model's API
spends most of its time waiting with a core to spare, and imports there cost nothing. Started only once
the first record is written, so that they never compete with the run's set-up or the LLM workers' own
start for the cores.
"""

from __future__ import annotations

import importlib
import threading

__all__ = ["ANALYSIS_MODULES", "import_in_background"]

ANALYSIS_MODULES = (
    "agentbench.analysis.propagation",
    "agentbench.analysis.report",
    "agentbench.analysis.terminal",
)
"""What a run's summary, report and terminal output import."""


def import_in_background() -> threading.Thread:
    """Import :data:`ANALYSIS_MODULES` in a daemon thread. A failure is left for the analysis stage,
    which imports them again and reports it there."""

    def load() -> None:
        for name in ANALYSIS_MODULES:
            try:
                importlib.import_module(name)
            except Exception:
                return

    thread = threading.Thread(target=load, name="agentbench-analysis-imports", daemon=True)
    thread.start()
    return thread
