"""Faults around the local model's worker process: its parent's death, and repeatability of its output.

Real processes throughout: a parent Python process starts the real worker (``agentbench.llm.local_worker``)
and is killed with a real SIGKILL; the worker must not outlive it. The determinism test runs the real
0.5B model in fresh worker processes.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentbench.llm.local import DEFAULT_CTX, LocalModelProcess, llama_threads
from agentbench.llm.weights import local_model_spec

from .conftest import ROOT
from .test_pipeline_local import MODEL, weights  # noqa: F401 - the fixture

# The requirement is that the worker exits within 1 s of its parent's death; the tests allow 3 s so that
# a heavily loaded (shared, 2-core) machine cannot fail them. Without the watchdog the worker lives on
# until its generation ends (minutes here) or forever (a stalled load).
EXIT_BOUND_S = 3.0

needs_llama = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python is not installed"
)


def _worker_of(parent: int) -> int | None:
    """The pid of ``parent``'s local model worker, if it has one."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and b"agentbench.llm.local_worker" in cmdline:
            return int(entry.name)
    return None


def _state(pid: int) -> str | None:
    """The process state letter, None once the pid is gone."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _exited(pid: int) -> bool:
    # an orphan's zombie may linger until init reaps it: a zombie runs nothing, so it counts as exited
    return _state(pid) in (None, "Z", "X")


def _cpu_seconds(pid: int) -> float:
    fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wchans(pid: int) -> set[str]:
    """Where each thread of ``pid`` sleeps in the kernel."""
    found = set()
    for task in (Path("/proc") / str(pid) / "task").iterdir():
        try:
            found.add((task / "wchan").read_text().strip())
        except OSError:
            continue
    return found


def _wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


def _kill_parent_and_time_the_worker(parent: subprocess.Popen, worker: int) -> float:
    """SIGKILL ``parent``; seconds until ``worker`` has exited (or EXIT_BOUND_S + 10 if it has not)."""
    killed = time.monotonic()
    parent.kill()
    parent.wait(timeout=30)
    deadline = killed + EXIT_BOUND_S + 10
    while not _exited(worker) and time.monotonic() < deadline:
        time.sleep(0.02)
    return time.monotonic() - killed


def _cleanup(parent: subprocess.Popen, worker: int | None) -> None:
    if parent.poll() is None:
        parent.kill()
        parent.wait(timeout=30)
    if worker is not None and not _exited(worker):
        os.kill(worker, signal.SIGKILL)


STALLED_PARENT = """
import sys
from agentbench.llm.local import LocalModelProcess
# the weights are a FIFO that nobody writes: the worker blocks in llama.cpp's model loader for good
LocalModelProcess("stalled", sys.argv[1], n_ctx=512, n_threads=1)
"""


@needs_llama
@pytest.mark.parametrize("when", ["starting", "loading"])
def test_worker_exits_when_its_parent_is_killed_while_it_starts_or_loads(tmp_path: Path, when: str) -> None:
    weights_fifo = tmp_path / "weights.gguf"
    os.mkfifo(weights_fifo)
    parent = subprocess.Popen([sys.executable, "-c", STALLED_PARENT, str(weights_fifo)], cwd=ROOT)
    worker = None
    try:
        _wait_for(lambda: _worker_of(parent.pid) is not None, 60, "the parent to start its worker")
        worker = _worker_of(parent.pid)
        assert worker is not None
        if when == "loading":  # inside native code, opening the weights (GIL released, no input read)
            _wait_for(
                lambda: bool(_wchans(worker) & {"wait_for_partner", "fifo_open"}),
                60,
                "the worker to block opening its weights",
            )
        # "starting": killed at once, most likely before the worker's own code has run at all
        took = _kill_parent_and_time_the_worker(parent, worker)
        assert _exited(worker), f"worker {worker} still running {took:.1f} s after its parent's SIGKILL"
        assert took <= EXIT_BOUND_S, f"worker took {took:.1f} s to exit"
    finally:
        _cleanup(parent, worker)


GENERATING_PARENT = f"""
from agentbench.llm.local import load_local_model
model, _ = load_local_model({MODEL!r})
print(model.pid, flush=True)
# end-of-text and end-of-turn banned: the reply runs to max_tokens, minutes on two cores
model.create_chat_completion(
    [{{"role": "user", "content": "Count from 1 to 100000, one number per line."}}],
    temperature=0.0, max_tokens=3000, logit_bias={{151643: -1e9, 151645: -1e9}},
)
"""


@pytest.mark.slow
def test_worker_exits_when_its_parent_is_killed_mid_generation(weights: Path) -> None:  # noqa: F811
    parent = subprocess.Popen(
        [sys.executable, "-c", GENERATING_PARENT], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    worker = None
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        assert line.strip().isdigit(), f"parent did not load the model (exit {parent.wait()})"
        worker = int(line)
        assert _worker_of(parent.pid) == worker
        # the loaded worker idles on its input; once it burns CPU it is generating the long reply
        idle = _cpu_seconds(worker)
        _wait_for(lambda: _cpu_seconds(worker) > idle + 1.0, 120, "the worker to generate")
        took = _kill_parent_and_time_the_worker(parent, worker)
        assert _exited(worker), f"worker {worker} still running {took:.1f} s after its parent's SIGKILL"
        assert took <= EXIT_BOUND_S, f"worker took {took:.1f} s to exit"
    finally:
        _cleanup(parent, worker)


SYSTEM = (
    "You are an expert Python programmer. You write correct, self-contained Python 3 functions that use "
    "only the standard library."
)
TASK = (
    "Write a Python function for the following task.\n\nTask: {}\n\nUse exactly this signature:\n\n"
    "```python\n{}\n```\n\nReply with the complete function (and any imports it needs) in a single "
    "```python code block."
)
# Two of the core pool's closed-book prompts, as the agent sends them. They share the system prompt and
# the task preamble: llama-cpp-python would reuse that prefix from PROMPT_B's request and evaluate only the
# rest of PROMPT_A, and with this pair that used to change PROMPT_A's greedy reply within 64 tokens.
PROMPT_A = [
    {"role": "system", "content": SYSTEM},
    {
        "role": "user",
        "content": TASK.format(
            "Return the Hamming distance of two non-negative ints a and b: the number of bit positions in "
            "which they\ndiffer (an int, 0 when equal). Works for arbitrarily large ints.\nIf either "
            "argument is negative, return -1 (invalid).\nExample: bit_hamming_distance(8, 1) -> 2.",
            "def bit_hamming_distance(a, b):",
        ),
    },
]
PROMPT_B = [
    {"role": "system", "content": SYSTEM},
    {
        "role": "user",
        "content": TASK.format(
            "Reverse the order of the bits of an unsigned int n treated as exactly 32 bits wide (leading "
            "zeros\nincluded): bit 0 becomes bit 31, bit 1 becomes bit 30, and so on. Return the resulting "
            "int.\nIf n is negative or n >= 2**32, return None.\nExample: reverse_bits_32(3) -> 0xC0000000.",
            "def reverse_bits_32(n):",
        ),
    },
]
SAMPLING = {"temperature": 0.0, "max_tokens": 64, "seed": 0}


def _text(worker: LocalModelProcess, messages: list[dict[str, str]]) -> str:
    return worker.create_chat_completion(messages, **SAMPLING)["choices"][0]["message"]["content"]


@pytest.mark.slow
def test_a_prompt_gets_the_same_reply_in_fresh_workers_after_another_prompt_and_under_load(
    weights: Path,  # noqa: F811
) -> None:
    def fresh_worker() -> LocalModelProcess:
        name = local_model_spec(MODEL).name
        return LocalModelProcess(name, str(weights), n_ctx=DEFAULT_CTX, n_threads=llama_threads())

    worker = fresh_worker()
    try:
        first = _text(worker, PROMPT_A)
        other = _text(worker, PROMPT_B)
        after_other = _text(worker, PROMPT_A)
    finally:
        worker.close()

    # another fresh worker, with a process spinning on the CPU beside it the whole time
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        worker = fresh_worker()
        try:
            second = _text(worker, PROMPT_A)
        finally:
            worker.close()
    finally:
        burner.kill()
        burner.wait()

    assert "bit_hamming_distance" in first and "reverse_bits_32" in other
    assert after_other == first
    assert second == first
