"""Prompt templates (``prompts/<condition>.md``) and the tasks they are rendered for.

The template format and its variables are documented in ``prompts/README.md``. Lookup order for the
template directory: an explicit path (``--prompt``), ``$AGENTBENCH_PROMPTS_DIR``, ``prompts/`` of the
source checkout, ``<sys.prefix>/share/agentbench/prompts`` of an installed package.
"""

from __future__ import annotations

import functools
import os
import re
import string
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field, PrivateAttr

from ..errors import ConfigError
from ..signature import function_signature
from .tools import SearchResult, TestOutcome, Tools

__all__ = [
    "CONDITIONS",
    "PromptTemplate",
    "Task",
    "function_signature",
    "load_template",
    "prompts_dir",
    "render_context",
]

CONDITIONS = ("closed_book", "rag", "oracle", "distractor")
"""The built-in templates of the default conditions (``agent.md`` and ``agent_rag.md`` exist too)."""
TEMPLATES = (*CONDITIONS, "agent", "agent_rag")
VARIABLES = ("task", "signature", "function_name", "context")

_SECTION = re.compile(r"^<!--\s*(system|user)\s*-->[ \t]*$", re.MULTILINE)


class Task(BaseModel):
    """What the agent is asked to write, with the context snippets for its condition."""

    task_id: str
    """The query id (``q_NNNN``)."""
    description: str
    """The natural-language task: the query's generation spec, or its retrieval query if it has none."""
    signature: str
    """The required function's ``def`` line, from the canonical's source."""
    function_name: str
    """The required function's name (what the tests call)."""
    context: list[str] = Field(default_factory=list)
    """Snippets shown as context; empty for ``closed_book``."""
    _tools: Tools | None = PrivateAttr(None)

    @property
    def tools(self) -> Tools | None:
        """The condition's tools (``agent``, ``agent_rag``), else None."""
        return self._tools

    def with_tools(self, tools: Tools | None) -> Task:
        self._tools = tools
        return self

    @property
    def visible_tests(self) -> tuple[str, ...]:
        """The asserts ``run_tests`` runs (empty without tools); held-out ones score the task."""
        return self._tools.visible_tests if self._tools is not None else ()

    def _need_tools(self) -> Tools:
        if self._tools is None:
            raise ConfigError(f"task {self.task_id}: this condition gives no tools (use agent or agent_rag)")
        return self._tools

    def search(self, query: str, k: int = 3) -> list[SearchResult]:
        """The run's retriever over the pool: the top ``k`` snippets (corpus_id, code, score)."""
        return self._need_tools().search(query, k)

    def run_tests(self, code: str) -> list[TestOutcome]:
        """``code`` run in the sandbox against the visible asserts: one outcome per assert."""
        return self._need_tools().run_tests(code)

    async def asearch(self, query: str, k: int = 3) -> list[SearchResult]:
        return await self._need_tools().asearch(query, k)

    async def arun_tests(self, code: str) -> list[TestOutcome]:
        return await self._need_tools().arun_tests(code)

    def variables(self) -> dict[str, str]:
        """The template variables (``prompts/README.md``); a LangChain agent plug-in gets these as input."""
        return {
            "task": self.description.strip(),
            "signature": self.signature,
            "function_name": self.function_name,
            "context": render_context(self.context),
        }

    @classmethod
    def from_canonical(
        cls,
        task_id: str,
        description: str,
        canonical_code: str,
        context: Sequence[str] = (),
        tests: Sequence[str] = (),
    ) -> Task:
        """Build a task whose signature is taken from ``canonical_code`` (the function the tests call)."""
        name, signature = _signature(canonical_code, tuple(tests))
        return cls(
            task_id=task_id,
            description=description,
            signature=signature,
            function_name=name,
            context=list(context),
        )


@functools.lru_cache(maxsize=4096)
def _signature(code: str, tests: tuple[str, ...]) -> tuple[str, str]:
    """:func:`function_signature`, once per (canonical, suite): a run asks for it under every condition,
    and parsing the canonical and each assert costs milliseconds."""
    return function_signature(code, tests)


def render_context(snippets: Sequence[str]) -> str:
    """Each snippet in its own python code block, separated by a blank line."""
    return "\n\n".join(f"```python\n{s.strip(chr(10))}\n```" for s in snippets)


@dataclass(frozen=True)
class PromptTemplate:
    """A loaded template: optional system text and user text, both ``string.Template`` sources."""

    name: str
    path: Path
    system: str
    user: str

    @classmethod
    def parse(cls, text: str, name: str, path: Path) -> PromptTemplate:
        sections = {"system": "", "user": ""}
        parts = _SECTION.split(text)
        if len(parts) == 1:
            sections["user"] = text
        else:
            if parts[0].strip():
                raise ConfigError(
                    f"prompt template {path}: text before the first <!-- system/user --> marker"
                )
            for key, body in zip(parts[1::2], parts[2::2], strict=True):
                sections[key] = body
        template = cls(name, path, sections["system"].strip("\n"), sections["user"].strip("\n"))
        if not template.user.strip():
            raise ConfigError(f"prompt template {path} has no user message")
        for source in (template.system, template.user):
            for ident in _identifiers(source, path):
                if ident not in VARIABLES:
                    raise ConfigError(
                        f"prompt template {path} uses unknown variable ${ident}: known are "
                        + ", ".join(f"${v}" for v in VARIABLES)
                    )
        return template

    def render(self, task: Task) -> list[dict[str, str]]:
        """Chat messages (system first when the template has one) for ``task``."""
        values = task.variables()
        messages = []
        if self.system.strip():
            messages.append({"role": "system", "content": string.Template(self.system).substitute(values)})
        messages.append({"role": "user", "content": string.Template(self.user).substitute(values)})
        return messages


def _identifiers(source: str, path: Path) -> list[str]:
    template = string.Template(source)
    if not template.is_valid():
        raise ConfigError(f"prompt template {path} has a stray '$' (write $$ for a literal dollar sign)")
    return template.get_identifiers()


def prompts_dir() -> Path:
    """The default template directory (see the module docstring for the lookup order)."""
    env = os.environ.get("AGENTBENCH_PROMPTS_DIR")
    candidates = [Path(env).expanduser()] if env else []
    candidates += [
        Path(__file__).resolve().parents[2] / "prompts",
        Path(sys.prefix) / "share" / "agentbench" / "prompts",
    ]
    for candidate in candidates:
        if (candidate / "closed_book.md").is_file():
            return candidate
    raise ConfigError(
        "prompt templates not found: pass --prompt DIR or set AGENTBENCH_PROMPTS_DIR to a directory of <condition>.md files"
    )


def load_template(condition: str, prompt: str | Path | None = None) -> PromptTemplate:
    """The template for ``condition``: ``prompt`` may be a directory of ``<condition>.md`` files or one
    file used for every condition; ``None`` uses :func:`prompts_dir`."""
    base = Path(prompt).expanduser() if prompt is not None else prompts_dir()
    path = base / f"{condition}.md" if base.is_dir() else base
    # a template other than the built-in conditions' (a registered condition's own) must exist as a file
    if condition not in TEMPLATES and (not re.fullmatch(r"[a-z][a-z0-9_]*", condition) or not path.is_file()):
        raise ConfigError(
            f"unknown condition {condition!r}: choose from {', '.join(CONDITIONS)}, or add {condition}.md "
            f"to the prompt directory"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"prompt template not found: {path}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read prompt template {path}: {exc.strerror}") from exc
    return PromptTemplate.parse(text, condition, path)
