"""Behaviour probes: two snippets that return the same values on every call the asserts make behave alike.

A probe run (:func:`probe_job`) rewrites each assert to record every call's value and report a fingerprint
of them as its exception name, so the sandbox's per-assert verdicts carry it (:func:`probe_fingerprint`).
"""

from __future__ import annotations

import ast

from ..execution import ExecResult, Job

__all__ = ["PROBE_PREFIX", "probe_fingerprint", "probe_job"]

PROBE_PREFIX = "ERROR:Probe_"
# Run after the task's own setup, in the asserts' namespace. Values are rendered order-independently where
# Python's own order is arbitrary (sets, and dicts, which compare equal in any order) and without object
# addresses, so equal values give equal fingerprints in any process.
_PROBE_SETUP = r"""
import hashlib as _ab_hashlib
import re as _ab_re
_ab_vals = []
def _ab_repr(v, depth=0):
    if depth > 30:
        return '...'
    if isinstance(v, (set, frozenset)):
        return type(v).__name__ + '{' + ','.join(sorted(_ab_repr(x, depth + 1) for x in v)) + '}'
    if isinstance(v, dict):
        items = sorted(_ab_repr(k, depth + 1) + ':' + _ab_repr(x, depth + 1) for k, x in v.items())
        return type(v).__name__ + '{' + ','.join(items) + '}'
    if isinstance(v, (list, tuple)):
        return type(v).__name__ + '[' + ','.join(_ab_repr(x, depth + 1) for x in v) + ']'
    try:
        text = repr(v)
    except BaseException as exc:
        text = '<unrepresentable ' + type(exc).__name__ + '>'
    return type(v).__name__ + ':' + _ab_re.sub(r' at 0x[0-9a-fA-F]+', '', text)
def _ab_rec(v):
    _ab_vals.append(_ab_repr(v))
    return v
def _ab_emit(tag):
    digest = _ab_hashlib.sha256((tag + '\x00' + '\x01'.join(_ab_vals)).encode()).hexdigest()[:32]
    del _ab_vals[:]
    raise type('Probe_' + digest, (Exception,), {})()
"""


class _RecordCalls(ast.NodeTransformer):
    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        return ast.Call(func=ast.Name("_ab_rec", ast.Load()), args=[node], keywords=[])


def _probe_test(test: str) -> str:
    """The assert rewritten to record every call's value and end by raising its fingerprint, whose name
    holds the assert's own outcome (pass, FAIL or the exception type) and the values."""
    try:
        tree = ast.parse(test)
    except SyntaxError:
        return test  # the verdict is the same for every snippet: nothing to tell apart
    body = ast.unparse(ast.fix_missing_locations(_RecordCalls().visit(tree)))
    indented = "\n".join("    " + line for line in body.splitlines()) or "    pass"
    return (
        "del _ab_vals[:]\n"
        f"try:\n{indented}\n    _ab_tag = 'pass'\n"
        "except AssertionError:\n    _ab_tag = 'FAIL'\n"
        "except BaseException as _ab_exc:\n    _ab_tag = 'E:' + type(_ab_exc).__name__\n"
        "_ab_emit(_ab_tag)"
    )


def _probe_setup(setup: str | None) -> str:
    """The probe's helpers, then the task's setup with the calls inside its functions recorded too: an
    assert that calls a checking helper (``assert _check_loop_1()``, HumanEval's loops) makes its calls
    there. Module-level statements run unchanged."""
    if not setup:
        return _PROBE_SETUP
    try:
        tree = ast.parse(setup)
    except SyntaxError:
        return setup + _PROBE_SETUP
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    if not functions:
        return setup + _PROBE_SETUP
    for fn in functions:
        fn.body = [_RecordCalls().visit(stmt) for stmt in fn.body]
    return _PROBE_SETUP + ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def probe_job(tests: list[str] | tuple[str, ...], setup: str | None, code: str, timeout: float) -> Job:
    """A job whose per-assert verdicts are fingerprints of the snippet's behaviour on each assert: two
    snippets with the same fingerprints return the same values (or raise the same exception types) on
    every call the asserts make, directly or through a function of the task's setup."""
    return Job(code, tuple(_probe_test(t) for t in tests), timeout, _probe_setup(setup))


def probe_fingerprint(result: ExecResult) -> tuple[str, ...] | None:
    """The per-assert fingerprints of a probe run; None when the probe did not finish (no verdict)."""
    if result.infra_error or not result.results:
        return None
    if not all(r.startswith(PROBE_PREFIX) or r == "pass" for r in result.results):
        return None  # a timeout or a crash of the whole run: nothing to compare
    return tuple(result.results)
