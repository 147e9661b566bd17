"""unittest's assertion methods as plain asserts: ``self.assertEqual(f(x), y)`` -> ``assert f(x) == y``.

Read: assertEqual (and the typed variants assertListEqual, assertDictEqual, ...), assertNotEqual,
assertTrue, assertFalse, assertIs(Not), assertIsNone, assertIsNotNone, assertIn, assertNotIn,
assertIsInstance, assertGreater(Equal), assertLess(Equal), assertAlmostEqual (``places`` or ``delta``, as
unittest computes it), assertRaises and assertRaisesRegex (called with the callable; the context-manager
form is read by :mod:`.testbody`). Other methods are reported as ``unsupported_form``.
"""

from __future__ import annotations

import ast

from .scope import Locals

__all__ = ["unittest_assertion", "EQUAL_METHODS"]

EQUAL_METHODS = {
    "assertEqual",
    "assertEquals",
    "failUnlessEqual",
    "assertListEqual",
    "assertTupleEqual",
    "assertDictEqual",
    "assertSetEqual",
    "assertSequenceEqual",
    "assertMultiLineEqual",
}
_COMPARE = {
    "assertNotEqual": ast.NotEq,
    "assertNotEquals": ast.NotEq,
    "assertIs": ast.Is,
    "assertIsNot": ast.IsNot,
    "assertIn": ast.In,
    "assertNotIn": ast.NotIn,
    "assertGreater": ast.Gt,
    "assertGreaterEqual": ast.GtE,
    "assertLess": ast.Lt,
    "assertLessEqual": ast.LtE,
}


def _arg(call: ast.Call, i: int, name: str) -> ast.expr | None:
    if len(call.args) > i and not isinstance(call.args[i], ast.Starred):
        return call.args[i]
    return next((k.value for k in call.keywords if k.arg == name), None)


def _compare(left: ast.expr, op: ast.cmpop, right: ast.expr) -> ast.expr:
    return ast.Compare(left=left, ops=[op], comparators=[right])


def _almost(call: ast.Call) -> ast.expr | None:
    first, second = _arg(call, 0, "first"), _arg(call, 1, "second")
    if first is None or second is None:
        return None
    diff = ast.Call(ast.Name("abs", ast.Load()), [ast.BinOp(first, ast.Sub(), second)], [])
    delta = _arg(call, 4, "delta")
    if delta is not None:
        close: ast.expr = _compare(diff, ast.LtE(), delta)
    else:
        places = _arg(call, 2, "places") or ast.Constant(7)
        close = _compare(
            ast.Call(ast.Name("round", ast.Load()), [diff, places], []), ast.Eq(), ast.Constant(0)
        )
    # unittest first checks equality (so equal non-numbers pass), then the rounded difference
    return ast.BoolOp(ast.Or(), [_compare(first, ast.Eq(), second), close])


def unittest_assertion(call: ast.Call, loc: Locals) -> dict | None:
    """``{"expr": ...}`` or ``{"raises": (exc, body, match)}`` with locals substituted; None when the
    method is not one this reader understands (or is called with a form it does not read)."""
    method = call.func.attr if isinstance(call.func, ast.Attribute) else ""
    expr: ast.expr | None = None
    if any(isinstance(a, ast.Starred) for a in call.args):
        return None
    if method in EQUAL_METHODS:
        a, b = _arg(call, 0, "first"), _arg(call, 1, "second")
        if a is None or b is None:
            return None
        expr = _compare(a, ast.Eq(), b)
    elif method in _COMPARE:
        a, b = (
            _arg(call, 0, "first" if "In" not in method else "member"),
            _arg(call, 1, "second" if "In" not in method else "container"),
        )
        if a is None or b is None:
            return None
        expr = _compare(a, _COMPARE[method](), b)
    elif method in ("assertTrue", "assert_", "failUnless"):
        expr = _arg(call, 0, "expr")
    elif method in ("assertFalse", "failIf"):
        x = _arg(call, 0, "expr")
        expr = ast.UnaryOp(ast.Not(), x) if x is not None else None
    elif method == "assertIsNone":
        x = _arg(call, 0, "obj")
        expr = _compare(x, ast.Is(), ast.Constant(None)) if x is not None else None
    elif method == "assertIsNotNone":
        x = _arg(call, 0, "obj")
        expr = _compare(x, ast.IsNot(), ast.Constant(None)) if x is not None else None
    elif method in ("assertIsInstance", "assertNotIsInstance"):
        x, t = _arg(call, 0, "obj"), _arg(call, 1, "cls")
        if x is None or t is None:
            return None
        expr = ast.Call(ast.Name("isinstance", ast.Load()), [x, t], [])
        if method == "assertNotIsInstance":
            expr = ast.UnaryOp(ast.Not(), expr)
    elif method == "assertAlmostEqual":
        expr = _almost(call)
    elif method in ("assertRaises", "assertRaisesRegex", "assertRaisesRegexp"):
        regex = method != "assertRaises"
        fn_at = 2 if regex else 1
        if len(call.args) <= fn_at:
            return None  # the context-manager form, read by the body reader
        exc = call.args[0]
        match = call.args[1] if regex else None
        body = ast.Call(
            func=call.args[fn_at],
            args=list(call.args[fn_at + 1 :]),
            keywords=[k for k in call.keywords if k.arg != "msg"],
        )
        return {"raises": (exc, loc.substitute(body), match)}
    if expr is None:
        return None
    return {"expr": loc.substitute(ast.fix_missing_locations(expr))}
