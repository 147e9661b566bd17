"""Implausible results: operations no person writes and comparisons that can never hold.

A mutant holding more of them than its canonical is crude (``Mutant.crude``): its edit made one.
"""

from __future__ import annotations

import ast
from collections import Counter

__all__ = ["count_names", "implausible_counts"]


# op -> (identity on the right, identity on the left or None)
_IDENTITY = {
    ast.Add: (0, 0), ast.Sub: (0, None), ast.BitOr: (0, 0), ast.BitXor: (0, 0), ast.LShift: (0, None),
    ast.RShift: (0, None), ast.Mult: (1, 1), ast.Div: (1, None), ast.FloorDiv: (1, None), ast.Pow: (1, None),
}  # fmt: skip
_NONNEG_CALLS = frozenset({"len", "abs"})
_NONNEG_METHODS = frozenset({"count"})


def _number(node: ast.expr) -> float | None:
    """The value of a numeric literal, possibly signed (``-1``); None for anything else (bools too)."""
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        sign = -1 if isinstance(node.op, ast.USub) else 1
        node = node.operand
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return sign * node.value
    return None


def _is_zero_or_one(node: ast.expr, value: int | None) -> bool:
    return (
        value is not None
        and isinstance(node, ast.Constant)
        and type(node.value) in (int, float)
        and (node.value == value)
    )


def _nonneg_call(node: ast.expr) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id in _NONNEG_CALLS) or (
        isinstance(func, ast.Attribute) and func.attr in _NONNEG_METHODS
    )


def count_names(tree: ast.AST) -> set[str]:
    """Names that only ever hold a length, count or ``abs()`` (every binding is ``n = len(...)`` or
    ``for n in range(stop)``); a parameter, augmented assignment or any other binding disqualifies."""
    good: set[str] = set()
    bad: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            bad.add(node.arg)
        elif isinstance(node, ast.Assign):
            ok = _nonneg_call(node.value)
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        (good if ok and target is name else bad).add(name.id)
        elif isinstance(node, ast.For | ast.comprehension):
            it = node.iter
            ok = (
                isinstance(it, ast.Call)
                and isinstance(it.func, ast.Name)
                and it.func.id == "range"
                and len(it.args) == 1
            )
            for name in ast.walk(node.target):
                if isinstance(name, ast.Name):
                    (good if ok and node.target is name else bad).add(name.id)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign | ast.NamedExpr):
            for name in ast.walk(node.target):
                if isinstance(name, ast.Name):
                    bad.add(name.id)
    return good - bad


def _nonneg(node: ast.expr, counts: set[str]) -> bool:
    return _nonneg_call(node) or (isinstance(node, ast.Name) and node.id in counts)


def _impossible(left: ast.expr, op: ast.cmpop, right: ast.expr, counts: set[str]) -> bool:
    """``len(x) == -1`` (any comparison with a negative constant), ``len(x) < 0``, ``len(x) >= 0``."""
    if _nonneg(right, counts) and not _nonneg(left, counts):
        flipped = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE}
        left, right = right, left
        op = flipped.get(type(op), type(op))()
    if not _nonneg(left, counts):
        return False
    value = _number(right)
    if value is None:
        return False
    return value < 0 or (value == 0 and isinstance(op, ast.Lt | ast.GtE))


def implausible_counts(tree: ast.AST, counts: set[str] | None = None) -> Counter:
    """How many no-op operations and impossible comparisons ``tree`` holds (by :data:`~.mutants.CRUDE_REASONS`
    name). A mutant holding more of either than its canonical is crude: the edit made one."""
    counts = count_names(tree) if counts is None else counts
    found: Counter = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and type(node.op) in _IDENTITY:
            right_id, left_id = _IDENTITY[type(node.op)]
            if _is_zero_or_one(node.right, right_id) or _is_zero_or_one(node.left, left_id):
                found["no_op"] += 1
        elif isinstance(node, ast.AugAssign) and type(node.op) in _IDENTITY:
            if _is_zero_or_one(node.value, _IDENTITY[type(node.op)][0]):
                found["no_op"] += 1
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            if _is_zero_or_one(node.operand, 0):
                found["no_op"] += 1
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for i, op in enumerate(node.ops):
                if _impossible(operands[i], op, operands[i + 1], counts):
                    found["impossible_comparison"] += 1
    return found
