"""Importing what a run needs after its generation stage while that stage waits on the model.

The analysis stage imports scipy.stats (about 0.7 s of CPU on a 2-core machine) and its report renderers.
Imported after the last record, that time adds to every run; imported in a background thread while the
requests are in flight, it mostly fills time the process spends waiting (an API-bound run's main thread is
idle between replies). A failed import is left for the real import to report, in its own place.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import import_module

__all__ = ["import_quietly"]


def import_quietly(names: Sequence[str]) -> None:
    """Import ``names`` in order, stopping silently at the first that fails."""
    for name in names:
        try:
            import_module(name)
        except Exception:  # noqa: BLE001 - the caller's own import raises it where it belongs
            return
