"""Every example a spec states, as an assert to run against the canonical."""

from __future__ import annotations

import ast
import re

_ARROW = re.compile(r"[ \t]*(->|➞|==>|=>|==|=(?!=))[ \t]*")
# names an expected value may use besides the test setup's: constructors, never words of prose (``next``)
_VALUE_NAMES = frozenset(
    {"float", "int", "complex", "str", "bytes", "list", "tuple", "dict", "set", "frozenset"}
)


def _value_like(node: ast.AST, allowed: set[str]) -> bool:
    """An expected value: literals, arithmetic on them, and calls of known names (``date(2024, 1, 1)``)."""
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and not isinstance(n.func, ast.Name):
            return False  # ``True (10001)`` is prose after a value, not a call
        if isinstance(n, ast.Name) and n.id not in allowed:
            return False
        if isinstance(n, ast.Attribute | ast.Lambda | ast.NamedExpr | ast.Starred | ast.Await):
            return False
    return True


def _longest_value(text: str, allowed: set[str]) -> str | None:
    """The longest prefix of ``text`` that is a value (prose and punctuation after it dropped)."""
    text = text.strip()
    for end in range(len(text), 0, -1):
        candidate = text[:end].strip()
        if not candidate or candidate[-1] in ",;:.":  # ``3.`` ends a sentence
            continue
        try:
            node = ast.parse(candidate, mode="eval").body
        except (SyntaxError, ValueError):
            continue
        if isinstance(node, ast.Tuple) and not candidate.startswith("("):
            continue  # ``64, next power ...``: prose after a value
        if _value_like(node, allowed):
            return candidate
    return None


def _call_at(text: str, start: int) -> tuple[str, int] | None:
    """The call expression starting at ``start`` (its text and end offset), shortest one that parses."""
    for end in range(start, len(text)):
        if text[end] != ")":
            continue
        piece = text[start : end + 1]
        try:
            node = ast.parse(piece, mode="eval").body
        except SyntaxError:
            continue
        if isinstance(node, ast.Call):
            return piece, end + 1
    return None


def _setup_names(setup: str) -> set[str]:
    try:
        tree = ast.parse(setup)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for n in tree.body:
        if isinstance(n, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, ast.FunctionDef | ast.ClassDef):
            names.add(n.name)
        elif isinstance(n, ast.Assign):
            names.update(t.id for t in n.targets if isinstance(t, ast.Name))
    return names


def _assert_for(call: str, value: str) -> str:
    """``call == value``; a float written with d decimals matches within the rounding of its last digit."""
    node = ast.parse(value, mode="eval").body
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node, sign = node.operand, -1
    if isinstance(node, ast.Constant) and type(node.value) is float and "e" not in value.lower():
        decimals = len(value.split(".")[1]) if "." in value else 0
        return f"assert abs(({call}) - ({sign * node.value!r})) <= {0.5 * 10**-decimals + 1e-9!r}"
    return f"assert ({call}) == ({value})"


def _unnamed_examples(text: str, function: str, arity: int, allowed: set[str]) -> list[str]:
    """``Example(s): X -> Y; X2 -> Y2``: X the argument (or, for a function of several arguments, a tuple
    of them)."""
    out = []
    for m in re.finditer(r"\bExamples?:\s*(.*)", text):
        for part in m.group(1).split(";"):
            if "->" not in part:
                continue
            left, _, right = part.partition("->")
            left = left.strip()
            try:
                node = ast.parse(left, mode="eval").body
            except SyntaxError:
                continue
            if not _value_like(node, allowed):
                continue
            if arity > 1 and isinstance(node, ast.Tuple) and len(node.elts) == arity:
                call = f"{function}(*({left}))"
            elif arity == 1:
                call = f"{function}({left})"
            else:
                continue
            value = _longest_value(right, allowed)
            if value is not None:
                out.append(_assert_for(call, value))
    return out


def example_asserts(spec: str, function: str, setup: str = "", arity: int | None = None) -> list[str]:
    """The spec's examples of ``function`` as asserts (examples whose value cannot be read are skipped).

    Examples name the function, or call it ``f``; given the function's ``arity``, an ``Example: X -> Y``
    that names no function counts too."""
    allowed = set(_VALUE_NAMES) | _setup_names(setup)
    out: list[str] = []
    lines = spec.splitlines()
    # doctest: ``>>> expr`` then its output up to a blank line or the next prompt
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith(">>>") and function in line:
            expr = line[3:].strip()
            output: list[str] = []
            j = i + 1
            while j < len(lines) and lines[j].strip() and not lines[j].strip().startswith(">>>"):
                output.append(lines[j].strip())
                j += 1
            value = _longest_value(" ".join(output), allowed) if output else None
            try:
                ast.parse(expr, mode="eval")
            except SyntaxError:
                value = None
            if value is not None:
                out.append(_assert_for(re.sub(r"\s*#.*$", "", expr), value))
            i = j
            continue
        i += 1
    # inline: ``f(args) -> value`` (any of the arrows), anywhere in the text outside doctest lines
    text = "\n".join(line for line in lines if not line.strip().startswith(">>>"))
    named = [m.start() for m in re.finditer(rf"(?<![\w.]){re.escape(function)}\s*\(", text)]
    if not named and function != "f":
        named = [m.start() for m in re.finditer(r"(?<![\w.])f\(", text)]
    for start in named:
        found = _call_at(text, start)
        if found is None:
            continue
        call, end = found
        node = ast.parse(call, mode="eval").body
        if not all(_value_like(a, allowed) for a in [*node.args, *(k.value for k in node.keywords)]):
            continue  # ``is_happy(a)``: prose, or a definition such as ``fib(n) = ...``
        if call.startswith("f(") and function != "f":
            call = function + call[1:]
        arrow = _ARROW.match(text, end)
        if arrow is None:
            continue
        rest = text[arrow.end() :].split("\n", 1)[0]
        value = _longest_value(rest, allowed)
        if value is not None:
            out.append(_assert_for(call, value))
    if not out and arity:
        out = _unnamed_examples(text, function, arity, allowed)
    return out


# ------------------------------------------------------------------------------------------ duplicates
