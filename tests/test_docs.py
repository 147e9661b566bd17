"""The README and docs/ hold together: every relative link resolves, and every README command is one that
``agentbench ... --help`` accepts (the subcommand exists and each ``--flag`` is one of its options)."""

from __future__ import annotations

import re
import shlex
from functools import cache
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from agentbench.cli import app

from .conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^(```|~~~)")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


def _prose_lines(text: str) -> list[str]:
    """The lines of a Markdown text outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: link targets and formatting dropped, lower case, punctuation removed
    (hyphens and underscores kept), spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """Every heading anchor of a Markdown file, with GitHub's -1, -2 ... suffixes for repeats."""
    seen: dict[str, int] = {}
    out = set()
    for line in _prose_lines(path.read_text()):
        m = _HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return frozenset(out)


def relative_links(path: Path) -> list[str]:
    """Link and image targets of a Markdown file that are not URLs, outside code."""
    targets = []
    for line in _prose_lines(path.read_text()):
        for m in _LINK.finditer(_INLINE_CODE.sub("", line)):
            target = m.group(1)
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                targets.append(target)
    return targets


def link_problem(source: Path, target: str) -> str | None:
    """Why ``target``, a link in ``source``, does not resolve (None when it does)."""
    file_part, _, anchor = target.partition("#")
    dest = (source.parent / file_part).resolve() if file_part else source
    if not dest.exists():
        return f"{source.relative_to(ROOT)}: {target}: no such file"
    if anchor:
        if dest.is_dir() or dest.suffix != ".md":
            return f"{source.relative_to(ROOT)}: {target}: an anchor into a file that is not Markdown"
        if anchor.lower() not in anchors(dest):
            return f"{source.relative_to(ROOT)}: {target}: no heading with that anchor in {dest.name}"
    return None


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    problems = [p for t in relative_links(doc) if (p := link_problem(doc, t))]
    assert not problems, "\n".join(problems)


def test_docs_link_check_sees_links() -> None:
    assert relative_links(ROOT / "README.md"), "the README links to docs/"


@pytest.mark.parametrize(
    ("target", "ok"),
    [
        ("docs/runs.md", True),
        ("docs/runs.md#nothing-lost", True),
        ("docs/no-such-page.md", False),
        ("docs/runs.md#no-such-heading", False),
        ("#set-up", True),
        ("#no-such-heading", False),
    ],
)
def test_link_check_catches_broken_links(target: str, ok: bool) -> None:
    assert (link_problem(ROOT / "README.md", target) is None) is ok


def test_github_slugs() -> None:
    assert slug("The main job: `agentbench run`") == "the-main-job-agentbench-run"
    assert slug("Set-up") == "set-up"
    assert slug("exec@k and [links](x.md)") == "execk-and-links"


# ------------------------------------------------------------------------------------------ commands


def readme_commands() -> list[str]:
    """Lines of the README's bash blocks outside ``## Set-up`` that run ``agentbench``, continuations joined."""
    text = (ROOT / "README.md").read_text()
    sections = re.split(r"^(?=## )", text, flags=re.M)
    commands = []
    for section in sections:
        if section.startswith("## Set-up"):
            continue
        for block in re.findall(r"^```(?:bash|sh)\n(.*?)^```", section, re.S | re.M):
            joined = re.sub(r"\\\n\s*", " ", block)
            commands += [ln.strip() for ln in joined.splitlines() if ln.strip().startswith("agentbench ")]
    return commands


def command_problems(line: str) -> list[str]:
    """Why ``line`` is not an ``agentbench`` invocation that ``--help`` accepts (empty when it is)."""
    tokens = shlex.split(line, comments=True)
    assert tokens[0] == "agentbench"
    command = typer.main.get_command(app)
    path: list[str] = []
    rest = tokens[1:]
    while hasattr(command, "commands"):  # a group: the next token must name one of its commands
        if not rest or rest[0] not in command.commands:
            name = rest[0] if rest else "(none)"
            return [f"{line}: {' '.join(['agentbench', *path])} has no command {name}"]
        path.append(rest[0])
        command = command.commands[rest.pop(0)]
    options = {"--help"} | {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
    problems = [
        f"{line}: agentbench {' '.join(path)} has no option {flag}"
        for tok in rest
        if tok.startswith("--") and (flag := tok.split("=", 1)[0]) not in options
    ]
    result = CliRunner().invoke(app, [*path, "--help"])
    if result.exit_code != 0:
        problems.append(f"{line}: agentbench {' '.join(path)} --help exited {result.exit_code}")
    return problems


def test_readme_has_commands() -> None:
    assert len(readme_commands()) >= 10


@pytest.mark.parametrize("line", readme_commands())
def test_readme_command_is_accepted(line: str) -> None:
    assert not command_problems(line)


@pytest.mark.parametrize(
    "line",
    [
        "agentbench run --limit 8 --made-up-flag 3",
        "agentbench retrieve --embedder minilm --rerank-depth 5  # a flag of no command",
        "agentbench frobnicate runs/x",
        "agentbench pool frobnicate core",
        "agentbench pool",
        "agentbench sandbox check --offline",
    ],
)
def test_made_up_commands_are_caught(line: str) -> None:
    assert command_problems(line)
