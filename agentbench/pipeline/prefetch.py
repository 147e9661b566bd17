"""Importing what a run needs after its generation stage while that stage waits on the model.

The analysis stage imports scipy.stats (about 0.7 s of CPU on a 2-core machine) and its report renderers.
Imported after the last record, that time adds to every run; imported in a background thread while the
requests are in flight, it mostly fills time the process spends waiting (an API-bound run's main thread is
idle between replies). A failed import is left for the real import to report, in its own place.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from importlib import import_module

__all__ = ["prefetch_modules"]


def _import_all(names: Sequence[str]) -> None:
    for name in names:
        try:
            import_module(name)
        except Exception:  # noqa: BLE001 - the caller's own import raises it where it belongs
            return


def prefetch_modules(names: Sequence[str]) -> threading.Thread | None:
    """Import ``names`` in a daemon thread (started now); None when there is nothing to import."""
    if not names:
        return None
    thread = threading.Thread(
        target=_import_all, args=(tuple(names),), name="agentbench-prefetch", daemon=True
    )
    thread.start()
    return thread
