"""The README's set-up commands are the ones CI runs."""

from __future__ import annotations

import re

from .conftest import ROOT


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    setup = text.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(?:bash|sh)\n(.+?)\n```", setup, re.S)


def test_readme_has_exactly_two_setup_commands() -> None:
    commands = _readme_commands()
    assert len(commands) == 2, commands
    assert all("\n" not in c for c in commands)


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    (line,) = [ln for ln in ci.splitlines() if ln.startswith("README_TEST_COMMAND=")]
    assert line.split("=", 1)[1].strip('"') == _readme_commands()[1]
