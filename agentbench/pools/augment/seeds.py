"""Seeds: the original asserts new inputs are derived from.

A seed is an assert that calls the task's function once with literal arguments (``assert f(1, "a") == 2``,
``assert f(..)``, ``assert not f(..)``, ``f(..) is True``, ``abs(f(..) - v) < tol``); its arguments are the
starting points :func:`~.inputs.generate_inputs` varies, and its shape is the template of the new asserts.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from typing import Any

__all__ = ["Seed", "parse_seeds", "representable"]

_PLACEHOLDER = "_AB_CALL"


@dataclass(frozen=True)
class Seed:
    """One original assert that calls the task's function with literal arguments.

    ``subject`` is the assert's value side with the call replaced by ``_AB_CALL`` (``sorted(_AB_CALL)``);
    ``kind`` is ``eq`` (compared with ``==``) or ``close`` (``abs(... - v) < tol``, ``tol`` kept)."""

    function: str
    subject: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]
    kind: str = "eq"
    tol: str = ""
    close_op: str = "<"

    def call(self, args: tuple[Any, ...], kwargs: tuple[tuple[str, Any], ...]) -> str:
        parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs]
        return f"{self.function}({', '.join(parts)})"

    def expression(self, args: tuple[Any, ...], kwargs: tuple[tuple[str, Any], ...]) -> str:
        return self.subject.replace(_PLACEHOLDER, self.call(args, kwargs))

    def assert_for(self, expression: str, value: Any) -> str:
        if self.kind == "close":
            return f"assert abs({expression} - {value!r}) {self.close_op} {self.tol}"
        if type(value) is float:
            return f"assert abs({expression} - {value!r}) <= 1e-09 * max(1.0, abs({value!r}))"
        return f"assert {expression} == {value!r}"


def _literal(node: ast.expr) -> tuple[bool, Any]:
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None
    return representable(value), value


def representable(value: Any, depth: int = 0) -> bool:
    """Values whose ``repr`` reads back equal: None, bool, int, finite float, str, and containers of them."""
    if depth > 6:
        return False
    if value is None or isinstance(value, bool | int | str):
        return True
    if isinstance(value, float):
        return value == value and abs(value) != float("inf")
    if isinstance(value, list | tuple):
        return all(representable(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(representable(k, depth + 1) and representable(v, depth + 1) for k, v in value.items())
    return False


def _calls_of(node: ast.AST, function: str) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(node)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == function
    ]


def _subject(expr: ast.expr, call: ast.Call) -> str:
    """``expr`` as text with ``call`` replaced by the placeholder."""

    class _Swap(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            if node is call:
                return ast.Name(_PLACEHOLDER, ast.Load())
            return self.generic_visit(node)

    return ast.unparse(_Swap().visit(copy.copy(expr)) if expr is not call else ast.Name(_PLACEHOLDER))


def _seed_of(test: str, function: str) -> Seed | None:
    try:
        tree = ast.parse(test)
    except SyntaxError:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert):
        return None
    expr = tree.body[0].test
    calls = _calls_of(expr, function)
    if len(calls) != 1:
        return None
    call = calls[0]
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    args, kwargs = [], []
    for a in call.args:
        ok, value = _literal(a)
        if not ok:
            return None
        args.append(value)
    for k in call.keywords:
        ok, value = _literal(k.value)
        if not ok:
            return None
        kwargs.append((k.arg, value))
    subject: ast.expr | None = None
    kind, tol, close_op = "eq", "", "<"
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        expr = expr.operand
    if isinstance(expr, ast.Compare) and len(expr.ops) == 1:
        left, right, op = expr.left, expr.comparators[0], expr.ops[0]
        in_left = bool(_calls_of(left, function))
        if isinstance(op, ast.Eq | ast.Is):
            subject = left if in_left else right
        elif (
            isinstance(op, ast.Lt | ast.LtE)
            and in_left
            and isinstance(left, ast.Call)
            and isinstance(left.func, ast.Name)
            and left.func.id == "abs"
            and len(left.args) == 1
            and isinstance(left.args[0], ast.BinOp)
            and isinstance(left.args[0].op, ast.Sub)
            and _calls_of(left.args[0].left, function)
            and not _calls_of(left.args[0].right, function)
        ):
            subject, kind, tol = left.args[0].left, "close", ast.unparse(right)
            close_op = "<" if isinstance(op, ast.Lt) else "<="
    elif expr is call or not isinstance(expr, ast.Compare | ast.BoolOp):
        subject = expr
    if subject is None or len(_calls_of(subject, function)) != 1:
        return None
    return Seed(function, _subject(subject, call), tuple(args), tuple(kwargs), kind, tol, close_op)


def parse_seeds(tests: list[str], function: str) -> list[Seed]:
    """The asserts new inputs can be derived from (others, such as loops over helpers, are skipped)."""
    return [s for t in tests if (s := _seed_of(t, function)) is not None]
