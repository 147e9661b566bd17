"""Reading a test function's body statement by statement: locals are followed (see :class:`.scope.Locals`),
assertions of every supported style are handed to :func:`.classify.classify`, and what cannot be read
(asserts in ``try`` blocks or in loops over computed values, after a call that changes the project's
state, ...) is recorded with its reason."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .classify import Candidate, classify
from .discover import Function, ProjectIndex
from .scope import Locals, Poison, Scope
from .unittest_tests import unittest_assertion

__all__ = ["BodyReader", "dotted", "MAX_UNROLL"]

MAX_UNROLL = 100  # loop iterations unrolled per test body (a `for` over a literal sequence)
TRANSPARENT_WITH = (
    "subTest",
    "catch_warnings",
    "warns",
    "assertWarns",
    "assertWarnsRegex",
    "assertLogs",
    "assertNoLogs",
    "deprecated_call",
)
RAISES_WITH = ("raises", "assertRaises", "assertRaisesRegex")


def dotted(node: ast.AST) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.insert(0, node.id)
        return ".".join(parts)
    if isinstance(node, ast.Call):
        return dotted(node.func) + "()"
    return ""


@dataclass
class _Context:
    index: ProjectIndex
    functions: dict[str, Function]
    rel: str
    site: str
    style: str


class BodyReader:
    """Candidates of one test body (one parametrize row at a time)."""

    def __init__(
        self,
        index: ProjectIndex,
        functions: dict[str, Function],
        scope: Scope,
        rel: str,
        site: str,
        row: bool,
    ) -> None:
        self.ctx = _Context(index, functions, rel, site, "parametrize" if row else "pytest")
        self.scope = scope
        self.out: list[Candidate] = []
        self.blocked: Poison | None = None  # set once the body changes the project's state
        self.unroll_budget = MAX_UNROLL  # loop iterations unrolled in this body, nested loops included

    # ---- helpers
    def _cand(self, line: int, style: str | None = None) -> Candidate:
        return Candidate(self.ctx.rel, line, self.ctx.site, style or self.ctx.style)

    def _emit(self, line: int, style: str | None = None, expr=None, raises=None) -> None:
        cand = self._cand(line, style)
        if self.blocked is not None:
            self.out.append(cand.skip(self.blocked.reason, self.blocked.detail))
            return
        self.out.append(
            classify(cand, self.ctx.index, self.scope, self.ctx.functions, expr=expr, raises=raises)
        )

    def _skip_all(self, stmts: list[ast.stmt], reason: str, detail: str) -> None:
        """Every assertion inside ``stmts`` is skipped with ``reason``."""
        for stmt in stmts:
            for n in ast.walk(stmt):
                if isinstance(n, ast.Assert) or (
                    isinstance(n, ast.Call) and dotted(n.func).split(".")[-1].startswith("assert")
                ):
                    self.out.append(self._cand(n.lineno).skip(reason, detail))

    def _touches_project(self, node: ast.AST) -> str | None:
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                res = self.scope.lookup(n.id) if n.id not in self.locals.values else None
                if res is not None and res.kind == "project":
                    return n.id
        return None

    # ---- statements
    def read(self, stmts: list[ast.stmt], locals_: Locals) -> list[Candidate]:
        self.locals = locals_
        for stmt in stmts:
            self._stmt(stmt)
        return self.out

    def _stmt(self, stmt: ast.stmt) -> None:
        loc = self.locals
        if isinstance(stmt, ast.Assert):
            self._emit(stmt.lineno, expr=loc.substitute(stmt.test))
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            name = dotted(call.func)
            if name.startswith("self.assert") or name.startswith("self.fail"):
                form = unittest_assertion(call, loc)
                if form is None:
                    self.out.append(self._cand(stmt.lineno).skip("unsupported_form", f"{name} is not read"))
                else:
                    self._emit(stmt.lineno, "unittest", **form)
                return
            if name in ("pytest.raises", "raises") and len(call.args) >= 2:
                body = ast.Call(
                    func=call.args[1],
                    args=call.args[2:],
                    keywords=[k for k in call.keywords if k.arg != "match"],
                )
                self._emit(stmt.lineno, raises=(call.args[0], loc.substitute(body), _keyword(call, "match")))
                return
            self._effect(stmt, f"calls {name or 'a function'}")
        elif isinstance(stmt, ast.Expr):
            pass  # a docstring or a bare expression
        elif isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            value = stmt.value
            if value is None:
                return
            if len(targets) == 1 and isinstance(targets[0], ast.Name):
                loc.bind(targets[0].id, value)
            elif (
                len(targets) == 1
                and isinstance(targets[0], ast.Tuple | ast.List)
                and isinstance(value, ast.Tuple | ast.List)
                and len(value.elts) == len(targets[0].elts)
                and all(isinstance(t, ast.Name) for t in targets[0].elts)
            ):
                for t, v in zip(targets[0].elts, value.elts, strict=True):
                    loc.bind(t.id, v)  # type: ignore[attr-defined]
            else:
                self._effect(stmt, "assigns to an attribute, an item or several names")
        elif isinstance(stmt, ast.AugAssign | ast.Delete):
            self._effect(stmt, "changes a value in place")
        elif isinstance(stmt, ast.With):
            self._with(stmt)
        elif isinstance(stmt, ast.For):
            self._for(stmt)
        elif isinstance(stmt, ast.FunctionDef):
            self._local_def(stmt)
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            module = self.scope.module
            bindings = self.ctx.index.import_bindings(module, stmt)
            self.scope = self.scope.child(bindings)
            for b in bindings:
                loc.values.pop(b.name, None)
        elif isinstance(stmt, ast.Return | ast.Pass):
            pass
        elif isinstance(
            stmt, ast.If | ast.While | ast.Try | ast.ClassDef | ast.AsyncWith | ast.AsyncFor | ast.Match
        ):
            kind = type(stmt).__name__.lower()
            self._skip_all([stmt], "local_state", f"inside a `{kind}` block")
            loc.invalidate(stmt, f"a {kind} block")
        else:
            loc.invalidate(stmt, type(stmt).__name__)

    def _effect(self, stmt: ast.stmt, why: str) -> None:
        """A statement that is not an assertion: it may change locals, or the project's state."""
        touched = self._touches_project(stmt)
        if touched is not None and self.blocked is None:
            self.blocked = Poison(
                "global_state", f"the test changes state through {touched} at line {stmt.lineno}"
            )
        self.locals.invalidate(stmt, why)

    def _local_def(self, stmt: ast.FunctionDef) -> None:
        body = [s for s in stmt.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        a = stmt.args
        if (
            not (a.args or a.posonlyargs or a.kwonlyargs or a.vararg or a.kwarg)
            and not stmt.decorator_list
            and len(body) == 1
            and isinstance(body[0], ast.Return | ast.Expr)
            and body[0].value is not None
        ):
            lam = ast.Lambda(args=a, body=body[0].value)
            self.locals.bind(stmt.name, lam)
        else:
            self.locals.poison(stmt.name, "local_state", f"{stmt.name} is a function defined in the test")

    def _with(self, stmt: ast.With) -> None:
        names = [
            dotted(item.context_expr.func)
            if isinstance(item.context_expr, ast.Call)
            else dotted(item.context_expr)
            for item in stmt.items
        ]
        last = [n.split(".")[-1] for n in names]
        if (
            len(stmt.items) == 1
            and last[0] in RAISES_WITH
            and isinstance(stmt.items[0].context_expr, ast.Call)
        ):
            ctx = stmt.items[0].context_expr
            if stmt.items[0].optional_vars is not None:
                for n in ast.walk(stmt.items[0].optional_vars):
                    if isinstance(n, ast.Name):
                        self.locals.poison(n.id, "local_state", f"{n.id} holds the raised exception")
            if not ctx.args or not stmt.body:
                self._skip_all(stmt.body, "unsupported_form", f"{names[0]} without an exception type")
                return
            match = _keyword(ctx, "match")
            if last[0] == "assertRaisesRegex":
                match = ctx.args[1] if len(ctx.args) > 1 else _keyword(ctx, "expected_regex")
            for inner in stmt.body[:-1]:
                self._stmt(inner)
            raiser = stmt.body[-1]
            if isinstance(raiser, ast.Expr | ast.Assign | ast.AnnAssign) and raiser.value is not None:
                style = "unittest" if last[0].startswith("assert") else None
                self._emit(
                    raiser.lineno, style, raises=(ctx.args[0], self.locals.substitute(raiser.value), match)
                )
            else:
                self.out.append(
                    self._cand(raiser.lineno).skip(
                        "unsupported_form", "the raising statement is not an expression"
                    )
                )
            for n in ast.walk(stmt):
                if isinstance(n, ast.Assert):
                    self.out.append(
                        self._cand(n.lineno).skip("unsupported_form", "an assert inside a raises block")
                    )
            return
        if all(n in TRANSPARENT_WITH for n in last):
            for inner in stmt.body:
                self._stmt(inner)
            return
        text = " ".join(names)
        if "patch" in text or "mock" in text.lower() or "monkeypatch" in text:
            reason = "global_state"
        elif any(k in text for k in ("open", "Temporary", "tmp", "chdir")):
            reason = "files"
        else:
            reason = "local_state"
        self._skip_all(stmt.body, reason, f"inside `with {names[0] or '...'}`")
        self.locals.invalidate(stmt, "a with block")

    def _for(self, stmt: ast.For) -> None:
        seq = self.locals.substitute(stmt.iter)
        names_ok = all(
            isinstance(n, ast.Name | ast.Tuple | ast.List | ast.Store) for n in ast.walk(stmt.target)
        )
        if (
            isinstance(seq, ast.List | ast.Tuple | ast.Set)
            and len(seq.elts) <= MAX_UNROLL
            and names_ok
            and not stmt.orelse
            and not any(isinstance(n, ast.Break | ast.Continue) for n in ast.walk(stmt))
            and all(_bindable(stmt.target, elt) for elt in seq.elts)
            and len(seq.elts) <= self.unroll_budget
        ):
            self.unroll_budget -= len(seq.elts)
            outer = self.locals
            for elt in seq.elts:
                self.locals = outer.copy()
                _bind_target(self.locals, stmt.target, elt)
                for s in stmt.body:
                    self._stmt(s)
            self.locals = outer
            outer.invalidate(stmt, "bound in a loop")
            return
        reason, detail = (
            (seq.reason, seq.detail)
            if isinstance(seq, Poison)
            else ("local_state", "inside a loop over computed values")
        )
        self._skip_all(stmt.body, reason, detail)
        self.locals.invalidate(stmt, "bound in a loop")


def _bindable(target: ast.expr, value: ast.expr) -> bool:
    if isinstance(target, ast.Name):
        return True
    return (
        isinstance(target, ast.Tuple | ast.List)
        and isinstance(value, ast.Tuple | ast.List)
        and len(value.elts) == len(target.elts)
        and all(_bindable(t, v) for t, v in zip(target.elts, value.elts, strict=True))
    )


def _bind_target(loc: Locals, target: ast.expr, value: ast.expr) -> None:
    if isinstance(target, ast.Name):
        loc.bind(target.id, value)
    elif isinstance(target, ast.Tuple | ast.List) and isinstance(value, ast.Tuple | ast.List):
        for t, v in zip(target.elts, value.elts, strict=True):
            _bind_target(loc, t, v)


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)
