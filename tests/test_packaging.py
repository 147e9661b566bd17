"""An installed (non-editable) agentbench carries what its commands read from disk: prompt templates, the
sandbox image definition and the bundled pools, so `agentbench sandbox build` works without a checkout."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from .conftest import ROOT


@pytest.mark.slow
def test_wheel_carries_data_files(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            str(ROOT),
            "-w",
            str(tmp_path),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("agentbench-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    data = (
        next(n.split("/data/")[0] for n in names if "/data/share/agentbench/" in n)
        + "/data/share/agentbench/"
    )
    for needed in (
        "sandbox/Dockerfile",
        "sandbox/worker.py",
        "prompts/rag.md",
        "prompts/agent_rag.md",
        "prompts/README.md",
    ):
        assert data + needed in names, needed
    assert "agentbench/execution/harness.py" in names
    assert "agentbench/pools/core/pool/queries.jsonl" in names
    for name in (
        "pool/queries.jsonl",
        "pool/corpus.jsonl",
        "sources/humaneval.toml",
        "LICENSE",
        "left_out.txt",
    ):
        assert f"agentbench/pools/humaneval/{name}" in names, name  # --pool humaneval and its license
    assert "agentbench/analysis/templates/report.html.j2" in names  # the HTML report's templates
    assert "agentbench/__init__.py" in names and "agentbench/api.py" in names


def test_installed_layout_finds_sandbox_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a checkout next to the package, the files come from <prefix>/share/agentbench/sandbox."""
    from agentbench.execution import engine

    share = tmp_path / "share" / "agentbench" / "sandbox"
    share.mkdir(parents=True)
    for name in engine.IMAGE_FILES:
        (share / name).write_text((ROOT / "sandbox" / name).read_text())
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    monkeypatch.setattr(engine, "__file__", str(tmp_path / "site" / "agentbench" / "execution" / "engine.py"))
    assert engine._sandbox_dir() == share
