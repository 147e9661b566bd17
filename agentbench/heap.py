"""The cyclic garbage collector around phases that create many objects that live on.

Python's collector runs a full pass whenever the objects that survived earlier passes have grown by a
quarter, and each pass scans all of them again. Importing LiteLLM (about 380,000 objects) set off so many
passes that they took a quarter of the import's time and found almost no garbage; a run's set-up (the
pool, the retrieval results) makes each full pass during generation take 0.1-0.15 s, a pause in which
the run's event loop neither sends requests nor reads answers. At exit, the interpreter's last full
passes over what a run left alive took a quarter of a second after its last line of output.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
from collections.abc import Iterator

__all__ = ["freeze_at_exit", "frozen_heap", "importing"]


@contextlib.contextmanager
def importing() -> Iterator[None]:
    """No collection during a large import; what it created (modules, classes: alive until exit) is then
    left out of later full passes for good (:func:`gc.freeze`)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Full passes inside scan only the objects created inside: what exists on entry (a run's set-up,
    alive until the run ends) is frozen, and handed back to the collector on exit."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def freeze_at_exit() -> None:
    """After every other exit handler, freeze the heap: the interpreter's shutdown then frees objects by
    their reference counts without scanning them all for cycles, whose memory goes back to the system
    with the process anyway. For a command's process only (a library's caller may live on)."""
    atexit.register(gc.freeze)  # handlers run last-registered first: call this before any other
