"""agentbench.heap: the cyclic collector paused during large imports and kept off long-lived objects."""

from __future__ import annotations

import gc
import subprocess
import sys

from agentbench.heap import frozen_heap, importing


def test_importing_pauses_the_collector_and_freezes_what_was_made() -> None:
    enabled = gc.isenabled()
    gc.unfreeze()
    with importing():
        assert not gc.isenabled()
        made = [[] for _ in range(1000)]  # containers the collector tracks
    assert gc.isenabled() == enabled
    assert gc.get_freeze_count() >= len(made)
    gc.unfreeze()


def test_frozen_heap_hands_back_what_it_froze() -> None:
    gc.unfreeze()
    kept = [[] for _ in range(1000)]
    with frozen_heap():
        assert gc.get_freeze_count() >= len(kept)
    assert gc.get_freeze_count() == 0


def test_freeze_at_exit_runs_after_the_handlers_registered_later() -> None:
    code = (
        "import atexit, gc\n"
        "from agentbench.heap import freeze_at_exit\n"
        "atexit.register(lambda: print('earlier', gc.get_freeze_count() > 0))\n"
        "freeze_at_exit()\n"
        "atexit.register(lambda: print('later', gc.get_freeze_count() > 0))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["later False", "earlier True"]


def test_litellm_already_imported_is_not_frozen_again() -> None:
    """_import runs for every in-process request: only the first, real import may freeze the heap, or
    every request would freeze the run's live objects (and their garbage) for good."""
    from agentbench.llm._litellm import plain_litellm

    plain_litellm()  # the real import, if this process has not made it yet
    gc.unfreeze()
    for _ in range(3):
        plain_litellm()
    assert gc.get_freeze_count() == 0
