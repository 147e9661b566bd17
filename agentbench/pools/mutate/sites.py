"""Mutation sites: where each operator can make its one edit, found with ``ast``.

:func:`find_sites` yields ``(bug_type, edit, description)``, plus why when the edit is not a plausible
near-miss (:attr:`~.mutants.Mutant.crude`). Tokens are located in the source text between the operands,
so an edit changes the operator itself and nothing around it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from .source import Edit, Site, Source

__all__ = ["find_sites"]


# --- operator tables ---------------------------------------------------------------------------

_BINOP_TOKEN = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitAnd: "&",
    ast.BitXor: "^", ast.MatMult: "@",
}  # fmt: skip
_WRONG_OPERATOR = {
    "+": "-", "-": "+", "*": "/", "/": "*", "//": "%", "%": "//", "&": "|", "|": "&",
    "<<": ">>", ">>": "<<", "^": "&", "**": "*",
}  # fmt: skip
_NON_COMMUTATIVE = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift, ast.MatMult)
_CMP_TOKEN = {
    ast.Eq: r"==", ast.NotEq: r"!=", ast.Lt: r"<", ast.LtE: r"<=", ast.Gt: r">", ast.GtE: r">=",
    ast.In: r"in", ast.NotIn: r"not\s+in", ast.Is: r"is", ast.IsNot: r"is\s+not",
}  # fmt: skip
_BOUNDARY = {ast.Lt: "<=", ast.LtE: "<", ast.Gt: ">=", ast.GtE: ">"}
_WRONG_COMPARISON = {
    ast.Eq: "!=", ast.NotEq: "==", ast.Lt: ">", ast.Gt: "<", ast.LtE: ">=", ast.GtE: "<=",
    ast.In: "not in", ast.NotIn: "in", ast.Is: "is not", ast.IsNot: "is",
}  # fmt: skip
_ATOMIC = (ast.Name, ast.Constant, ast.Call, ast.Attribute, ast.Subscript, ast.List, ast.Tuple, ast.Dict)
_GUARD_EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def _find_token(src: Source, start: int, end: int, pattern: str) -> tuple[int, int] | None:
    """Locate exactly one operator token between two operands (only parens/space/comments may surround it)."""
    segment = src.text(start, end)
    word = pattern[0].isalpha()
    regex = rf"(?<![\w]){pattern}(?![\w])" if word else rf"(?<![<>=!*/]){re.escape(pattern)}(?![<>=*/])"
    code_part = re.sub(r"#[^\n]*", lambda m: " " * len(m.group()), segment)
    hits = list(re.finditer(regex, code_part))
    if len(hits) != 1:
        return None
    leftover = code_part[: hits[0].start()] + code_part[hits[0].end() :]
    if leftover.strip(" \t\r\n()\\"):
        return None
    b0 = len(segment[: hits[0].start()].encode())
    b1 = len(segment[: hits[0].end()].encode())
    return start + b0, start + b1


def _parenthesize(node: ast.AST, text: str) -> str:
    return text if isinstance(node, _ATOMIC) else f"({text})"


def _in_fstring(tree: ast.AST) -> set[int]:
    """ids of nodes inside f-strings, whose positions are unreliable on Python 3.11."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            inside.update(id(n) for n in ast.walk(node))
    return inside


def _docstring_ids(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Module):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _format_int(old_text: str, value: int) -> str:
    lowered = old_text.lower()
    for prefix, fmt in (("0x", "x"), ("0b", "b"), ("0o", "o")):
        if lowered.startswith(prefix) and value >= 0:
            digits = format(value, fmt)
            return old_text[:2] + (digits.upper() if old_text[2:].isupper() else digits)
    return str(value)


# --- site finders: each yields (bug_type, edit, description) --------------------------------------


_INDEX_NAMES = frozenset({"i", "j", "k", "idx", "index", "mid", "lo", "hi", "left", "right", "pos"})


