"""Doctests in the project's docstrings as asserts: ``>>> f(2)`` with output ``4`` becomes
``assert f(2) == 4``, and an example whose output is a traceback becomes an ``_raises`` assert.

The examples are parsed with :class:`doctest.DocTestParser` (text only; nothing is run). Names resolve
in the docstring's module, as doctest would run them; ``>>> x = ...`` and ``>>> import ...`` lines bind
names for the examples after them. An expected output that is not a Python expression (an object repr,
printed text, ``...`` with ELLIPSIS) cannot be compared by value and is skipped (``doctest_output``).
"""

from __future__ import annotations

import ast
import doctest

from .classify import Candidate, classify
from .discover import Function, Module, ProjectIndex
from .scope import Locals, Scope

__all__ = ["read_doctests"]

_PARSER = doctest.DocTestParser()


def _docstrings(module: Module) -> list[tuple[str, int, str]]:
    """(owner, line of the docstring, text) for the module and every class and function in it."""
    out: list[tuple[str, int, str]] = []
    doc = ast.get_docstring(module.tree, clean=False)
    if doc and module.tree.body:
        out.append(("<module>", module.tree.body[0].lineno, doc))

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                text = ast.get_docstring(node, clean=False)
                if text and node.body:
                    out.append((prefix + node.name, node.body[0].lineno, text))
                if isinstance(node, ast.ClassDef):
                    walk(node.body, prefix + node.name + ".")

    walk(module.tree.body, "")
    return out


def _expression(source: str) -> ast.expr | None:
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError:
        return None
    return tree.body


def read_doctests(index: ProjectIndex, functions: dict[str, Function], module: Module) -> list[Candidate]:
    out: list[Candidate] = []
    for owner, line, text in _docstrings(module):
        try:
            examples = _PARSER.get_examples(text)
        except ValueError as exc:  # malformed doctest (bad indentation, missing blank after prompt)
            out.append(
                Candidate(module.rel, line, owner, "doctest").skip(
                    "doctest_output", f"cannot parse: {exc}"[:160]
                )
            )
            continue
        scope = Scope(index, module, is_test=False)
        loc = Locals()
        for ex in examples:
            at = line + ex.lineno
            cand = Candidate(module.rel, at, owner, "doctest")
            if ex.options.get(doctest.SKIP):
                continue
            try:
                stmt_tree = ast.parse(ex.source)
            except SyntaxError:
                out.append(cand.skip("doctest_output", "the example does not parse"))
                continue
            stmts = stmt_tree.body
            if len(stmts) == 1 and isinstance(stmts[0], ast.Import | ast.ImportFrom):
                bindings = index.import_bindings(module, stmts[0])
                scope = scope.child(bindings)
                for b in bindings:
                    loc.values.pop(b.name, None)
                continue
            if (
                len(stmts) == 1
                and isinstance(stmts[0], ast.Assign)
                and len(stmts[0].targets) == 1
                and isinstance(stmts[0].targets[0], ast.Name)
            ):
                loc.bind(stmts[0].targets[0].id, stmts[0].value)
                continue
            if len(stmts) != 1 or not isinstance(stmts[0], ast.Expr):
                for s in stmts:
                    loc.invalidate(s, "a doctest statement")
                if any(isinstance(n, ast.Call) for s in stmts for n in ast.walk(s)):
                    out.append(cand.skip("local_state", "the example is a statement, not an expression"))
                continue
            found = _expression_example(ex, stmts[0], cand, index, scope, functions, loc)
            if found is not None:
                out.append(found)
    return out


def _expression_example(
    ex: doctest.Example,
    stmt: ast.Expr,
    cand: Candidate,
    index: ProjectIndex,
    scope: Scope,
    functions: dict[str, Function],
    loc: Locals,
) -> Candidate | None:
    """The candidate of a doctest example that is one expression: compared with its output, or expected to
    raise the exception its traceback names."""
    expr = stmt.value
    if ex.exc_msg is not None:
        exc_name = ex.exc_msg.split(":", 1)[0].strip()
        exc_node = _expression(exc_name)
        if exc_node is None:
            return cand.skip("doctest_output", f"cannot read the exception {exc_name!r}")
        return classify(cand, index, scope, functions, raises=(exc_node, loc.substitute(expr), None))
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "print":
        loc.invalidate(stmt, "a doctest call")
        return cand.skip("doctest_output", "the example prints its result")
    want = ex.want.strip()
    if not want:
        found = classify(cand, index, scope, functions, expr=_is_none(loc.substitute(expr)))
        loc.invalidate(stmt, "a doctest call")
        return found
    if ex.options.get(doctest.ELLIPSIS) or "..." in want:
        return cand.skip("doctest_output", "the expected output elides part of the value")
    want_node = _expression(" ".join(want.split()) if ex.options.get(doctest.NORMALIZE_WHITESPACE) else want)
    if want_node is None:
        return cand.skip("doctest_output", f"the expected output is not a Python value ({want[:40]!r})")
    sub = loc.substitute(expr)
    if isinstance(sub, ast.expr):
        compare: ast.expr = ast.Compare(left=sub, ops=[ast.Eq()], comparators=[want_node])
        found = classify(cand, index, scope, functions, expr=compare)
    else:
        found = classify(cand, index, scope, functions, expr=sub)
    loc.invalidate(stmt, "a doctest call")
    return found


def _is_none(expr):
    """An example with no output returned None."""
    if isinstance(expr, ast.expr):
        return ast.Compare(left=expr, ops=[ast.Is()], comparators=[ast.Constant(None)])
    return expr
