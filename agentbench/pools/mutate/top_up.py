"""Top-up operators: plausible single edits outside the six bug types, for tasks the six leave short.

Short functions with short suites (most of HumanEval) often have no realistic edit of the six types:
``return len(s)``, ``return ''.join(xs)``, ``return True`` in a search loop. The builder tries these edits
only for a task still short of distractors after every six-type candidate (``pool build --top-up``), so
a pool whose tasks have enough keeps only the six types. The edits (common mutation-testing operators):
- ``wrong_constant``: a boolean constant flipped (``return True`` -> ``return False``), but not a
  ``while True`` loop; the separator of ``str.join`` between ``''`` and ``' '``; ``str.split()`` and
  ``str.split(' ')`` exchanged (they differ on runs of spaces and at the ends);
- ``off_by_one`` on a float constant (``/ 2.0`` -> ``/ 3.0``), as the six-type operator does for ints.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from .sites import _docstring_ids, _in_fstring
from .source import Edit, Site, Source

__all__ = ["TOP_UP_BUG_TYPE", "find_top_up_sites"]

TOP_UP_BUG_TYPE = "wrong_constant"
_SEPARATORS = {"": " ", " ": ""}


def find_top_up_sites(tree: ast.AST, src: Source) -> Iterator[Site]:
    """Every top-up edit in ``tree`` (f-strings and docstrings are left alone)."""
    skip = _loop_conditions(tree) | _in_fstring(tree) | _docstring_ids(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Constant) and type(node.value) is bool:
            new = str(not node.value)
            yield TOP_UP_BUG_TYPE, Edit(*src.span(node), new), f"constant {node.value} -> {new}"
        elif isinstance(node, ast.Constant) and type(node.value) is float:
            yield from _float_off_by_one(node, src)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            yield from _separator(node, src)


def _separator(node: ast.Call, src: Source) -> Iterator[Site]:
    func = node.func
    assert isinstance(func, ast.Attribute)
    if func.attr == "join" and isinstance(func.value, ast.Constant) and func.value.value in _SEPARATORS:
        old = src.text(*src.span(func.value))
        quote = old[-1] if old[-1] in "'\"" else None
        if quote is None or old[:-1].count(quote) != 1 or not old.startswith(quote):
            return  # prefixed or triple-quoted literal: leave it
        new = quote + _SEPARATORS[func.value.value] + quote
        yield TOP_UP_BUG_TYPE, Edit(*src.span(func.value), new), f"join separator {old} -> {new}"
    elif func.attr == "split" and not node.keywords and len(node.args) <= 1:
        _, name_end = src.span(func)
        _, call_end = src.span(node)
        if not node.args:
            if src.text(name_end, call_end) == "()":
                yield TOP_UP_BUG_TYPE, Edit(name_end, call_end, "(' ')"), "split() -> split(' ')"
        elif isinstance(node.args[0], ast.Constant) and node.args[0].value == " ":
            yield TOP_UP_BUG_TYPE, Edit(name_end, call_end, "()"), "split(' ') -> split()"


def _float_off_by_one(node: ast.Constant, src: Source) -> Iterator[Site]:
    old = src.text(*src.span(node))
    if not re.fullmatch(r"\d+\.\d*", old):
        return  # exponent or odd notation: no edit a person would make by one
    for delta in (1, -1):
        if node.value + delta < 0:
            continue
        decimals = len(old.split(".")[1])
        new = f"{node.value + delta:.{decimals}f}" if decimals else f"{int(node.value + delta)}."
        yield "off_by_one", Edit(*src.span(node), new), f"constant {old} -> {new}"


def _loop_conditions(tree: ast.AST) -> set[int]:
    """``while True``/``while False``: flipping them makes a loop that never runs or never ends."""
    return {
        id(n.test) for n in ast.walk(tree) if isinstance(n, ast.While) and isinstance(n.test, ast.Constant)
    }
