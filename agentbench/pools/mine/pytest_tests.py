"""Reading a test file: its test functions and test classes (pytest or unittest style), with
``@pytest.mark.parametrize`` tables expanded into one set of asserts per row.

A parameter that no parametrize table binds is a fixture: asserts that use it are skipped (``fixture``).
A test class whose ``setUp``/``setup_method`` (or a test whose body) calls into the project changes the
project's state, so its asserts are skipped (``global_state``).
"""

from __future__ import annotations

import ast
import itertools

from .classify import Candidate
from .discover import Function, Module, ProjectIndex
from .scope import Locals, Poison, Scope
from .testbody import BodyReader, dotted

__all__ = ["read_test_module", "MAX_ROWS"]

MAX_ROWS = 200  # parametrize rows read per test (the product of stacked tables)
SETUP_METHODS = ("setUp", "setup_method", "setUpClass", "setup_class", "setup", "setUpModule", "setup_module")


def _argnames(node: ast.expr) -> list[str] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [n.strip() for n in node.value.split(",") if n.strip()]
    if isinstance(node, ast.Tuple | ast.List) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
    ):
        return [e.value for e in node.elts]  # type: ignore[attr-defined]
    return None


def _rows(scope: Scope, node: ast.expr, names: list[str]) -> list[dict[str, ast.expr]] | Poison:
    """The rows of one parametrize table as {argname: value expression}."""
    if isinstance(node, ast.Name):  # a table defined at the test module's top level
        b = scope.module.bindings.get(node.id)
        value = (
            getattr(b.nodes[-1], "value", None)
            if b is not None and b.kind == "assign" and len(b.nodes) == 1
            else None
        )
        if value is None:
            return Poison("local_state", f"the parametrize values {node.id} are computed")
        node = value
    if not isinstance(node, ast.List | ast.Tuple):
        return Poison("local_state", f"the parametrize values are computed ({ast.unparse(node)[:60]})")
    rows: list[dict[str, ast.expr]] = []
    for elt in node.elts:
        if isinstance(elt, ast.Call) and dotted(elt.func).endswith("param"):
            if any(k.arg == "marks" for k in elt.keywords):
                continue  # skip/xfail rows
            values = list(elt.args)
        elif len(names) == 1:
            values = [elt]
        elif isinstance(elt, ast.Tuple | ast.List):
            values = list(elt.elts)
        else:
            return Poison("local_state", "a parametrize row is computed")
        if len(values) != len(names) or any(isinstance(v, ast.Starred) for v in values):
            return Poison("local_state", "a parametrize row does not match its names")
        rows.append(dict(zip(names, values, strict=True)))
    return rows


def _parametrize(scope: Scope, fn: ast.FunctionDef) -> list[dict[str, ast.expr]] | Poison:
    tables: list[list[dict[str, ast.expr]]] = []
    for dec in fn.decorator_list:
        if not isinstance(dec, ast.Call):
            continue
        name = dotted(dec.func)
        if name.endswith("usefixtures"):
            return Poison("fixture", f"uses fixtures through {name}")
        if not name.endswith("parametrize") or len(dec.args) < 2:
            continue
        names = _argnames(dec.args[0])
        if names is None:
            return Poison("local_state", "parametrize names are computed")
        rows = _rows(scope, dec.args[1], names)
        if isinstance(rows, Poison):
            return rows
        tables.append(rows)
    if not tables:
        return [{}]
    out = []
    for combo in itertools.islice(itertools.product(*tables), MAX_ROWS):
        merged: dict[str, ast.expr] = {}
        for part in combo:
            merged.update(part)
        out.append(merged)
    return out


def _blocking_setup(scope: Scope, cls: ast.ClassDef) -> Poison | None:
    """A setUp that calls into the project (activates a locale, fills a registry) changes global state."""
    for item in cls.body:
        if isinstance(item, ast.FunctionDef) and item.name in SETUP_METHODS:
            for n in ast.walk(item):
                if (
                    isinstance(n, ast.Name)
                    and isinstance(n.ctx, ast.Load)
                    and scope.lookup(n.id).kind == "project"
                ):
                    return Poison("global_state", f"{cls.name}.{item.name} calls into the project ({n.id})")
    return None


def _read_test(
    index: ProjectIndex,
    functions: dict[str, Function],
    scope: Scope,
    rel: str,
    fn: ast.FunctionDef,
    site: str,
    method: bool,
    blocked: Poison | None,
) -> list[Candidate]:
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
    if method and params:
        params = params[1:]
    rows = _parametrize(scope, fn)
    out: list[Candidate] = []
    if isinstance(rows, Poison):
        reader = BodyReader(index, functions, scope, rel, site, row=True)
        reader._skip_all(fn.body, rows.reason, rows.detail)
        return reader.out
    for row in rows:
        loc = Locals()
        for p in params:
            if p in row:
                loc.bind(p, row[p])
            else:
                loc.poison(p, "fixture", f"{p} is a fixture of {fn.name}")
        if method:
            loc.poison("self", "fixture", f"uses state {fn.name} gets from its test class")
        reader = BodyReader(index, functions, scope, rel, site, row=bool(row))
        reader.blocked = blocked
        out += reader.read(fn.body, loc)
    return out


def read_test_module(
    index: ProjectIndex, functions: dict[str, Function], module: Module
) -> tuple[list[Candidate], int]:
    """(candidates, number of test functions) of one test file."""
    scope = Scope(index, module, is_test=True)
    out: list[Candidate] = []
    tests = 0
    for node in module.tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            tests += 1
            out += _read_test(index, functions, scope, module.rel, node, node.name, False, None)
        elif isinstance(node, ast.ClassDef):
            blocked = _blocking_setup(scope, node)
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name.startswith("test"):
                    tests += 1
                    site = f"{node.name}.{item.name}"
                    out += _read_test(index, functions, scope, module.rel, item, site, True, blocked)
    return out, tests