def _index_names(tree: ast.AST) -> set[str]:
    """Names that hold positions: loop variables over ``range``/``enumerate`` and the usual index names."""
    names = set(_INDEX_NAMES)
    for node in ast.walk(tree):
        if isinstance(node, ast.For | ast.comprehension) and isinstance(node.iter, ast.Call):
            func = node.iter.func
            if isinstance(func, ast.Name) and func.id == "range" and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif isinstance(func, ast.Name) and func.id == "enumerate" and isinstance(node.target, ast.Tuple):
                first = node.target.elts[0] if node.target.elts else None
                if isinstance(first, ast.Name):
                    names.add(first.id)
    return names


def find_sites(tree: ast.AST, src: Source) -> Iterator[Site]:
    """Every edit the operators can make in ``tree``, in ``ast.walk`` order (f-strings and docstrings are
    left alone)."""
    skip = _in_fstring(tree) | _docstring_ids(tree)
    indices = _index_names(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Constant) and type(node.value) is int:
            yield from _off_by_one(node, src)
        elif isinstance(node, ast.BinOp):
            yield from _binop(node, src)
        elif isinstance(node, ast.AugAssign):
            yield from _augassign(node, src)
        elif isinstance(node, ast.Compare):
            yield from _compare(node, src)
        elif isinstance(node, ast.BoolOp):
            yield from _boolop(node, src)
        elif isinstance(node, ast.Call):
            yield from _call(node, src)
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
            yield from _slice_bound(node.slice, src)
        elif (
            isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name) and node.slice.id in indices
        ):
            yield from _shift_bound(node.slice, src, "index")
        if isinstance(node, ast.If | ast.While | ast.IfExp):
            yield from _negate(node.test, src)
        if isinstance(node, ast.If | ast.For | ast.While | ast.FunctionDef | ast.With | ast.Try):
            for block in _blocks(node):
                yield from _guards(block, src)


def _off_by_one(node: ast.Constant, src: Source) -> Iterator[Site]:
    start, end = src.span(node)
    old = src.text(start, end)
    for delta in (1, -1):
        new_text = _format_int(old, node.value + delta)
        yield "off_by_one", Edit(start, end, new_text), f"constant {old} -> {new_text}"


def _binop(node: ast.BinOp, src: Source) -> Iterator[Site]:
    token = _BINOP_TOKEN.get(type(node.op))
    if token is None:
        return
    left_start, left_end = src.span(node.left)
    right_start, right_end = src.span(node.right)
    pos = _find_token(src, left_end, right_start, token)
    if pos is None:
        return
    replacement = _WRONG_OPERATOR.get(token)
    if replacement:
        yield "wrong_operator", Edit(pos[0], pos[1], replacement), f"operator {token} -> {replacement}"
    if isinstance(node.op, _NON_COMMUTATIVE):
        left, right = src.text(left_start, left_end), src.text(right_start, right_end)
        middle = src.text(left_end, right_start)
        text = _parenthesize(node.right, right) + middle + _parenthesize(node.left, left)
        crude = "literal_operand" if _is_literal(node.left) or _is_literal(node.right) else None
        yield "swap_arguments", Edit(left_start, right_end, text), f"operands of {token} swapped", crude


def _augassign(node: ast.AugAssign, src: Source) -> Iterator[Site]:
    token = _BINOP_TOKEN.get(type(node.op))
    replacement = _WRONG_OPERATOR.get(token or "")
    if not token or not replacement:
        return
    _, target_end = src.span(node.target)
    value_start, _ = src.span(node.value)
    pos = _find_token(src, target_end, value_start, token + "=")
    if pos:
        yield "wrong_operator", Edit(pos[0], pos[1], replacement + "="), f"{token}= -> {replacement}="


