"""What a name in a test means, read statically: a project function, something the test setup can provide
(a standard-library import, a self-contained helper or constant of the test module), or a reason the
assert cannot stand alone (a fixture, a third-party module, local state, ...).

``Locals`` follows a test body's straight-line statements so that ``x = [1, 2]; assert f(x) == 3``
becomes ``assert f([1, 2]) == 3``; a name whose value cannot be known that way (bound in a loop, changed
by a call, a fixture parameter) is poisoned with the reason.
"""

from __future__ import annotations

import ast
import builtins
import copy
import dataclasses
from dataclasses import dataclass, field

from .discover import STDLIB, Module, ProjectIndex, Ref, statement_lines
from .symbols import free_names

__all__ = ["Res", "Scope", "Locals", "SetupItem", "Poison", "RAISES_HELPER", "bound_inside"]

BUILTINS = frozenset(dir(builtins))
FILE_BUILTINS = {"open"}
EFFECT_BUILTINS = {
    "print",
    "input",
    "exec",
    "eval",
    "breakpoint",
    "exit",
    "quit",
    "__import__",
    "globals",
    "locals",
    "vars",
    "compile",
    "help",
    "memoryview",
}
NONDETERMINISTIC_BUILTINS = {"id", "hash"}

RAISES_HELPER = '''def _raises(exc, fn, pattern=None):
    """True when fn() raises exc (with a message matching the regex pattern, when given)."""
    try:
        fn()
    except exc as e:
        import re

        return pattern is None or re.search(pattern, str(e)) is not None
    return False'''


@dataclass(frozen=True, order=True)
class SetupItem:
    """One piece of a task's test setup; sorted: imports first (alphabetically), then definitions in the
    order of their files and lines, then the ``_raises`` helper."""

    key: tuple
    text: str

    @classmethod
    def imports(cls, text: str) -> SetupItem:
        return cls((0, text), text)

    @classmethod
    def definition(cls, rel: str, line: int, text: str) -> SetupItem:
        return cls((1, rel, line), text)


RAISES_ITEM = SetupItem((2,), RAISES_HELPER)


@dataclass(frozen=True)
class Res:
    """A name's meaning. kind: project | setup | builtin | skip."""

    kind: str
    ref: Ref | None = None
    setup: tuple[SetupItem, ...] = ()
    reason: str = ""
    detail: str = ""
    qualified: str = ""
    """Standard-library names: the dotted name (``datetime.datetime``), for the effect checks."""

    @classmethod
    def skip(cls, reason: str, detail: str) -> Res:
        return cls("skip", reason=reason, detail=detail)


@dataclass(frozen=True)
class Poison:
    reason: str
    detail: str


def _import_text(
    binding_module: str, attr: str | None, bound: str, plain_import: bool, alias: ast.alias | None
) -> str:
    if attr is not None:
        return ast.unparse(
            ast.ImportFrom(
                module=binding_module, names=[ast.alias(attr, None if bound == attr else bound)], level=0
            )
        )
    if alias is not None and alias.asname is None:  # `import a.b` binds `a`
        return f"import {alias.name}"
    return f"import {binding_module}" + ("" if bound == binding_module else f" as {bound}")


