"""Single-edit mutation operators (the six ExecRetrieval bug types).

Sites are found with ``ast`` but every edit is applied to the original source text, so a mutant is
byte-identical to its canonical outside the one edited line (or the one removed guard statement).
Re-formatting with ``ast.unparse`` would let a retriever tell canonicals from mutants by layout.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from .models import BUG_TYPES

__all__ = ["Mutant", "find_mutants", "OPERATORS", "CRUDE_REASONS"]

OPERATORS = BUG_TYPES  # the mutation operators are the six bug types (one definition, in models)

CRUDE_REASONS = ("literal_operand", "not_a_short_guard", "no_op", "impossible_comparison")


@dataclass(frozen=True)
class Mutant:
    bug_type: str
    code: str
    line_number: int  # 1-based line of the edit in the canonical
    line_before: str
    line_after: str  # "" when the edit removed the line(s)
    description: str
    crude: str | None = None
    """Why the edit is not a plausible near-miss (the builder rejects it by default), one of
    :data:`CRUDE_REASONS`: ``literal_operand`` (an operand swapped with a literal, ``1 >> n``),
    ``not_a_short_guard`` (the removed ``if`` does more than return or raise a simple value), ``no_op``
    (the edit leaves an operation nobody writes: ``x - 0``, ``-0``, ``n * 1``, ``x ** 1``, ``i += 0``) or
    ``impossible_comparison`` (a length, count or ``abs()`` compared with a negative constant, or below
    zero: ``len(x) == -1``, ``len(x) < 0``; such a guard never fires, a giveaway no person writes)."""


@dataclass(frozen=True)
class _Edit:
    start: int  # byte offsets into the UTF-8 source
    end: int
    text: str


# (bug type, edit, description) or, for an edit that is not a plausible near-miss, plus why (Mutant.crude)
_Site = tuple[str, _Edit, str] | tuple[str, _Edit, str, str | None]


class _Source:
    """UTF-8 view of the source; ``ast`` column offsets are byte offsets."""

    def __init__(self, code: str) -> None:
        self.code = code
        self.data = code.encode()
        self.line_starts = [0]
        for line in self.data.splitlines(keepends=True):
            self.line_starts.append(self.line_starts[-1] + len(line))

    def offset(self, lineno: int, col: int) -> int:
        return self.line_starts[lineno - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (
            self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
            self.offset(node.end_lineno, node.end_col_offset),  # type: ignore[attr-defined]
        )

    def text(self, start: int, end: int) -> str:
        return self.data[start:end].decode()

    def line_of(self, offset: int) -> int:
        lo, hi = 0, len(self.line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    def line(self, lineno: int) -> str:
        return self.data[self.line_starts[lineno - 1] : self.line_starts[lineno]].decode().rstrip("\r\n")

    def apply(self, edit: _Edit) -> str:
        return (self.data[: edit.start] + edit.text.encode() + self.data[edit.end :]).decode()


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


def _find_token(src: _Source, start: int, end: int, pattern: str) -> tuple[int, int] | None:
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


def _sites(tree: ast.AST, src: _Source) -> Iterator[_Site]:
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


def _off_by_one(node: ast.Constant, src: _Source) -> Iterator[_Site]:
    start, end = src.span(node)
    old = src.text(start, end)
    for delta in (1, -1):
        new_text = _format_int(old, node.value + delta)
        yield "off_by_one", _Edit(start, end, new_text), f"constant {old} -> {new_text}"


def _binop(node: ast.BinOp, src: _Source) -> Iterator[_Site]:
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
        yield "wrong_operator", _Edit(pos[0], pos[1], replacement), f"operator {token} -> {replacement}"
    if isinstance(node.op, _NON_COMMUTATIVE):
        left, right = src.text(left_start, left_end), src.text(right_start, right_end)
        middle = src.text(left_end, right_start)
        text = _parenthesize(node.right, right) + middle + _parenthesize(node.left, left)
        crude = "literal_operand" if _is_literal(node.left) or _is_literal(node.right) else None
        yield "swap_arguments", _Edit(left_start, right_end, text), f"operands of {token} swapped", crude


def _augassign(node: ast.AugAssign, src: _Source) -> Iterator[_Site]:
    token = _BINOP_TOKEN.get(type(node.op))
    replacement = _WRONG_OPERATOR.get(token or "")
    if not token or not replacement:
        return
    _, target_end = src.span(node.target)
    value_start, _ = src.span(node.value)
    pos = _find_token(src, target_end, value_start, token + "=")
    if pos:
        yield "wrong_operator", _Edit(pos[0], pos[1], replacement + "="), f"{token}= -> {replacement}="


def _compare(node: ast.Compare, src: _Source) -> Iterator[_Site]:
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
            yield "off_by_one_boundary", _Edit(pos[0], pos[1], new), f"comparison {old} -> {new}"
        new = _WRONG_COMPARISON[type(op)]
        yield "wrong_comparison", _Edit(pos[0], pos[1], new), f"comparison {old} -> {new}"


def _boolop(node: ast.BoolOp, src: _Source) -> Iterator[_Site]:
    token = "and" if isinstance(node.op, ast.And) else "or"
    new = "or" if token == "and" else "and"
    for a, b in zip(node.values, node.values[1:], strict=False):
        pos = _find_token(src, src.span(a)[1], src.span(b)[0], token)
        if pos:
            yield "wrong_operator", _Edit(pos[0], pos[1], new), f"{token} -> {new}"


# A function or method confused with its twin: the wrong_operator of calls (``max`` for ``min``).
_TWIN_FUNCTIONS = {"min": "max", "max": "min", "any": "all", "all": "any"}
_TWIN_METHODS = {
    "startswith": "endswith", "endswith": "startswith", "lower": "upper", "upper": "lower",
    "islower": "isupper", "isupper": "islower", "lstrip": "rstrip", "rstrip": "lstrip",
    "ljust": "rjust", "rjust": "ljust", "find": "rfind", "rfind": "find", "index": "rindex",
    "rindex": "index", "isdigit": "isalpha", "isalpha": "isdigit",
}  # fmt: skip


def _twin(node: ast.Call, src: _Source) -> Iterator[_Site]:
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
        yield "wrong_operator", _Edit(start, end, new), f"{old}() -> {new}()"


def _call(node: ast.Call, src: _Source) -> Iterator[_Site]:
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
        yield "swap_arguments", _Edit(start, end, b_text + middle + a_text), "call arguments swapped", crude
    if isinstance(node.func, ast.Name) and node.func.id == "range" and 1 <= len(args) <= 2:
        yield from _shift_bound(args[-1], src, "range end")


def _slice_bound(node: ast.Slice, src: _Source) -> Iterator[_Site]:
    if node.upper is not None and not isinstance(node.upper, ast.Constant | ast.UnaryOp):
        yield from _shift_bound(node.upper, src, "slice end")


_LOOSE = (ast.BoolOp, ast.IfExp, ast.Compare, ast.NamedExpr, ast.Lambda)
_LOOSE_BINOPS = (ast.BitOr, ast.BitAnd, ast.BitXor, ast.LShift, ast.RShift)


def _shift_bound(bound: ast.expr, src: _Source, what: str) -> Iterator[_Site]:
    if isinstance(bound, ast.Constant):
        return  # constants are covered by off_by_one
    start, end = src.span(bound)
    text = src.text(start, end)
    if isinstance(bound, _LOOSE) or (isinstance(bound, ast.BinOp) and isinstance(bound.op, _LOOSE_BINOPS)):
        text = f"({text})"
    for sign in ("+", "-"):
        yield "off_by_one_boundary", _Edit(start, end, f"{text} {sign} 1"), f"{what} {sign}1"


def _negate(test: ast.expr, src: _Source) -> Iterator[_Site]:
    start, end = src.span(test)
    if src.line_of(start) != src.line_of(end):
        return
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner_start, _ = src.span(test.operand)
        text = src.text(inner_start, end)
        if src.text(start, inner_start).strip() == "not":
            yield "wrong_comparison", _Edit(start, end, text), "negation removed"
        return
    text = src.text(start, end)
    if isinstance(test, ast.BoolOp | ast.IfExp | ast.NamedExpr | ast.Lambda):
        text = f"({text})"
    yield "wrong_comparison", _Edit(start, end, f"not {text}"), "condition negated"


def _blocks(node: ast.AST) -> Iterator[list[ast.stmt]]:
    for name in ("body", "orelse", "finalbody"):
        block = getattr(node, name, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield block
    for handler in getattr(node, "handlers", []):
        yield handler.body


def _guards(block: list[ast.stmt], src: _Source) -> Iterator[_Site]:
    if len(block) < 2:
        return  # removing the only statement would leave an empty block
    for stmt in block:
        if not (isinstance(stmt, ast.If) and not stmt.orelse and isinstance(stmt.body[-1], _GUARD_EXITS)):
            continue
        if len(stmt.body) > 3 or not _owns_its_lines(stmt, src):
            continue
        first, last = stmt.lineno, stmt.end_lineno or stmt.lineno
        edit = _Edit(src.line_starts[first - 1], src.line_starts[last], "")
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


def _owns_its_lines(stmt: ast.stmt, src: _Source) -> bool:
    """True when nothing but indentation precedes the statement and nothing but a comment follows it."""
    start, end = src.span(stmt)
    before = src.text(src.line_starts[stmt.lineno - 1], start)
    after = src.text(end, src.line_starts[stmt.end_lineno or stmt.lineno]).strip()
    return not before.strip() and (not after or after.startswith("#"))


# --- implausible results: operations no person writes --------------------------------------------

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


def _count_names(tree: ast.AST) -> set[str]:
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
    """How many no-op operations and impossible comparisons ``tree`` holds (by :data:`CRUDE_REASONS`
    name). A mutant holding more of either than its canonical is crude: the edit made one."""
    counts = _count_names(tree) if counts is None else counts
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


def find_mutants(code: str) -> list[Mutant]:
    """All syntactically valid single-edit mutants of ``code``, deduplicated, in source order."""
    tree = ast.parse(code)
    src = _Source(code)
    canonical_dump = ast.dump(tree)
    counts = _count_names(tree)
    implausible = implausible_counts(tree, counts)
    seen: set[str] = {code}
    mutants: list[Mutant] = []
    for bug_type, edit, description, *flag in _sites(tree, src):
        first_line = src.line_of(edit.start)
        last_line = src.line_of(max(edit.start, edit.end - 1))
        if bug_type != "remove_edge_case_check" and first_line != last_line:
            continue  # a single-line edit must stay on one line
        new_code = src.apply(edit)
        if new_code in seen:
            continue
        try:
            new_tree = ast.parse(new_code)
        except SyntaxError:
            continue
        if ast.dump(new_tree) == canonical_dump:
            continue
        seen.add(new_code)
        before = "\n".join(src.line(n) for n in range(first_line, last_line + 1))
        after = "" if bug_type == "remove_edge_case_check" else new_code.splitlines()[first_line - 1]
        crude = flag[0] if flag else None
        if crude is None:
            made = implausible_counts(new_tree, counts) - implausible
            crude = next((reason for reason in CRUDE_REASONS if made[reason]), None)
        mutants.append(Mutant(bug_type, new_code, first_line, before, after, description, crude))
    mutants.sort(key=lambda m: (m.line_number, m.bug_type, m.code))
    return mutants
