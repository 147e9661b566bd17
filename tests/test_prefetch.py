"""While a run generates, a background thread writes retrieval.json and imports what comes after."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from agentbench.api import AFTER_RUN_MODULES
from agentbench.pipeline.prefetch import import_quietly


@pytest.fixture(autouse=True)
def _forget_the_test_module():
    yield
    sys.modules.pop("prefetched_here", None)


def test_modules_are_imported_until_one_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "prefetched_here.py").write_text(
        "import threading\nTHREAD = threading.current_thread().name\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import_quietly(["no_such_module_anywhere", "prefetched_here"])
    assert "prefetched_here" not in sys.modules  # a failed import stops the prefetch: nothing after it
    thread = threading.Thread(target=import_quietly, args=(["prefetched_here", "no_such_module"],), name="bg")
    thread.start()
    thread.join(timeout=60)
    assert sys.modules["prefetched_here"].THREAD == "bg"


def test_the_after_run_modules_exist() -> None:
    import importlib.util

    assert all(importlib.util.find_spec(name) is not None for name in AFTER_RUN_MODULES)
