"""The execution package's public names, and that importing it does not load the Docker SDK."""

from __future__ import annotations

import subprocess
import sys

import agentbench.execution as execution


def test_public_names() -> None:
    assert set(execution.__all__) == {
        "Job",
        "ExecResult",
        "Executor",
        "ProcessExecutor",
        "DockerExecutor",
        "ExecCache",
        "run_cached",
        "make_executor",
        "SANDBOX_KINDS",
        "PASS",
        "FAIL",
        "TIMEOUT",
    }
    assert all(hasattr(execution, name) for name in execution.__all__)


def test_import_is_cheap() -> None:
    code = "import sys, agentbench.execution; print('docker' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
