"""The GitHub Action (action.yml) and `agentbench report --format github`.

The action's `run:` steps are run as the runner runs a composite action's bash steps (`bash --noprofile
--norc -eo pipefail`), in order, with each step's `env:` expressions evaluated from the inputs and the
earlier steps' outputs, and GITHUB_OUTPUT, GITHUB_ENV and GITHUB_STEP_SUMMARY pointing at temporary files.
`uses:` steps (actions/cache) are only checked for what they cache. An `agentbench` on PATH logs its
arguments and runs this checkout's CLI, so the tests see the exact command lines.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT, run_cli
from .test_noninferiority import FIXTURE, _cells, _table_run
from .test_report import cli

ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")

AGENTS = '''
from agentbench import Task


def copycat(task: Task) -> str:
    """Answers with its first context snippet: passes oracle."""
    if task.context:
        return task.context[0]
    return f"{task.signature}\\n    raise NotImplementedError\\n"


def stub(task: Task) -> str:
    """Clearly worse: a stub that fails every test."""
    return f"{task.signature}\\n    return None\\n"
'''


@dataclass
class ActionRun:
    code: int
    outputs: dict[str, dict[str, str]]
    summary: str
    env: dict[str, str]
    calls: list[list[str]]
    logs: list[str] = field(default_factory=list)
    cached: list[str] = field(default_factory=list)


def _read_kv(path: Path) -> dict[str, str]:
    """KEY=VALUE lines and KEY<<DELIM heredocs, as the runner reads GITHUB_OUTPUT and GITHUB_ENV."""
    out: dict[str, str] = {}
    lines = path.read_text().splitlines() if path.exists() else []
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            key, delim = line.split("<<", 1)
            end = lines.index(delim, i + 1)
            out[key] = "\n".join(lines[i + 1 : end])
            i = end + 1
            continue
        key, _, value = line.partition("=")
        out[key] = value
        i += 1
    return out


def _evaluate(value: str, inputs: dict[str, str], outputs: dict[str, dict[str, str]]) -> str:
    def one(m: re.Match) -> str:
        expr = m.group(1)
        if g := re.fullmatch(r"inputs\.([\w-]+)", expr):
            return inputs[g.group(1)]
        if g := re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expr):
            return outputs.get(g.group(1), {}).get(g.group(2), "")
        raise AssertionError(f"action.yml: an env expression the test cannot evaluate: {expr}")

    return _EXPR.sub(one, str(value))


def run_action(workspace: Path, tmp: Path, **given: str) -> ActionRun:
    """Run action.yml's steps with ``given`` inputs (the rest take their defaults)."""
    declared = ACTION["inputs"]
    assert set(given) <= set(declared), set(given) - set(declared)
    inputs = {name: str(spec.get("default", "")) for name, spec in declared.items()} | given
    tmp.mkdir(parents=True, exist_ok=True)
    files = {n: tmp / n.lower() for n in ("GITHUB_ENV", "GITHUB_STEP_SUMMARY", "GITHUB_PATH")}
    for f in files.values():
        f.write_text("")
    bin_dir, log = tmp / "bin", tmp / "calls.jsonl"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "agentbench"
    shim.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"with open({str(log)!r}, 'a') as f:\n    f.write(json.dumps(sys.argv[1:]) + '\\n')\n"
        f"os.execv({sys.executable!r}, [{sys.executable!r}, '-m', 'agentbench', *sys.argv[1:]])\n"
    )
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "AGENTBENCH_"))}
    env |= {k: str(v) for k, v in files.items()}
    env |= {
        "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}",
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_ACTION_PATH": str(ROOT),
        "RUNNER_TEMP": str(tmp),
        "PYTHONPATH": str(ROOT),  # agentbench from this checkout; the plug-ins from the workspace (cwd)
    }
    outputs: dict[str, dict[str, str]] = {}
    code, logs, cached = 0, [], []
    for i, step in enumerate(ACTION["runs"]["steps"]):
        if "uses" in step:  # actions/cache: record what it would cache, with the outputs it is given
            cached += [_evaluate(p, inputs, outputs) for p in step["with"]["path"].splitlines()]
            continue
        assert step.get("shell") == "bash" and "if" not in step, step.get("name")
        assert "${{" not in step["run"], f"{step['name']}: inputs reach the script through env: only"
        out_file = tmp / f"output-{i}"
        out_file.write_text("")
        step_env = {k: _evaluate(v, inputs, outputs) for k, v in (step.get("env") or {}).items()}
        env_now = env | _read_kv(files["GITHUB_ENV"]) | step_env | {"GITHUB_OUTPUT": str(out_file)}
        script = tmp / f"step-{i}.sh"
        script.write_text(step["run"])
        res = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=workspace,
            env=env_now,
            capture_output=True,
            text=True,
            timeout=900,
        )
        logs.append(f"--- {step['name']} (exit {res.returncode})\n{res.stdout}\n{res.stderr}")
        outputs[step.get("id", str(i))] = _read_kv(out_file)
        if res.returncode != 0:
            code = res.returncode
            break  # the runner skips the remaining steps of a failed composite action
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return ActionRun(
        code,
        outputs,
        files["GITHUB_STEP_SUMMARY"].read_text(),
        _read_kv(files["GITHUB_ENV"]),
        calls,
        logs,
        cached,
    )