class Scope:
    """File-level names of a test module (helpers may go to the test setup) or of a source module (for its
    doctests: its definitions are project names)."""

    def __init__(self, index: ProjectIndex, module: Module, is_test: bool) -> None:
        self.index = index
        self.module = module
        self.is_test = is_test
        self.fixtures: set[str] = set()
        self._memo: dict[str, Res] = {}
        if is_test:
            for name, b in module.bindings.items():
                node = b.nodes[0] if b.nodes else None
                if isinstance(node, ast.FunctionDef) and any(
                    "fixture" in ast.unparse(d) for d in node.decorator_list
                ):
                    self.fixtures.add(name)

    def child(self, bindings: list) -> Scope:
        """This scope with more names bound (imports inside a test body or a doctest)."""
        module = dataclasses.replace(
            self.module,
            bindings={**self.module.bindings, **{b.name: b for b in bindings}},
            star_modules=list(self.module.star_modules),
        )
        out = Scope(self.index, module, self.is_test)
        out.fixtures = set(self.fixtures) - {b.name for b in bindings}
        return out

    def lookup(self, name: str) -> Res:
        if name not in self._memo:
            self._memo[name] = Res.skip("local_state", f"{name} is defined recursively")
            self._memo[name] = self._lookup(name)
        return self._memo[name]

    def _stdlib(self, b, name: str) -> Res:
        top = (b.module or "").split(".")[0]
        if top not in STDLIB:
            return Res.skip("third_party", f"uses the third-party module {top}")
        if top == "unittest" and (b.attr == "mock" or (b.module or "").startswith("unittest.mock")):
            return Res.skip("global_state", "uses unittest.mock")
        text = _import_text(b.module or name, b.attr, name, b.attr is None, b.alias)
        qualified = f"{b.module}.{b.attr}" if b.attr else (b.module or name)
        return Res("setup", setup=(SetupItem.imports(text),), qualified=qualified)

    def _lookup(self, name: str) -> Res:
        mod = self.module
        b = mod.bindings.get(name)
        if b is None:
            if not self.is_test:
                ref = self.index.resolve(mod.name, name)
                if ref is not None:
                    return Res("project", ref=ref)
            return self._builtin(name)
        if b.kind == "import":
            return self._stdlib(b, name)
        if b.kind == "project":
            target = b.module or ""
            ref = (
                self.index.resolve_dotted(f"{target}.{b.attr}" if b.attr else target)
                if self.index.is_project(target)
                else None
            )
            if ref is None:
                if not self.index.is_project(target) or any(p.startswith("test") for p in target.split(".")):
                    return Res.skip("test_helper", f"{name} comes from the test package ({target})")
                return Res.skip("project_object", f"{name} ({target}) is not found in the project's sources")
            return Res("project", ref=ref)
        if not self.is_test:
            return Res("project", ref=Ref(mod.name, name))
        if name in self.fixtures:
            return Res.skip("fixture", f"uses the fixture {name}")
        return self._helper(name, b)

    def _builtin(self, name: str) -> Res:
        if name in FILE_BUILTINS:
            return Res.skip("files", f"calls {name}")
        if name in EFFECT_BUILTINS:
            return Res.skip("side_effects", f"calls {name}")
        if name in NONDETERMINISTIC_BUILTINS:
            return Res.skip("nondeterministic", f"uses {name}() (differs between processes)")
        if name in BUILTINS:
            return Res("builtin")
        return Res.skip("unresolved_name", f"{name} is not defined where the test can see it")

    def _effect_in(self, node: ast.AST) -> tuple[str, str] | None:
        """A clock, random numbers, files or the network used by a test-module definition."""
        from .effects import _classify

        for n in ast.walk(node):
            if not isinstance(n, ast.Attribute | ast.Name) or not isinstance(n.ctx, ast.Load):
                continue
            found = _chain(n)
            if found is None or found[0] not in self.module.bindings:
                continue
            b = self.module.bindings[found[0]]
            if b.kind != "import":
                continue
            base = f"{b.module}.{b.attr}" if b.attr else (b.module or found[0])
            qualified = ".".join([base, *found[1]])
            why = _classify(qualified)
            if why is not None:
                return why, f"uses {qualified}"
        return None

    def _helper(self, name: str, b) -> Res:
        """A definition or constant of the test module: goes to the test setup when self-contained."""
        items: list[SetupItem] = []
        seen: set[int] = set()
        for node in b.nodes:
            if id(node) in seen:
                continue
            seen.add(id(node))
            start, end = statement_lines(self.module, node)
            text = "\n".join(self.module.lines[start - 1 : end])
            if isinstance(node, ast.ClassDef) and any(
                isinstance(n, ast.FunctionDef) and n.name.startswith("test") for n in node.body
            ):
                return Res.skip("test_helper", f"{name} is a test class")
            why = self._effect_in(node)
            if why is not None:
                return Res.skip(why[0], f"test helper {name}: {why[1]}")
            for free in sorted(free_names(text) - {name}):
                res = self.lookup(free)
                if res.kind == "skip":
                    reason = "test_helper" if res.reason in ("local_state",) else res.reason
                    return Res.skip(reason, f"test helper {name}: {res.detail}")
                if res.kind == "project":
                    return Res.skip("project_object", f"test helper {name} uses the project's {free}")
                items += res.setup
            items.append(SetupItem.definition(self.module.rel, start, text))
        return Res("setup", setup=tuple(dict.fromkeys(items)))


def _chain(node: ast.AST) -> tuple[str, list[str]] | None:
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.insert(0, node.attr)
        node = node.value
    return (node.id, attrs) if isinstance(node, ast.Name) else None


def bound_inside(expr: ast.AST) -> set[str]:
    """Names an expression binds itself (comprehension targets, lambda parameters, walrus targets)."""
    names: set[str] = set()
    for n in ast.walk(expr):
        if isinstance(n, ast.comprehension):
            names |= {t.id for t in ast.walk(n.target) if isinstance(t, ast.Name)}
        elif isinstance(n, ast.Lambda):
            names |= {a.arg for a in ast.walk(n.args) if isinstance(a, ast.arg)}
        elif isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name):
            names.add(n.target.id)
    return names


@dataclass
class Locals:
    """Straight-line bindings of a test body: name -> value expression, or a Poison."""

    values: dict[str, ast.expr | Poison] = field(default_factory=dict)

    def copy(self) -> Locals:
        return Locals(dict(self.values))

    def poison(self, name: str, reason: str, detail: str) -> None:
        self.values[name] = Poison(reason, detail)

    def bind(self, name: str, value: ast.expr) -> None:
        sub = self.substitute(value)
        self.values[name] = sub if not isinstance(sub, Poison) else sub

    def substitute(self, expr: ast.expr) -> ast.expr | Poison:
        """``expr`` with every local replaced by its value; the first poisoned local's Poison otherwise."""
        inner = bound_inside(expr)
        found: list[Poison] = []
        values = self.values

        class Sub(ast.NodeTransformer):
            def visit_Name(self, node: ast.Name) -> ast.AST:
                if isinstance(node.ctx, ast.Load) and node.id in values and node.id not in inner:
                    value = values[node.id]
                    if isinstance(value, Poison):
                        found.append(value)
                        return node
                    return copy.deepcopy(value)
                return node

        out = Sub().visit(copy.deepcopy(expr))
        return found[0] if found else out

    def invalidate(self, stmt: ast.stmt, why: str) -> None:
        """A statement that may change the locals it touches (``x.append(1)``, ``shuffle(x)``,
        ``x[0] = 1``, ``x += [1]``): those locals are poisoned."""
        for n in ast.walk(stmt):
            if isinstance(n, ast.Name) and n.id in self.values and not isinstance(self.values[n.id], Poison):
                value = self.values[n.id]
                if isinstance(value, ast.Constant) and isinstance(n.ctx, ast.Load):
                    continue  # immutable; reading it cannot change it
                self.poison(
                    n.id,
                    "local_state",
                    f"{n.id} may be changed by the statement at line {stmt.lineno} ({why})",
                )
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                self.poison(n.id, "local_state", f"{n.id} is rebound at line {stmt.lineno} ({why})")
            elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.poison(n.name, "local_state", f"{n.name} is defined inside the test ({why})")
