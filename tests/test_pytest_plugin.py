"""The pytest plugin (agentbench/pytest_plugin.py): pytest runs, in a subprocess, a copy of the example
project examples/pytest_plugin/ (its agent a scripted copy-the-context stand-in, 8 core queries, BM25, the
process sandbox). Saving the baseline passes; the same agent passes against it; an agent that returns a
stub fails with the comparison table in pytest's report and in the --junitxml file.

The subprocesses load the plugin with ``-p`` and autoloading off, so the result does not depend on whether
this checkout's installed metadata already carries the pytest11 entry point; test_entry_point_autoloads
checks the entry point itself through a distribution that declares exactly pyproject.toml's entry.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from .conftest import ROOT

EXAMPLE = ROOT / "examples" / "pytest_plugin"

WORSE_AGENT = '''
from agentbench import Task


def agent(task: Task) -> str:
    """Clearly worse: ignores its context and returns a stub that fails every test."""
    return f"{task.signature}\\n    return None\\n"
'''


def _pytest(project: Path, *args: str, env: dict[str, str], autoload: bool = False):
    plugin = [] if autoload else ["-p", "agentbench.pytest_plugin"]
    extra = {} if autoload else {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", *plugin, "-p", "no:cacheprovider", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, **env, **extra},
    )


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    proj = tmp_path / "proj"
    shutil.copytree(EXAMPLE, proj, ignore=shutil.ignore_patterns("baseline", "__pycache__", ".pytest_cache"))
    env = {
        "AGENTBENCH_CACHE_DIR": str(tmp_path / "cache"),
        "AGENTBENCH_LIMIT": "8",
        "AGENTBENCH_MARGIN": "0.4",
        "AGENTBENCH_SANDBOX": "process",
        "PYTHONPATH": "",
    }
    return proj, env


@pytest.mark.slow
def test_same_agent_passes_and_a_worse_one_fails(project: tuple[Path, dict[str, str]]) -> None:
    proj, env = project
    saved = _pytest(proj, "--agentbench-save-baseline", env=env)
    assert saved.returncode == 0, saved.stdout + saved.stderr
    assert sorted(p.name for p in (proj / "baseline").iterdir()) == [
        "config.json",
        "records.jsonl",
        "retrieval.json",
        "summary.json",
    ]

    same = _pytest(proj, "--junitxml=same.xml", env=env)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "1 passed" in same.stdout

    (proj / "team_agent.py").write_text(WORSE_AGENT)
    worse = _pytest(proj, "--junitxml=worse.xml", env=env)
    assert worse.returncode == 1, worse.stdout + worse.stderr
    out = worse.stdout
    assert "1 failed" in out
    # the comparison table, in pytest's report. oracle: 8/8 in the baseline, 0/8 now; Wilson 8/8 is
    # [0.676, 1], so the interval is [-1, -1 + sqrt(2) * 0.324] = [-1, -0.541], wholly below -0.4: worse.
    # The same agent's identical outcomes give at least -0.324 as lower bound: rag is not worse, or (if the
    # copycat's rag passed somewhere, which the stub now fails) worse too.
    assert "gate(s) failed against the baseline" in out
    lines = out.splitlines()
    header = next(line for line in lines if "| gate " in line)
    assert [c.strip() for c in header.strip().strip("|").split("|")] == [
        "gate", "difference", "95% CI", "n", "discordant pairs", "verdict", "result",
    ]  # fmt: skip
    oracle = [
        c.strip() for c in next(ln for ln in lines if "--non-inferior oracle.pass=0.4" in ln).split("|")
    ]
    assert oracle[2:8] == ["-1.000", "[-1.000, -0.541]", "8", "8 (0 run, 8 baseline)", "worse", "FAIL"]
    assert any("--non-inferior rag.pass=0.4" in line for line in lines)

    case = ET.parse(proj / "worse.xml").getroot().find(".//testcase")
    assert case is not None and case.get("name") == "test_agent_is_not_worse_than_the_baseline"
    failure = case.find("failure")
    assert failure is not None and "gate(s) failed against the baseline" in (failure.get("message") or "")
    assert "--non-inferior oracle.pass=0.4" in (failure.text or "")  # the table, in the element text


def test_missing_baseline_and_no_gate_are_one_line_failures(project: tuple[Path, dict[str, str]]) -> None:
    proj, env = project
    # the ini option names a directory with no run in it: one line, not an agentbench traceback
    (proj / "test_agent_quality.py").write_text(
        "import pytest\n"
        "from agentbench.pytest_plugin import AgentbenchRun\n\n"
        "class Done:\n    run_dir = 'nowhere'\n\n"
        "def test_no_baseline(request):\n"
        "    AgentbenchRun(Done(), request.config).check(non_inferior={'rag.pass': 0.1})\n\n"
        "def test_no_gate(request):\n"
        "    AgentbenchRun(Done(), request.config).check('baseline')\n\n"
        "def test_bad_margin(request):\n"
        "    AgentbenchRun(Done(), request.config).assert_non_inferior('baseline', 'rag.pass', 1.5)\n"
    )
    res = _pytest(proj, "-q", env=env)
    assert res.returncode == 1, res.stdout + res.stderr
    out = res.stdout
    assert "3 failed" in out
    assert (
        f"agentbench: the baseline {proj / 'baseline'} holds no run: make it with pytest --agentbench-save-baseline"
        in out
    )
    assert "agentbench: nothing to check: give non_inferior={METRIC: MARGIN} or superior=..." in out
    assert "must lie in (0, 1)" in out
    assert "Traceback" not in out and "agentbench/analysis" not in out


def test_entry_point_autoloads(tmp_path: Path) -> None:
    """pyproject.toml's pytest11 entry point, declared by a distribution on PYTHONPATH, loads the plugin
    in a plain pytest session: its options are in --help, and a test gets the fixture."""
    entry = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["pytest11"]
    assert entry == {"agentbench": "agentbench.pytest_plugin"}
    site = tmp_path / "site"
    info = site / "agentbench_entry_check-0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: agentbench-entry-check\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\nagentbench = agentbench.pytest_plugin\n")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "test_fixture.py").write_text(
        "def test_fixture(agentbench_eval):\n    assert callable(agentbench_eval)\n"
    )
    env = {"PYTHONPATH": str(site)}
    helped = _pytest(proj, "--help", env=env, autoload=True)
    assert helped.returncode == 0 and "--agentbench-baseline=DIR" in helped.stdout, helped.stderr
    assert "--agentbench-save-baseline" in helped.stdout and "agentbench_baseline" in helped.stdout
    ran = _pytest(proj, "-q", env=env, autoload=True)
    assert ran.returncode == 0 and "1 passed" in ran.stdout, ran.stdout + ran.stderr


def test_importing_the_plugin_is_cheap() -> None:
    """It loads in every pytest session of anyone who installs agentbench: only pytest and the stdlib."""
    code = (
        "import sys; before = set(sys.modules); import agentbench.pytest_plugin as p; "
        "new = set(sys.modules) - before; "
        "print(sorted(m for m in new if m.split('.')[0] in {'numpy', 'scipy', 'torch', 'chromadb', "
        "'litellm', 'langchain_core', 'pydantic', 'typer', 'rich', 'docker'} or m.startswith('agentbench.') "
        "and m not in {'agentbench.pytest_plugin', 'agentbench._lazy'}))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"