def row(markdown: str, first: str) -> list[str]:
    """The cells of the markdown table row whose first cell is ``first``."""
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first:
            return cells
    raise AssertionError(f"no row {first!r} in:\n{markdown}")


def test_inputs_outputs_and_cache() -> None:
    assert ACTION["runs"]["using"] == "composite"
    wanted = {"pool", "llm", "embedder", "retriever", "agent", "conditions", "samples", "baseline", "gates"}
    assert wanted <= set(ACTION["inputs"])
    assert all(spec.get("description") for spec in ACTION["inputs"].values())
    assert {"run-dir", "comment", "exit-code"} <= set(ACTION["outputs"])
    (cache,) = [s for s in ACTION["runs"]["steps"] if "uses" in s]
    assert cache["uses"] == "actions/cache@v4"
    paths = cache["with"]["path"].splitlines()
    assert paths == ["${{ steps.prepare.outputs.cache-dir }}", "${{ steps.prepare.outputs.store-dir }}"]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "team.py").write_text(AGENTS)
    return ws


def _common(**kw: str) -> dict[str, str]:
    return {
        "pool": "core",
        "embedder": "bm25",
        "conditions": "rag,oracle",
        "limit": "8",
        "sandbox": "process",
        "install": "false",
        "run-dir": "runs/ci",
        **kw,
    }


@pytest.mark.slow
def test_action_gates_against_a_baseline(workspace: Path, tmp_path: Path) -> None:
    # 1. the team's agent on main, with an absolute threshold: passes, the summary has the table
    first = run_action(
        workspace,
        tmp_path / "a",
        **_common(agent="team:copycat", gates="--fail-under oracle.pass=0.9\n--fail-under rag.pass=0\n"),
    )
    assert first.code == 0, "\n".join(first.logs)
    cache = workspace / ".agentbench-cache"
    assert first.env["AGENTBENCH_CACHE_DIR"] == str(cache)
    assert first.cached == [str(cache), str(workspace / "stores")]
    assert (cache / "executions").is_dir()  # the run's verdicts went to the cached directory
    run_call = next(c for c in first.calls if c[0] == "run")
    assert run_call[run_call.index("--store-dir") + 1] == str(workspace / "stores")
    assert "--samples" not in run_call and run_call[run_call.index("--agent") + 1] == "team:copycat"
    assert row(first.summary, "oracle") == ["oracle", "8/8", "1.000", "[0.68, 1.00]"]
    rag = json.loads((workspace / "runs" / "ci" / "summary.json").read_text())["conditions"]["rag"]
    assert row(first.summary, "rag")[:3] == ["rag", f"{rag['passed']}/8", f"{rag['pass_rate']:.3f}"]
    assert "**Gates: all passed**" in first.summary
    assert row(first.summary, "--fail-under oracle.pass=0.9") == [
        "--fail-under oracle.pass=0.9",
        "1.000",
        "-",
        "pass",
    ]
    assert row(first.summary, "--fail-under rag.pass=0")[-1] == "pass"  # a multi-line input is split too
    comment = Path(first.outputs["report"]["comment"])
    assert (workspace / comment).read_text().strip() == first.summary.strip()
    assert first.outputs["verdict"]["exit-code"] == "0"
    baseline = workspace / "ci" / "baseline"
    baseline.mkdir(parents=True)
    for name in ("config.json", "retrieval.json", "records.jsonl", "summary.json"):
        shutil.copy(workspace / "runs" / "ci" / name, baseline / name)
    shutil.rmtree(workspace / "runs")

    # 2. a change that makes the agent clearly worse: the non-inferiority gate fails the action (exit 1)
    gates = "--non-inferior oracle.pass=0.4"
    worse = run_action(
        workspace, tmp_path / "b", **_common(agent="team:stub", baseline="ci/baseline", gates=gates)
    )
    assert worse.code == 1, "\n".join(worse.logs)
    assert worse.outputs["verdict"]["exit-code"] == "1" and worse.outputs["check"]["exit-code"] == "1"
    check_call = next(c for c in worse.calls if c[0] == "check")
    assert (
        check_call[check_call.index("--baseline") + 1] == "ci/baseline" and check_call[-2:] == gates.split()
    )
    assert "**Gates: 1 of 1 failed**" in worse.summary
    assert row(worse.summary, "--non-inferior oracle.pass=0.4") == [
        "--non-inferior oracle.pass=0.4",
        "-1.000",
        "[-1.000, -0.541]",
        "8",
        "8 (0 run, 8 baseline)",
        "worse",
        "FAIL",
    ]
    assert (workspace / "runs" / "ci" / "junit-gates.xml").exists()