def _compare(node: ast.Compare, src: Source) -> Iterator[Site]:
    operands = [node.left, *node.comparators]
    for i, op in enumerate(node.ops):
        _, left_end = src.span(operands[i])
        right_start, _ = src.span(operands[i + 1])
        pos = _find_token(src, left_end, right_start, _CMP_TOKEN[type(op)])
        if pos is None:
            continue
        old = src.text(*pos)
        if type(op) in _BOUNDARY:
            new = _BOUNDARY[type(op)]
            yield "off_by_one_boundary", Edit(pos[0], pos[1], new), f"comparison {old} -> {new}"
        new = _WRONG_COMPARISON[type(op)]
        yield "wrong_comparison", Edit(pos[0], pos[1], new), f"comparison {old} -> {new}"


def _boolop(node: ast.BoolOp, src: Source) -> Iterator[Site]:
    token = "and" if isinstance(node.op, ast.And) else "or"
    new = "or" if token == "and" else "and"
    for a, b in zip(node.values, node.values[1:], strict=False):
        pos = _find_token(src, src.span(a)[1], src.span(b)[0], token)
        if pos:
            yield "wrong_operator", Edit(pos[0], pos[1], new), f"{token} -> {new}"


# A function or method confused with its twin: the wrong_operator of calls (``max`` for ``min``).
_TWIN_FUNCTIONS = {"min": "max", "max": "min", "any": "all", "all": "any"}
_TWIN_METHODS = {
    "startswith": "endswith", "endswith": "startswith", "lower": "upper", "upper": "lower",
    "islower": "isupper", "isupper": "islower", "lstrip": "rstrip", "rstrip": "lstrip",
    "ljust": "rjust", "rjust": "ljust", "find": "rfind", "rfind": "find", "index": "rindex",
    "rindex": "index", "isdigit": "isalpha", "isalpha": "isdigit",
}  # fmt: skip


def _twin(node: ast.Call, src: Source) -> Iterator[Site]:
    func = node.func
    if isinstance(func, ast.Name) and func.id in _TWIN_FUNCTIONS:
        start, end = src.span(func)
        old, new = func.id, _TWIN_FUNCTIONS[func.id]
    elif isinstance(func, ast.Attribute) and func.attr in _TWIN_METHODS:
        _, end = src.span(func)
        start = end - len(func.attr.encode())
        old, new = func.attr, _TWIN_METHODS[func.attr]
    else:
        return
    if src.text(start, end) == old:
        yield "wrong_operator", Edit(start, end, new), f"{old}() -> {new}()"


def _call(node: ast.Call, src: Source) -> Iterator[Site]:
    yield from _twin(node, src)
    args = node.args
    if any(isinstance(a, ast.Starred) for a in args):
        return
    for a, b in zip(args, args[1:], strict=False):
        a_text, b_text = src.text(*src.span(a)), src.text(*src.span(b))
        if a_text == b_text:
            continue
        start, _ = src.span(a)
        _, end = src.span(b)
        middle = src.text(src.span(a)[1], src.span(b)[0])
        crude = "literal_operand" if _is_literal(a) or _is_literal(b) else None
        yield "swap_arguments", Edit(start, end, b_text + middle + a_text), "call arguments swapped", crude
    if isinstance(node.func, ast.Name) and node.func.id == "range" and 1 <= len(args) <= 2:
        yield from _shift_bound(args[-1], src, "range end")


def _slice_bound(node: ast.Slice, src: Source) -> Iterator[Site]:
    if node.upper is not None and not isinstance(node.upper, ast.Constant | ast.UnaryOp):
        yield from _shift_bound(node.upper, src, "slice end")


_LOOSE = (ast.BoolOp, ast.IfExp, ast.Compare, ast.NamedExpr, ast.Lambda)
_LOOSE_BINOPS = (ast.BitOr, ast.BitAnd, ast.BitXor, ast.LShift, ast.RShift)


