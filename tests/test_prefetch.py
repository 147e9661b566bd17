"""Modules needed after a run are imported in the background while it generates."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agentbench.api import AFTER_RUN_MODULES
from agentbench.pipeline.prefetch import prefetch_modules


def test_named_modules_are_imported_in_a_background_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "prefetched_here.py").write_text(
        "import threading\nTHREAD = threading.current_thread().name\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    thread = prefetch_modules(["no_such_module_anywhere", "prefetched_here"])
    thread.join(timeout=60)
    assert "prefetched_here" not in sys.modules  # a failed import stops the prefetch: nothing after it
    thread = prefetch_modules(["prefetched_here", "no_such_module_anywhere"])
    thread.join(timeout=60)
    assert sys.modules["prefetched_here"].THREAD == "agentbench-prefetch"
    assert prefetch_modules([]) is None


def test_the_after_run_modules_exist() -> None:
    import importlib.util

    assert all(importlib.util.find_spec(name) is not None for name in AFTER_RUN_MODULES)


@pytest.fixture(autouse=True)
def _forget_the_test_module():
    yield
    sys.modules.pop("prefetched_here", None)
