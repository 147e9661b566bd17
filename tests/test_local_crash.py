"""A local model that dies of a signal ends the run with one line, exit code 2, and nothing lost.

The real 0.5B model runs in its worker process; the test kills that process with a real SIGILL (what a
llama.cpp build for another CPU receives), not a raised exception.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentbench.llm import LLMClient
from agentbench.llm.local import LocalModelDied, death_message, load_local_model
from agentbench.pools import load_pool

from .conftest import ROOT, core_subset
from .test_pipeline_local import MODEL, weights  # noqa: F401 - the fixture

pytestmark = pytest.mark.slow
N_QUERIES = 8


def _workers_of(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and b"agentbench.llm.local_worker" in cmdline:
            found.append(int(entry.name))
    return found


@pytest.fixture
def isolated_cache(weights: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:  # noqa: F811
    """Fresh LLM, execution and embedding caches (so the model really generates), weights linked in."""
    cache = tmp_path / "cache"
    (cache / "models").mkdir(parents=True)
    for name in (weights.name, weights.name + ".verified"):
        (cache / "models" / name).symlink_to(weights.parent / name)
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(cache))
    return cache


def test_sigill_in_the_worker_is_one_fatal_error_naming_model_signal_and_fix(isolated_cache: Path) -> None:
    model, _ = load_local_model(MODEL)
    os.kill(model.pid, signal.SIGILL)
    with pytest.raises(LocalModelDied) as caught:
        model.create_chat_completion([{"role": "user", "content": "hi"}], max_tokens=4)
    message = str(caught.value)
    assert "\n" not in message
    assert (
        MODEL in message
        and "SIGILL" in message
        and "CMAKE_ARGS=" in message
        and "-DGGML_NATIVE=OFF" in message
    )

    # through LiteLLM and LLMClient it stays fatal: raised, never recorded as a per-query llm_error;
    # the next use starts a new worker, which serves normally
    model, _ = load_local_model(MODEL)
    os.kill(model.pid, signal.SIGILL)
    client = LLMClient(MODEL, cache=False, max_tokens=8, backoff_s=0)
    with pytest.raises(LocalModelDied, match="SIGILL"):
        asyncio.run(client.complete([{"role": "user", "content": "hi"}]))
    assert client.stats.errors == 0 and client.stats.retries == 0
    result = asyncio.run(client.complete([{"role": "user", "content": "Say hi."}]))
    assert result.ok and result.completion_tokens > 0


def test_death_messages_name_the_signal_and_the_fix() -> None:
    oom = death_message("local/m", -signal.SIGKILL)
    assert "SIGKILL" in oom and "out-of-memory" in oom and "AGENTBENCH_LLAMA_CTX" in oom
    segv = death_message("local/m", -signal.SIGSEGV, "GGML_ASSERT(x) failed")
    assert "SIGSEGV" in segv and "GGML_ASSERT" in segv and "CMAKE_ARGS=" in segv
    assert "code 3" in death_message("local/m", 3)


@pytest.fixture
def pool8(tmp_path: Path) -> Path:
    return core_subset(N_QUERIES, tmp_path / "pool8")


def test_run_killed_by_sigill_keeps_its_records_and_resumes(
    isolated_cache: Path, pool8: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    args = [
        sys.executable, "-m", "agentbench", "run", "--llm", MODEL, "--embedder", "bm25", "--pool", str(pool8),
        "--conditions", "closed_book", "--concurrency", "1", "--max-tokens", "128", "--sandbox", "process",
        "--run-dir", str(run_dir), "--store-dir", str(tmp_path / "stores"),
    ]  # fmt: skip
    env = {**os.environ, "AGENTBENCH_CACHE_DIR": str(isolated_cache)}
    proc = subprocess.Popen(
        args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    records = run_dir / "records.jsonl"
    deadline = time.monotonic() + 600
    killed = None
    while proc.poll() is None and time.monotonic() < deadline:
        # the first chunk (4 records) is on disk and the second is being generated: kill the model now
        if records.is_file() and len(records.read_text().splitlines()) >= 4:
            workers = _workers_of(proc.pid)
            if workers:
                killed = workers[0]
                os.kill(killed, signal.SIGILL)
                break
        time.sleep(0.1)
    out, err = proc.communicate(timeout=600)
    assert killed is not None, f"no model worker to kill; exit {proc.returncode}: {err[-2000:]}"
    assert proc.returncode == 2, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("agentbench: error: ") and "Traceback" not in err
    assert MODEL in last and "SIGILL" in last and "CMAKE_ARGS=" in last and "--resume" in last, last

    kept = [json.loads(line) for line in records.read_text().splitlines()]
    # finished generations (a 128-token reply may end before its code block closes: no_code)
    assert 4 <= len(kept) < N_QUERIES and all(r["status"] in ("ok", "no_code") for r in kept), [
        r["status"] for r in kept
    ]

    resumed = subprocess.run(
        [*args, "--resume"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    final = [json.loads(line) for line in records.read_text().splitlines()]
    assert final[: len(kept)] == kept  # nothing written before the crash was touched
    assert sorted(r["query_id"] for r in final) == sorted(q.query_id for q in load_pool(pool8).queries)
