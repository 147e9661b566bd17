"""Shared fixtures: a tiny valid pool written as ExecRetrieval JSONL, and CLI invocation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# workers kept between runs are a user's choice; tests that want them (test_llm_kept.py) turn them on
os.environ.pop("AGENTBENCH_KEEP_WORKERS", None)
AGENTBENCH = [sys.executable, "-m", "agentbench"]

TINY_CODE = "def add_one(x):\n    if x is None:\n        return 0\n    return x + 1\n"
TINY_BUG = "def add_one(x):\n    if x is None:\n        return 0\n    return x - 1\n"


def tiny_rows() -> dict[str, list[dict]]:
    return {
        "queries.jsonl": [
            {
                "query_id": "q_0001",
                "query": "add one to a number",
                "test_suite": ["assert add_one(1) == 2", "assert add_one(None) == 0"],
                "correct_corpus_ids": ["c_0001"],
                "paired_distractor_corpus_ids": ["c_0002"],
                "entry_id": "e1",
                "metadata": {"domain": "math_numerical"},
                "extra_field": {"kept": True},
            }
        ],
        "corpus.jsonl": [
            {"corpus_id": "c_0001", "code": TINY_CODE, "label": "correct", "source_entry_id": "e1"},
            {
                "corpus_id": "c_0002",
                "code": TINY_BUG,
                "label": "incorrect",
                "bug_type": "wrong_operator",
                "source_entry_id": "e1",
            },
        ],
    }


def write_rows(path: Path, rows: dict[str, list]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name, items in rows.items():
        lines = [item if isinstance(item, str) else json.dumps(item) for item in items]
        (path / name).write_text("".join(line + "\n" for line in lines))
    return path


@pytest.fixture
def tiny_pool(tmp_path: Path) -> Path:
    return write_rows(tmp_path / "tiny", tiny_rows())


def run_cli(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*AGENTBENCH, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )


def core_subset(n: int, out: Path, step: int = 1) -> Path:
    """``n`` core queries (the first, or every ``step``-th from the first) with only their own snippets,
    written as a pool at ``out`` (so a run embeds a handful of texts, not the whole corpus)."""
    from agentbench.pools import load_pool, write_pool

    core = load_pool("core")
    write_pool(core.only(core.queries[::step][:n]), out)
    return out


def require_docker() -> None:
    """Skip a Docker test where there is no engine or image; in CI (``CI`` set) fail instead."""
    from agentbench.execution.select import docker_status

    reason = docker_status()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"Docker is required in CI: {reason}")
        pytest.skip(reason)


def alive(pid: int) -> bool:
    """Whether process ``pid`` is running (a zombie has ended: only its exit status is left)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def parent_of(pid: int) -> int | None:
    """The parent of process ``pid``, None once it has ended."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid:"))


def still_alive(pids: list[int], wait: float = 30.0) -> list[int]:
    """Those of ``pids`` still running after waiting up to ``wait`` s for them to end."""
    deadline = time.monotonic() + wait
    while (running := [pid for pid in pids if alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return running
