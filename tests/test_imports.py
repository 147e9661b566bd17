"""agentbench's import graph has no circles and no upward imports (issue 16).

The graph is read from the source with :mod:`ast`, not by importing anything: every ``import`` and
``from ... import`` in a module counts, including those inside functions (a function-local import still
makes a circle; it only hides it until the function runs), except those under ``if TYPE_CHECKING:``.
Relative imports are resolved, and a name taken from a package (``from ..pools import Pool``) is an edge
to the submodule that defines it, followed through the package's ``from .x import Name`` re-exports and
its PEP 562 lazy table (``lazy_exports(__name__, {...})``). Importing a submodule is not counted as
importing its parent package (every package with an eager ``__init__`` would otherwise be a circle).

Layers, top to bottom (a module may import its own layer and the layers below it, never one above)::

    cli (and agentbench/__init__, __main__, the pytest plugin) -> api -> analysis -> pipeline -> retrieval
        -> pools | agent -> llm | execution -> base modules

Layers separated by ``|`` sit side by side and must not import each other: pools and agent (the task
data and the code generator over it), llm and execution (the two services below: LLM transport and the
sandbox, each usable without the other). Base modules are the plain modules directly under
``agentbench/`` (errors, files, progress, _lazy, _env, plugins, ...). A new subpackage must be given a
layer in :data:`LAYER_ROOTS`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "agentbench"

# Tiers top to bottom; the layers of one tier sit side by side and must not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli",),
    ("api",),
    ("analysis",),
    ("pipeline",),
    ("retrieval",),
    ("pools", "agent"),
    ("llm", "execution"),
    ("base",),
)
# Which modules belong to a layer: the module itself and everything under it (for ``agentbench`` itself,
# the top-level package's ``__init__``, only the module).
LAYER_ROOTS: dict[str, tuple[str, ...]] = {
    "cli": ("agentbench", "agentbench.__main__", "agentbench.cli", "agentbench.pytest_plugin"),
    "api": ("agentbench.api", "agentbench.schemas"),
    "analysis": ("agentbench.analysis",),
    "pipeline": ("agentbench.pipeline",),
    "retrieval": ("agentbench.retrieval",),
    "pools": ("agentbench.pools",),
    "agent": ("agentbench.agent",),
    "llm": ("agentbench.llm",),
    "execution": ("agentbench.execution",),
}

# Known circles, each a chain (every module imports the next, the last the first), with the reason it
# still exists. Keep this empty: test_allowlists_are_not_stale fails as soon as a listed circle is gone.
ALLOWED_CYCLES: dict[tuple[str, ...], str] = {}

# Known upward (or side-by-side: pools <-> agent, llm <-> execution) imports, importer -> imported, with
# the reason they still exist.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {}


# --- building the graph -------------------------------------------------------------------------------


def discover(package_dir: Path = PACKAGE_DIR) -> dict[str, Path]:
    """Module name -> source file, for the package and every subpackage (directories with __init__.py)."""
    root = package_dir.name
    modules: dict[str, Path] = {}

    def walk(directory: Path, prefix: str) -> None:
        for path in sorted(directory.iterdir()):
            if path.is_dir() and (path / "__init__.py").is_file():
                walk(path, f"{prefix}.{path.name}")
            elif path.suffix == ".py":
                modules[prefix if path.stem == "__init__" else f"{prefix}.{path.stem}"] = path

    walk(package_dir, root)
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST) -> Iterable[ast.Import | ast.ImportFrom]:
    """Every import statement anywhere in ``tree`` except inside ``if TYPE_CHECKING:`` bodies."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _base_package(module: str, is_package: bool, level: int) -> str:
    """The package a ``level``-dots relative import in ``module`` starts from."""
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    return ".".join(parts[: len(parts) - (level - 1)] if level > 1 else parts)


