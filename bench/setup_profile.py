"""Where a warm `agentbench run` spends its set-up: the time from process start to the agent's first call.

    python bench/setup_profile.py [--pool core] [--repeats 3] [--sandbox auto]

Runs ``agentbench run --pool POOL --agent <scripted agent> --embedder minilm`` in a fresh interpreter per
repeat, each in a new run directory, after one warm-up run that fills the caches (vectors, verdicts, the
retrieval stage). The scripted agent answers with its context (no LLM), and exits the process at its first
call, so the clock stops where a model's first request would start. Every phase of the set-up is timed
inside that process by wrapping the function that does it:

    imports        interpreter start to the CLI's ``run`` command body (python, typer, agentbench imports)
    load_pool      reading and validating the pool files
    executor       connecting to the sandbox (Docker) or starting the process executor
    retrieval      the retrieval stage (from the retrieval cache when warm)
    write          writing retrieval.json into the run directory
    plan+verdicts  planning the work items and the context snippets' verdicts
    rest           everything else before the first call (config, run directory, agent, threads)

Prints one line per phase (median over the repeats) and ``warm_setup_s=<median>`` against the issue's
target of 3 s (``warm_setup_vs_target=<ratio>``, at most 1.0 meets it), with the load average: a busy
machine slows every phase. Exit code 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 3.0
ROOT = Path(__file__).resolve().parents[1]

# Runs inside the measured interpreter: wraps the set-up phases, then hands over to the CLI.
_CHILD = r"""
import json, os, sys, time
T0 = float(os.environ["SETUP_T0"])
OUT = os.environ["SETUP_OUT"]
spans = {}

def timed(owner, name, phase):
    fn = getattr(owner, name)
    def wrapper(*a, **k):
        start = time.time()
        try:
            return fn(*a, **k)
        finally:
            spans[phase] = spans.get(phase, 0.0) + time.time() - start
    setattr(owner, name, wrapper)

import agentbench.cli.run as cli_run
import agentbench.pipeline.evaluate as pe
from agentbench.pipeline.rundir import RunDirectory
spans["imports"] = time.time() - T0
timed(pe, "load_pool", "load_pool")
timed(pe, "make_executor", "executor")
timed(pe, "_retrieve", "retrieval")
timed(RunDirectory, "write_retrieval", "write")
timed(pe, "plan_items", "plan+verdicts")
timed(pe, "context_verdicts", "plan+verdicts")

import threading
FIRST = threading.Lock()

def agent(task):
    # the agent is called from several threads at once: the first call writes the spans and ends the
    # process; any other waits here for that
    FIRST.acquire()
    total = time.time() - T0
    spans["rest"] = total - sum(spans.values())
    spans["total"] = total
    with open(OUT + ".tmp", "w") as fh:
        json.dump(spans, fh)
    os.replace(OUT + ".tmp", OUT)
    os._exit(0)

import types
sys.modules["setup_probe"] = types.SimpleNamespace(agent=agent)
from agentbench.cli import main
sys.argv = ["agentbench", "run", *sys.argv[1:]]
main()
"""


def _once(args: argparse.Namespace, work: Path, i: int) -> dict[str, float]:
    out = work / f"spans-{i}.json"
    cmd = [
        sys.executable,
        "-c",
        _CHILD,
        "--pool",
        args.pool,
        "--agent",
        "setup_probe:agent",
        "--embedder",
        "minilm",
        "--sandbox",
        args.sandbox,
        "--run-dir",
        str(work / f"run-{i}"),
    ]
    env = {**os.environ, "SETUP_T0": repr(time.time()), "SETUP_OUT": str(out), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    if not out.exists():
        sys.exit(
            f"run {i} ended before the agent's first call (exit {proc.returncode}):\n{proc.stderr[-2000:]}"
        )
    return json.loads(out.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pool", default="core")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sandbox", default="auto")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="setup-profile-"))
    try:
        _once(args, work, 0)  # warm-up: fills the caches a warm run reads
        runs = [_once(args, work, i) for i in range(1, args.repeats + 1)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    phases = ["imports", "load_pool", "executor", "retrieval", "write", "plan+verdicts", "rest"]
    print(
        f"load average {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores); median of {args.repeats} warm runs"
    )
    for phase in phases:
        print(f"  {phase:<14} {statistics.median(r.get(phase, 0.0) for r in runs):6.2f} s")
    total = statistics.median(r["total"] for r in runs)
    print(f"warm_setup_s={total:.2f}")
    print(f"warm_setup_vs_target={total / TARGET_S:.3f}")
    return 0 if total <= TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