def test_samples_and_a_run_that_does_not_finish(workspace: Path, tmp_path: Path) -> None:
    """--samples goes to agentbench run only above 1; a run that stops with exit 2 (here: a plug-in that
    does not exist) skips the gates, says so in the summary and fails the action with its exit code."""
    res = run_action(
        workspace, tmp_path, **_common(agent="team:nothing", samples="3", gates="--fail-under rag.pass=0.5")
    )
    assert res.code == 2 and res.outputs["verdict"]["exit-code"] == "2"
    (run_call,) = res.calls  # neither check nor report ran
    assert run_call[run_call.index("--samples") + 1] == "3"
    assert "the run did not finish (exit code 2)" in res.summary
    assert res.outputs["report"].get("comment", "") == ""
    assert "team has no attribute 'nothing'" in "\n".join(res.logs)


def test_inputs_cannot_inject_shell(workspace: Path, tmp_path: Path) -> None:
    res = run_action(
        workspace, tmp_path, **_common(agent="team:copycat; touch injected", limit="$(touch injected2)")
    )
    assert res.code == 2
    assert not (workspace / "injected").exists() and not (workspace / "injected2").exists()
    run_call = res.calls[0]
    assert run_call[run_call.index("--agent") + 1] == "team:copycat; touch injected"


# ------------------------------------------------------------------------------ agentbench report --format github


def _fixture_runs(tmp_path: Path) -> tuple[Path, Path]:
    """test_noninferiority's hand-computed pair: 100 queries, rag right on 66 in the run and 64 in the
    baseline, 6 only in the run and 4 only in the baseline."""
    cells = _cells(*FIXTURE)
    return _table_run(tmp_path / "run", cells, 0), _table_run(tmp_path / "base", cells, 1)


def test_report_github_is_deterministic_markdown(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run, base = _fixture_runs(tmp_path)
    checks = tmp_path / "checks.json"
    code, out, err = cli(
        capsys,
        "check",
        str(run),
        "--baseline",
        str(base),
        "--non-inferior",
        "rag.pass=0.03",
        "--format",
        "json",
    )
    assert code == 1, err
    checks.write_text(out)
    code, md, err = cli(capsys, "report", str(run), "--format", "github", "--checks", str(checks))
    assert code == 0, err
    assert cli(capsys, "report", str(run), "--format", "github", "--checks", str(checks))[1] == md
    assert md.startswith("### agentbench: ")
    assert row(md, "condition") == ["condition", "passed", "pass rate", "95% CI"]
    assert row(md, "rag") == ["rag", "66/100", "0.660", "[0.56, 0.75]"]
    assert row(md, "oracle") == ["oracle", "100/100", "1.000", "[0.96, 1.00]"]
    assert row(md, "exec@1") == ["exec@1", "0.660", "-"]  # the fixture's retrieval.json has no intervals
    assert "**Gates: 1 of 1 failed**" in md
    assert row(md, "--non-inferior rag.pass=0.03") == [
        "--non-inferior rag.pass=0.03", "+0.020", "[-0.042, +0.082]", "100", "10 (6 run, 4 baseline)",
        "inconclusive: about 313 queries needed", "FAIL",
    ]  # fmt: skip
    code, plain, _ = cli(capsys, "report", str(run), "--format", "github")
    assert code == 0 and "Gates" not in plain and "| rag " in plain


@pytest.mark.parametrize(
    "args, message",
    [
        (["--checks", "nope.json", "--format", "github"], "--checks nope.json: no such file"),
        (["--checks", "BAD", "--format", "github"], "not readable as JSON"),
        (["--checks", "LIST", "--format", "github"], "not the output of agentbench check --format json"),
        (["--checks", "LIST"], "use it with --format github"),
    ],
)
def test_report_github_bad_checks(tmp_path: Path, args: list[str], message: str) -> None:
    run, _ = _fixture_runs(tmp_path)
    (tmp_path / "BAD").write_text("{")
    (tmp_path / "LIST").write_text("[1]")
    args = [str(tmp_path / a) if a in ("BAD", "LIST") else a for a in args]
    res = run_cli("report", str(run), *args)
    assert res.returncode == 2 and message in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