class _Package:
    """What a package's ``__init__`` binds at import time and what its lazy table promises."""

    def __init__(self, name: str, tree: ast.Module) -> None:
        self.reexports: dict[str, tuple[str, str]] = {}  # name -> (source module, name there)
        self.lazy: dict[str, str] = {}  # name -> module (absolute)
        dicts: dict[str, ast.Dict] = {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                source = _from_target(name, True, node)
                for alias in node.names:
                    self.reexports[alias.asname or alias.name] = (source, alias.name)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        dicts[target.id] = node.value
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None)) == "lazy_exports"
                and len(node.args) == 2
                and isinstance(node.args[1], ast.Name)
                and node.args[1].id in dicts
            ):
                table = dicts[node.args[1].id]
                for key, value in zip(table.keys, table.values, strict=True):
                    if isinstance(key, ast.Constant) and isinstance(value, ast.Constant):
                        self.lazy[key.value] = f"{name}.{value.value}"


def _from_target(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = _base_package(module, is_package, node.level)
    return f"{base}.{node.module}" if node.module else base


def import_graph(package_dir: Path = PACKAGE_DIR) -> dict[str, set[str]]:
    """Module -> the package modules it imports (see the module docstring for what counts)."""
    modules = discover(package_dir)
    root = package_dir.name
    trees = {name: ast.parse(path.read_text(encoding="utf-8"), str(path)) for name, path in modules.items()}
    packages = {
        name: _Package(name, tree) for name, tree in trees.items() if modules[name].name == "__init__.py"
    }

    def resolve(module: str, name: str, seen: frozenset[str] = frozenset()) -> str:
        """The module that defines ``name`` as seen from ``module`` (``from module import name``)."""
        if f"{module}.{name}" in modules:
            return f"{module}.{name}"
        package = packages.get(module)
        if package is None or module in seen:
            return module
        seen = seen | {module}
        if name in package.lazy and package.lazy[name] in modules:
            return resolve(package.lazy[name], name, seen)
        if name in package.reexports:
            source, original = package.reexports[name]
            if source in modules:
                return resolve(source, original, seen)
        return module

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, tree in trees.items():
        is_package = name in packages
        for node in _runtime_imports(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                source = _from_target(name, is_package, node)
                if source != root and not source.startswith(root + "."):
                    continue
                targets = [resolve(source, alias.name) for alias in node.names if alias.name != "*"]
                if any(alias.name == "*" for alias in node.names):
                    targets.append(source)
            for target in targets:
                while target not in modules and "." in target:  # import a.b.c -> the longest known module
                    target = target.rsplit(".", 1)[0]
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


# --- cycles -------------------------------------------------------------------------------------------


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph.get(node, ()):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            out.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def find_cycles(graph: Mapping[str, Iterable[str]], limit: int = 500) -> list[tuple[str, ...]]:
    """Every elementary circle as a chain (each module imports the next, the last imports the first),
    starting at its smallest module; sorted. At most ``limit`` per strongly connected component."""
    cycles: list[tuple[str, ...]] = []
    for component in strongly_connected(graph):
        found = 0
        for start in sorted(component):
            allowed = {n for n in component if n >= start}
            path = [start]
            iters = [iter(sorted(s for s in graph.get(start, ()) if s in allowed))]
            while iters and found < limit:
                succ = next(iters[-1], None)
                if succ is None:
                    iters.pop()
                    path.pop()
                elif succ == start:
                    cycles.append(tuple(path))
                    found += 1
                elif succ not in path:
                    path.append(succ)
                    iters.append(iter(sorted(s for s in graph.get(succ, ()) if s in allowed)))
    return sorted(cycles)


def chain(cycle: tuple[str, ...]) -> str:
    return " -> ".join((*cycle, cycle[0]))


# --- layers -------------------------------------------------------------------------------------------


def layer_of(module: str) -> str | None:
    """The layer of ``module``; None for a subpackage that has not been given one."""
    best: tuple[int, str] | None = None
    for layer, roots in LAYER_ROOTS.items():
        for root in roots:
            under = "." in root and module.startswith(root + ".")
            if (module == root or under) and (best is None or len(root) > best[0]):
                best = (len(root), layer)
    if best is not None:
        return best[1]
    return "base" if module.count(".") == 1 else None


def _tier(layer: str) -> int:
    return next(i for i, tier in enumerate(LAYERS) if layer in tier)


def upward_edges(graph: Mapping[str, Iterable[str]]) -> list[tuple[str, str]]:
    """Imports of a layer above the importer's, or of a side-by-side layer (pools <-> agent, llm <->
    execution)."""
    out = []
    for source in sorted(graph):
        for target in sorted(graph[source]):
            a, b = layer_of(source), layer_of(target)
            if a is None or b is None or a == b:
                continue
            if _tier(b) <= _tier(a):
                out.append((source, target))
    return out


# --- the tests ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_every_module_has_a_layer(graph: dict[str, set[str]]) -> None:
    missing = sorted(m for m in graph if layer_of(m) is None)
    assert not missing, f"give these modules a layer in LAYER_ROOTS of tests/test_imports.py: {missing}"


def test_no_import_cycles(graph: dict[str, set[str]]) -> None:
    new = [c for c in find_cycles(graph) if c not in ALLOWED_CYCLES]
    assert not new, "import circles (each module imports the next):\n" + "\n".join(map(chain, new))


def test_no_upward_imports(graph: dict[str, set[str]]) -> None:
    new = [e for e in upward_edges(graph) if e not in ALLOWED_UPWARD]
    assert not new, "imports of a higher (or side-by-side) layer:\n" + "\n".join(
        f"{a} ({layer_of(a)}) -> {b} ({layer_of(b)})" for a, b in new
    )


def test_allowlists_are_not_stale(graph: dict[str, set[str]]) -> None:
    cycles = set(find_cycles(graph))
    gone_cycles = [c for c in ALLOWED_CYCLES if c not in cycles]
    upward = set(upward_edges(graph))
    gone_edges = [e for e in ALLOWED_UPWARD if e not in upward]
    assert not gone_cycles and not gone_edges, (
        "fixed, so delete from the allowlists in tests/test_imports.py:\n"
        + "\n".join([*map(chain, gone_cycles), *(f"{a} -> {b}" for a, b in gone_edges)])
    )


def test_cycle_finder_on_a_synthetic_graph() -> None:
    graph = {
        "a": {"b"},
        "b": {"c", "d"},
        "c": {"a"},  # a -> b -> c -> a
        "d": {"b", "e"},  # b -> d -> b
        "e": set(),
        "f": {"f"},  # a module importing itself
        "g": {"e"},
    }
    assert find_cycles(graph) == [("a", "b", "c"), ("b", "d"), ("f",)]
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert chain(("a", "b", "c")) == "a -> b -> c -> a"


def test_graph_builder_on_a_synthetic_package(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    for sub in ("", "low", "high"):
        (pkg / sub).mkdir(exist_ok=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "errors.py").write_text("class E(Exception): ...\n")
    (pkg / "low" / "__init__.py").write_text(
        "from .._lazy import lazy_exports\n"
        "from .models import Thing\n"
        "_LAZY = {'Heavy': 'heavy'}\n"
        "__getattr__, __dir__ = lazy_exports(__name__, _LAZY)\n"
    )
    (pkg / "_lazy.py").write_text("def lazy_exports(name, table): ...\n")
    (pkg / "low" / "models.py").write_text("from ..errors import E\nclass Thing: ...\n")
    (pkg / "low" / "heavy.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ..high.top import Top\n"
        "def f():\n    from ..high import top  # function-local: still an edge\n"
    )
    (pkg / "high" / "top.py").write_text(
        "import pkg.errors\nfrom ..low import Thing, Heavy\nfrom . import other\n"
    )
    (pkg / "high" / "other.py").write_text("")
    graph = import_graph(pkg)
    assert graph["pkg.low"] == {"pkg._lazy", "pkg.low.models"}  # the lazy table is not an import
    assert graph["pkg.low.models"] == {"pkg.errors"}
    assert graph["pkg.low.heavy"] == {"pkg.high.top"}  # from the function, not from TYPE_CHECKING
    assert graph["pkg.high.top"] == {"pkg.errors", "pkg.low.models", "pkg.low.heavy", "pkg.high.other"}
    assert find_cycles(graph) == [("pkg.high.top", "pkg.low.heavy")]
