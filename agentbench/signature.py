"""Which function of a canonical solution is "the" solution, and its ``def`` line.

Pools (quality checks) and the agent (prompt variables) both need it; it lives below both layers.
"""

from __future__ import annotations

import ast
import copy
import io
import textwrap
import tokenize
from collections.abc import Sequence

from .errors import ConfigError


def _called_names(tests: Sequence[str]) -> list[str]:
    names: list[str] = []
    for test in tests:
        try:
            tree = ast.parse(test)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id not in names:
                names.append(node.func.id)
    return names


def function_signature(code: str, tests: Sequence[str] = ()) -> tuple[str, str]:
    """``(name, def line)`` of the solution function in ``code``: the top-level function the tests call,
    else the one no other top-level function calls, else the last. A multi-line header is kept whole.
    """
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise ConfigError(f"canonical code does not parse (line {exc.lineno}): {exc.msg}") from exc
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    if not funcs:
        raise ConfigError("canonical code defines no top-level function")
    by_name = {f.name: f for f in funcs}
    # with one function every rule below picks it: the asserts need not be parsed (milliseconds a task)
    called = _called_names(tests) if len(funcs) > 1 else [funcs[0].name]
    chosen = next((by_name[n] for n in called if n in by_name), None)
    if chosen is None:
        inner = {
            c.func.id
            for f in funcs
            for c in ast.walk(f)
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
        }
        roots = [f for f in funcs if f.name not in inner]
        chosen = (roots or funcs)[-1]
    lines = code.splitlines()
    body_line = chosen.body[0].lineno
    if body_line > chosen.lineno:
        header_lines = lines[chosen.lineno - 1 : body_line - 1]
        while len(header_lines) > 1 and (
            not header_lines[-1].strip() or header_lines[-1].lstrip().startswith("#")
        ):
            header_lines.pop()  # blank or comment lines between the header and the body
        header = _cut_at_colon("\n".join(header_lines))
    else:  # one-liner "def f(x): return x"
        stub = copy.copy(chosen)
        stub.body = [ast.Expr(ast.Constant(...))]
        stub.decorator_list = []
        header = ast.unparse(stub).split("\n")[0]
    return chosen.name, textwrap.dedent(header).strip()


def _cut_at_colon(header: str) -> str:
    """The header up to the colon that ends it (drops a trailing comment)."""
    depth = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(header + "\n").readline):
            if tok.type == tokenize.OP and tok.string in "([{":
                depth += 1
            elif tok.type == tokenize.OP and tok.string in ")]}":
                depth -= 1
            elif tok.type == tokenize.OP and tok.string == ":" and depth == 0:
                lines = header.split("\n")
                return "\n".join(lines[: tok.end[0] - 1] + [lines[tok.end[0] - 1][: tok.end[1]]])
    except (tokenize.TokenError, SyntaxError):
        pass
    return header
