"""Does the text a generator is shown state every convention the tests check?

A test that asserts ``f(-1) is None`` or ``f(50) == ("insufficient", 50)`` checks a convention the model can
only guess unless the task text states it; closed-book and rag numbers then measure the task writing. The
check reads each assert's expected value and lists the literals that cannot be derived from the call's
arguments (strings, None, negative sentinels, exception names) or container shapes (tuple, dict, set) that
the spec does not mention.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterable
from dataclasses import dataclass

from .models import Query

__all__ = ["SpecGap", "borrowed_names", "spec_gaps", "unstated_conventions"]

_WORD = re.compile(r"[a-z]{2,}")
_SHAPES: dict[type, tuple[str, ...]] = {
    ast.Tuple: ("tuple", "pair", "triple"),
    ast.Dict: ("dict", "mapping"),
    ast.Set: ("set",),
}
_EXCEPTION_NAME = re.compile(r"^[A-Z]\w*(Error|Exception)$")


@dataclass(frozen=True)
class SpecGap:
    """One convention an assert checks that the generation text does not state."""

    test_index: int
    literal: str

    def __str__(self) -> str:
        return f"test {self.test_index} expects {self.literal}"


def _expected_and_call(test: str) -> tuple[ast.expr, ast.expr] | None:
    """(expected value, call side) of ``assert <call> == / is / != <expected>``."""
    try:
        node = ast.parse(test).body[0]
    except (SyntaxError, IndexError):
        return None
    if not isinstance(node, ast.Assert):
        return None
    expr = node.test
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        expr = expr.operand
    if not isinstance(expr, ast.Compare) or len(expr.ops) != 1:
        return None
    if not isinstance(expr.ops[0], ast.Eq | ast.NotEq | ast.Is | ast.IsNot):
        return None
    left, right = expr.left, expr.comparators[0]
    if _has_call(right) and not _has_call(left):  # written as ``expected == f(x)``
        left, right = right, left
    return right, left


def _has_call(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) for n in ast.walk(node))


def _argument_text(call: ast.expr) -> tuple[str, set[int | float]]:
    """Casefolded letters of every string argument, and the negative numbers among the arguments."""
    letters, negatives = [], set()
    for n in ast.walk(call):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            letters.append(re.sub(r"[^a-z]", "", n.value.casefold()))
        elif (
            isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub) and isinstance(n.operand, ast.Constant)
        ):
            negatives.add(n.operand.value)
    return "".join(letters), negatives


def _mostly_from(value: str, args_letters: str) -> bool:
    """Most of the string's letters occur in the arguments: a transformation of them (a cipher, a plural,
    a case change), not a label the tests expect by convention."""
    letters = [c for c in value.casefold() if c.isalpha()]
    return bool(letters) and sum(c in args_letters for c in letters) >= 0.5 * len(letters)


def _mentions(spec: str, literal: str) -> bool:
    return literal.casefold() in spec.casefold()


def _shape_gaps(node: ast.expr, call: ast.expr, spec: str) -> list[str]:
    """A tuple, dict or set result the spec never names (unless the arguments have that shape too)."""
    for kind, words in _SHAPES.items():
        if not isinstance(node, kind) or any(isinstance(n, kind) for n in ast.walk(call)):
            continue
        if not any(_mentions(spec, w) for w in words):
            return [f"a {words[0]}"]
    return []


def _is_sentinel(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) is int
        and node.operand.value in (1, 2)
    )


def _literal_gaps(node: ast.expr, args_text: str, arg_negatives: set[int | float], spec: str) -> list[str]:
    gaps: list[str] = []
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and n.value is None:
            if not _mentions(spec, "None"):
                gaps.append("None")
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            words = _WORD.findall(n.value.casefold())
            derived = all(w in args_text for w in words) or _mostly_from(n.value, args_text)
            if (
                words
                and not derived
                and not _mentions(spec, n.value)
                and not all(_mentions(spec, w) for w in words)
            ):
                gaps.append(repr(n.value))
        elif n is node and _is_sentinel(n):  # -1 or -2 as the whole expected value: a "not found" code
            value = n.operand.value
            if value not in arg_negatives:  # f(-1) == -1 passes its argument through
                text = f"-{value}"
                if not re.search(rf"(?<![\d.]){re.escape(text)}(?!\d|\.\d)", spec):
                    gaps.append(text)
        elif isinstance(n, ast.Name) and _EXCEPTION_NAME.match(n.id) and not _mentions(spec, n.id):
            gaps.append(n.id)
    return gaps


def _computes_strings(parts: list[tuple[ast.expr, ast.expr] | None], spec: str) -> bool:
    """The suite's string results are computed values (a cipher, a roman numeral, a digest), not labels.

    Labels recur: a convention such as ``"insufficient"`` is expected by several asserts. Computed strings
    differ from assert to assert. So the results count as computed when at least three asserts expect a
    whole string, no two expect the same one, and the spec's own examples show one of them (the text then
    demonstrates the mapping; the other results follow from it rather than from a convention)."""
    results = [
        p[0].value for p in parts if p and isinstance(p[0], ast.Constant) and isinstance(p[0].value, str)
    ]
    if len(results) < 3 or len(set(results)) != len(results):
        return False
    return any(len(r) >= 2 and _mentions(spec, r) for r in results)


def unstated_conventions(tests: Iterable[str], text: str) -> list[SpecGap]:
    """Literals and shapes the asserts expect that ``text`` (a spec or a query) does not state."""
    gaps: list[SpecGap] = []
    parts_of = [_expected_and_call(test) for test in tests]
    computed = _computes_strings(parts_of, text)
    for i, parts in enumerate(parts_of):
        if parts is None:
            continue
        expected, call = parts
        if computed and isinstance(expected, ast.Constant) and isinstance(expected.value, str):
            continue  # one more value of the mapping the spec's examples show
        args_text, negatives = _argument_text(call)
        seen: set[str] = set()
        for literal in _shape_gaps(expected, call, text) + _literal_gaps(
            expected, args_text, negatives, text
        ):
            if literal not in seen:
                seen.add(literal)
                gaps.append(SpecGap(i, literal))
    return gaps


def spec_gaps(query: Query) -> list[SpecGap]:
    """:func:`unstated_conventions` for a pool query, against the text its generator is shown."""
    return unstated_conventions(query.test_suite, query.generation_text)


def _bound_names(tree: ast.AST) -> set[str]:
    """Names bound inside ``tree`` (comprehension and lambda variables, walrus targets)."""
    bound: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            bound.add(n.id)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
    return bound


def _top_level_definitions(code: str) -> set[str]:
    """The functions and classes a solution defines: its API, which the tests may call."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}


def _setup_names(setup: str) -> set[str]:
    try:
        tree = ast.parse(setup)
    except SyntaxError:
        return set()
    names = _bound_names(tree)
    for n in ast.walk(tree):
        if isinstance(n, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(n.name)
    return names


def borrowed_names(tests: Iterable[str], code: str, setup: str | None = None) -> list[str]:
    """Names the asserts use that only the reference solution's imports (or helpers) provide.

    A correct solution written from the spec need not import ``date`` or define the reference's helpers;
    the tests must get such names from the test setup. Builtins, the solution's functions and classes,
    and names the asserts bind themselves are fine.
    """
    allowed = set(dir(builtins)) | _top_level_definitions(code) | _setup_names(setup or "")
    missing: list[str] = []
    for test in tests:
        try:
            tree = ast.parse(test)
        except SyntaxError:
            continue
        bound = _bound_names(tree)
        for n in ast.walk(tree):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                if n.id not in allowed and n.id not in bound and n.id not in missing:
                    missing.append(n.id)
    return missing