def _shift_bound(bound: ast.expr, src: Source, what: str) -> Iterator[Site]:
    if isinstance(bound, ast.Constant):
        return  # constants are covered by off_by_one
    start, end = src.span(bound)
    text = src.text(start, end)
    if isinstance(bound, _LOOSE) or (isinstance(bound, ast.BinOp) and isinstance(bound.op, _LOOSE_BINOPS)):
        text = f"({text})"
    for sign in ("+", "-"):
        yield "off_by_one_boundary", Edit(start, end, f"{text} {sign} 1"), f"{what} {sign}1"


def _negate(test: ast.expr, src: Source) -> Iterator[Site]:
    start, end = src.span(test)
    if src.line_of(start) != src.line_of(end):
        return
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner_start, _ = src.span(test.operand)
        text = src.text(inner_start, end)
        if src.text(start, inner_start).strip() == "not":
            yield "wrong_comparison", Edit(start, end, text), "negation removed"
        return
    text = src.text(start, end)
    if isinstance(test, ast.BoolOp | ast.IfExp | ast.NamedExpr | ast.Lambda):
        text = f"({text})"
    yield "wrong_comparison", Edit(start, end, f"not {text}"), "condition negated"


def _blocks(node: ast.AST) -> Iterator[list[ast.stmt]]:
    for name in ("body", "orelse", "finalbody"):
        block = getattr(node, name, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield block
    for handler in getattr(node, "handlers", []):
        yield handler.body


def _guards(block: list[ast.stmt], src: Source) -> Iterator[Site]:
    if len(block) < 2:
        return  # removing the only statement would leave an empty block
    for stmt in block:
        if not (isinstance(stmt, ast.If) and not stmt.orelse and isinstance(stmt.body[-1], _GUARD_EXITS)):
            continue
        if len(stmt.body) > 3 or not _owns_its_lines(stmt, src):
            continue
        first, last = stmt.lineno, stmt.end_lineno or stmt.lineno
        edit = Edit(src.line_starts[first - 1], src.line_starts[last], "")
        crude = None if _is_short_guard(stmt) else "not_a_short_guard"
        yield "remove_edge_case_check", edit, "guard removed", crude


def _is_literal(node: ast.expr) -> bool:
    """A constant, possibly negated (``1``, ``-1``, ``"x"``, ``None``)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        node = node.operand
    return isinstance(node, ast.Constant)


def _is_simple_value(node: ast.expr | None) -> bool:
    """What an edge-case guard returns: nothing, a literal, a name, or a small literal container or call
    of literals and names (``return None``, ``return []``, ``return x``, ``raise ValueError("...")``)."""
    if node is None:
        return True
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return all(_is_literal(e) or isinstance(e, ast.Name) for e in node.elts)
    if isinstance(node, ast.Dict):
        return not node.keys
    if isinstance(node, ast.Call):
        return all(_is_literal(a) or isinstance(a, ast.Name | ast.JoinedStr) for a in node.args)
    return _is_literal(node) or isinstance(node, ast.Name)


def _is_short_guard(stmt: ast.If) -> bool:
    """``if <cond>: return/raise/continue/break <simple value>`` in at most two lines."""
    if len(stmt.body) != 1 or (stmt.end_lineno or stmt.lineno) - stmt.lineno > 1:
        return False
    exit_ = stmt.body[0]
    if isinstance(exit_, ast.Continue | ast.Break):
        return True
    if isinstance(exit_, ast.Return):
        return _is_simple_value(exit_.value)
    if isinstance(exit_, ast.Raise):
        return _is_simple_value(exit_.exc)
    return False


def _owns_its_lines(stmt: ast.stmt, src: Source) -> bool:
    """True when nothing but indentation precedes the statement and nothing but a comment follows it."""
    start, end = src.span(stmt)
    before = src.text(src.line_starts[stmt.lineno - 1], start)
    after = src.text(end, src.line_starts[stmt.end_lineno or stmt.lineno]).strip()
    return not before.strip() and (not after or after.startswith("#"))
