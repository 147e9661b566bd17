"""The converted tasks as pool sources: ``[[task]]`` TOML that reads back exactly as the tasks.

Strings are TOML literal strings where they can be (code and asserts then read as written) and basic
strings elsewhere; :func:`render_toml` checks the text reads back as the tasks it was given.
"""

from __future__ import annotations

import json
import re
import tomllib

__all__ = ["DOMAIN", "render_toml"]

DOMAIN = "humaneval"
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # what a TOML literal string cannot hold (tab aside)


def _toml_string(text: str) -> str:
    """A one-line TOML string: a literal string where it can be one, else a basic string."""
    if "'" not in text and not _CONTROL.search(text) and "\t" not in text:
        return f"'{text}'"
    return json.dumps(text, ensure_ascii=False)


def _multiline(text: str) -> str:
    """``text`` as a multi-line TOML literal string where it can be one (it then reads back exactly: the
    newline after the opening delimiter is not part of the string), else a basic string."""
    if "\n" not in text:
        return _toml_string(text)
    if "'''" not in text and not text.endswith("'") and not _CONTROL.search(text.replace("\n", "")):
        return f"'''\n{text}'''"
    return json.dumps(text, ensure_ascii=False)


def render_toml(tasks: list[dict], header: str) -> str:
    """The tasks as ``[[task]]`` tables; checked to read back as exactly these tasks."""
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    lines += ["", f'domain = "{DOMAIN}"']
    for task in tasks:
        lines += ["", "[[task]]"]
        for key in ("id", "entry_point", "query"):
            lines.append(f"{key} = {_toml_string(task[key])}")
        for key in ("spec", "code", "test_setup"):
            if key in task:
                lines.append(f"{key} = {_multiline(task[key])}")
        lines.append("tests = [")
        lines += [f"    {_toml_string(t)}," for t in task["tests"]]
        lines.append("]")
    text = "\n".join(lines) + "\n"
    back = tomllib.loads(text)["task"]
    if back != tasks:
        raise AssertionError("the rendered TOML does not read back as the converted tasks")
    return text
