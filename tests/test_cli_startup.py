"""``agentbench --help`` and every command's ``--help`` start without loading a heavy library.

Why: a ``--help`` that imports numpy, the pipeline and the stores takes seconds on a small machine, and a
user reading the options pays it every time (issue 33). Each help runs in a fresh interpreter, as
``python -m agentbench <command> --help`` does, and the modules loaded afterwards are read from
``sys.modules``; nothing is timed here (the wall time is ``bench/cli_startup.py``). The commands are
discovered from the typer app, so a new command is checked without editing this file.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from agentbench.cli import app

from .conftest import still_alive

ROOT = Path(__file__).resolve().parents[1]

# Libraries the stages load, each costing from tens of milliseconds to seconds to import; a top-level
# name ending in "*" matches every package starting with it.
HEAVY = (
    "numpy",
    "scipy",
    "pandas",
    "matplotlib",
    "PIL",
    "sklearn",
    "torch",
    "transformers",
    "sentence_transformers",
    "tokenizers",
    "huggingface_hub",
    "onnxruntime",
    "chromadb",
    "langchain*",
    "langsmith",
    "litellm",
    "openai",
    "tiktoken",
    "httpx",
    "aiohttp",
    "requests",
    "llama_cpp",
    "rank_bm25",
    "docker",
    "diskcache",
    "ray",
    "sympy",
    "networkx",
)
# The stage modules that pull those libraries in: a help must not load them either.
HEAVY_STAGES = ("agentbench.api", "agentbench.pipeline.evaluate", "agentbench.retrieval.evaluate")

# Runs one command line like ``python -m agentbench`` and writes its exit code and sys.modules as JSON
# to the file named by argv[1] (the help itself goes to stdout as usual).
PROBE = """
import json, runpy, sys
out, sys.argv = sys.argv[1], ["agentbench", *sys.argv[2:]]
code = 0
try:
    runpy.run_module("agentbench", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
with open(out, "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""


def _command_paths(command: object, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path of the click command tree: ``()``, ``("run",)``, ``("pool", "build")``..."""
    paths = [prefix]
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        paths += _command_paths(sub, (*prefix, name))
    return paths


COMMANDS = _command_paths(typer.main.get_command(app))


@functools.cache
def _help(path: tuple[str, ...], tmp: str) -> tuple[subprocess.CompletedProcess, int, list[str]]:
    """``--help`` of ``path`` in a fresh interpreter: the process, the CLI's exit code, sys.modules."""
    out = Path(tmp) / f"{'-'.join(path) or 'agentbench'}.json"
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), *path, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "120", "TERM": "dumb"},
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    return proc, data["code"], data["modules"]


def _heavy(modules: list[str]) -> list[str]:
    found = []
    for name in modules:
        top = name.split(".")[0]
        if any(top.startswith(h[:-1]) if h.endswith("*") else top == h for h in HEAVY):
            found.append(top)
        elif any(name == s or name.startswith(f"{s}.") for s in HEAVY_STAGES):
            found.append(name)
    return sorted(set(found))


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("cli-startup"))


def test_every_command_is_discovered() -> None:
    """The discovery is not vacuous: top level, plain commands, and both groups' subcommands."""
    for path in [(), ("run",), ("retrieve",), ("report",), ("check",), ("compare",)]:
        assert path in COMMANDS
    assert {p for p in COMMANDS if p[:1] == ("pool",)} >= {("pool",), ("pool", "build"), ("pool", "validate")}
    assert {p for p in COMMANDS if p[:1] == ("sandbox",)} >= {("sandbox",), ("sandbox", "exec")}


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "agentbench")
def test_help_exits_0_with_usage(path: tuple[str, ...], tmp: str) -> None:
    proc, code, _ = _help(path, tmp)
    assert code in (0, None), proc.stderr
    assert proc.stdout.lstrip().startswith("Usage:")
    assert f"agentbench {' '.join(path)}".rstrip() in proc.stdout


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "agentbench")
def test_help_imports_no_heavy_module(path: tuple[str, ...], tmp: str) -> None:
    _, _, modules = _help(path, tmp)
    assert _heavy(modules) == []


# --- workers started before the command's imports (agentbench/__main__.py) ----------------------------


@pytest.mark.parametrize(
    ("argv", "started"),
    [
        (["run", "--llm", "openai/gpt-4o", "--concurrency", "64"], "default"),
        (["run", "--pool", "core", "--llm=openai/gpt-4o", "--concurrency=64"], "default"),
        (["run", "--llm", "openai/gpt-4o", "--llm-processes", "3"], [3]),
        (["run", "--llm", "openai/gpt-4o", "--concurrency", "64", "--llm-processes", "0"], []),
        (["run", "--llm", "local/qwen2.5-coder-1.5b", "--concurrency", "64"], []),  # served in-process
        (["run", "--llm", "openai/a", "--llm", "openai/b", "--concurrency", "64"], []),  # a matrix
        (["run", "--llm", "openai/gpt-4o", "--agent", "m:a", "--concurrency", "64"], []),
        (["run", "--llm", "openai/gpt-4o"], []),  # the default concurrency needs no workers
        (["run", "--llm", "openai/gpt-4o", "--concurrency", "many"], []),  # the command reports it
        (["run", "--llm", "openai/gpt-4o", "--concurrency", "64", "--help"], []),
        (["retrieve", "--llm", "openai/gpt-4o", "--concurrency", "64"], []),
        ([], []),
    ],
)
def test_run_starts_its_llm_workers_before_its_imports_only_when_the_command_line_is_plain(
    argv: list[str], started: object, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentbench.__main__ import start_llm_workers
    from agentbench.llm import processes

    calls: list[int] = []
    monkeypatch.setattr(processes, "process_pool", calls.append)
    start_llm_workers(argv)
    assert calls == ([processes.default_processes(64)] if started == "default" else started)
    assert capsys.readouterr() == ("", "")  # an unclear command line is the command's to report


def test_a_run_that_fails_its_checks_leaves_no_early_worker_behind(tmp_path: Path) -> None:
    """The workers start before the command checks its model; a run refused by a check (here a missing
    API key: one line, exit code 2) stops them at exit."""
    site = tmp_path / "site"  # notes each worker process that starts, whatever ends it
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import os, sys\n"
        "if 'agentbench.llm.worker' in sys.orig_argv:\n"
        "    with open(os.environ['WORKER_NOTES'], 'a') as f:\n"
        "        f.write(f'{os.getpid()}\\n')\n"
    )
    notes = tmp_path / "workers.txt"
    tag = f"agentbench-test-{os.getpid()}-{tmp_path.name}"
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env.update(AGENTBENCH_TEST_TAG=tag, WORKER_NOTES=str(notes), PYTHONPATH=str(site))
    proc = subprocess.run(
        [sys.executable, "-m", "agentbench", "run", "--llm", "openai/gpt-4o", "--llm-processes", "2"]
        + ["--run-dir", str(tmp_path / "run")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 2 and "OPENAI_API_KEY" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()
    assert notes.exists()  # the early start happened: the check came after it
    assert _processes_with(tag) == []


def _processes_with(tag: str) -> list[int]:
    """Processes whose environment holds ``tag`` (the workers inherit it) and that are still running
    after up to 30 s (a worker's forks end as soon as the kernel tells them)."""
    tagged = []
    for entry in Path("/proc").iterdir():
        try:
            environ = (entry / "environ").read_bytes() if entry.name.isdigit() else b""
        except OSError:
            continue
        if f"AGENTBENCH_TEST_TAG={tag}".encode() in environ.split(b"\0"):
            tagged.append(int(entry.name))
    return still_alive(tagged)
