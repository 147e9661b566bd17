"""Static discovery: the project's modules, what each module-level name is bound to, and the functions a
task can be made of. Everything here reads source text with ``ast`` and ``symtable``; nothing of the
project is imported or run.

A function qualifies when it is module-level (``def`` directly in a module), or a ``@staticmethod`` or
``@classmethod`` of a module-level class (such a method needs no instance; it becomes a top-level function
of the same name in its task, see :mod:`.closure`).
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import PurePosixPath

from .source import ProjectFile

__all__ = [
    "Binding",
    "Function",
    "Module",
    "ProjectIndex",
    "Ref",
    "STDLIB",
    "statement_lines",
]

STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}
SRC_DIRS = ("src", "lib")


@dataclass
class Binding:
    """What a module-level name is bound to, and the statements that bind it (in source order)."""

    name: str
    kind: str  # def | class | assign | compound | import | project
    nodes: list[ast.stmt] = field(default_factory=list)
    module: str | None = None
    """import: the dotted module the name comes from; project: the project module."""
    attr: str | None = None
    """import/project: the name imported from ``module``; None when the name is the module itself."""
    alias: ast.alias | None = None


@dataclass
class Module:
    name: str
    rel: str
    source: str
    tree: ast.Module
    is_package: bool
    bindings: dict[str, Binding] = field(default_factory=dict)
    star_modules: list[str] = field(default_factory=list)
    future_annotations: bool = False
    effects: list[ast.stmt] = field(default_factory=list)
    """Module-level calls run at import (``register(...)``, ``RULES.append(...)``): they may fill the
    module's tables, so a snippet using those tables needs them too."""

    @cached_property
    def lines(self) -> list[str]:
        return self.source.splitlines()

    @cached_property
    def exports(self) -> set[str]:
        """The names ``from module import *`` binds: ``__all__`` when it is a literal list, else the
        public names."""
        all_binding = self.bindings.get("__all__")
        if all_binding is not None:
            names: list[str] = []
            for node in all_binding.nodes:
                value = getattr(node, "value", None)
                if isinstance(value, ast.List | ast.Tuple):
                    names += [
                        e.value
                        for e in value.elts
                        if isinstance(e, ast.Constant) and isinstance(e.value, str)
                    ]
            if names:
                return set(names)
        return {n for n in self.bindings if not n.startswith("_")}


@dataclass
class Function:
    """A function a task can be made of."""

    module: Module
    qualname: str  # "f" or "Class.method"
    node: ast.FunctionDef
    cls: ast.ClassDef | None = None
    method_kind: str | None = None  # staticmethod | classmethod

    @property
    def key(self) -> str:
        return f"{self.module.name}.{self.qualname}"

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def docstring(self) -> str | None:
        return ast.get_docstring(self.node)


@dataclass(frozen=True)
class Ref:
    """A resolved project name: a module, or a module-level binding (``name``), or a method of a class
    binding (``name`` = "Class.method")."""

    module: str
    name: str | None = None

    @property
    def is_module(self) -> bool:
        return self.name is None


def statement_lines(module: Module, node: ast.stmt) -> tuple[int, int]:
    """1-based first (decorators included) and last line of a statement."""
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return start, node.end_lineno or node.lineno


def _bound_by(node: ast.stmt) -> list[tuple[str, ast.alias | None]]:
    """Names a module-level statement binds (for compound statements: at any depth outside defs)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [(node.name, None)]
    if isinstance(node, ast.Import | ast.ImportFrom):
        out = []
        for a in node.names:
            if a.name == "*":
                continue
            out.append(
                (
                    (a.asname or a.name).split(".")[0]
                    if isinstance(node, ast.Import)
                    else (a.asname or a.name),
                    a,
                )
            )
        return out
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = []
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    names.append((n.id, None))
        return names
    names = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.stmt):
            names += _bound_by(child)
        elif isinstance(child, ast.excepthandler):
            for stmt in child.body:
                names += _bound_by(stmt)
    return names


def _is_main_guard(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
    )


class ProjectIndex:
    """Every source module of the project (test files are read separately), keyed by dotted name."""

    def __init__(self) -> None:
        self.modules: dict[str, Module] = {}
        self.by_rel: dict[str, Module] = {}
        self.unparsed: dict[str, str] = {}  # rel -> reason
        self.top_level: set[str] = set()
        self.package_dirs: set[str] = set()

    # ---- building
    @staticmethod
    def module_name(rel: str, package_dirs: set[str]) -> tuple[str, bool]:
        parts = list(PurePosixPath(rel).parts)
        stem = parts[-1][:-3]
        is_package = stem == "__init__"
        dirs = parts[:-1]
        # the import root: drop leading directories that are not packages (src/, lib/, a checkout dir)
        keep: list[str] = []
        for i in range(len(dirs), 0, -1):
            if "/".join(dirs[:i]) in package_dirs:
                keep.insert(0, dirs[i - 1])
            else:
                break
        dotted = keep + ([] if is_package else [stem])
        return ".".join(dotted) or stem, is_package

    @classmethod
    def build(cls, files: list[ProjectFile], trees: dict[str, tuple[str, ast.Module]]) -> ProjectIndex:
        index = cls()
        package_dirs = {str(PurePosixPath(f.rel).parent) for f in files if f.rel.endswith("__init__.py")}
        index.package_dirs = package_dirs
        for f in files:
            if f.is_test or f.rel not in trees:
                continue
            source, tree = trees[f.rel]
            name, is_package = cls.module_name(f.rel, package_dirs)
            if name in index.modules:  # two files claim the same module name: the first (sorted) wins
                continue
            module = Module(name=name, rel=f.rel, source=source, tree=tree, is_package=is_package)
            index.modules[name] = module
            index.by_rel[f.rel] = module
        index.top_level = {n.split(".")[0] for n in index.modules}
        for module in index.modules.values():
            index._bind(module)
        return index

    def file_module(self, rel: str, source: str, tree: ast.Module) -> Module:
        """A module for a file outside the index (a test file), with its names bound."""
        name, is_package = self.module_name(rel, self.package_dirs)
        module = Module(name=name, rel=rel, source=source, tree=tree, is_package=is_package)
        self._bind(module)
        return module

    def _absolute(self, module: Module, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = module.name.split(".")
        if not module.is_package:
            base = base[:-1]
        if node.level > 1:
            base = base[: len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    def is_project(self, dotted: str) -> bool:
        return dotted.split(".")[0] in self.top_level

    def _bind(self, module: Module) -> None:
        for node in module.tree.body:
            if _is_main_guard(node):
                continue
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                if any(a.name == "annotations" for a in node.names):
                    module.future_annotations = True
                continue
            if isinstance(node, ast.Import | ast.ImportFrom):
                for b in self.import_bindings(module, node):
                    module.bindings[b.name] = b
                continue
            if isinstance(node, ast.Expr):
                if isinstance(node.value, ast.Call):
                    module.effects.append(node)
                continue
            kind = {
                ast.FunctionDef: "def",
                ast.AsyncFunctionDef: "def",
                ast.ClassDef: "class",
                ast.Assign: "assign",
                ast.AnnAssign: "assign",
                ast.AugAssign: "assign",
            }.get(type(node), "compound")
            for name, _ in _bound_by(node):
                previous = module.bindings.get(name)
                if kind == "def" or kind == "class":
                    module.bindings[name] = Binding(name, kind, [node])
                elif previous is not None and previous.kind in ("def", "class", "assign", "compound"):
                    # a later assignment (`f = wraps(f)`, `__all__ += [...]`) may use the earlier binding
                    if node not in previous.nodes:
                        previous.nodes.append(node)
                    if kind == "compound":
                        previous.kind = "compound"
                else:
                    module.bindings[name] = Binding(name, kind, [node])

    def import_bindings(self, module: Module, node: ast.Import | ast.ImportFrom) -> list[Binding]:
        """The bindings an import statement makes in ``module`` (a star import of a project module is
        recorded in ``module.star_modules`` instead)."""
        out: list[Binding] = []
        if isinstance(node, ast.ImportFrom):
            source = self._absolute(module, node)
            project = node.level > 0 or self.is_project(source)
            for a in node.names:
                if a.name == "*":
                    if project and source in self.modules and source not in module.star_modules:
                        module.star_modules.append(source)
                    continue
                bound = a.asname or a.name
                out.append(Binding(bound, "project" if project else "import", [node], source, a.name, a))
            return out
        for a in node.names:
            if a.asname:
                bound, target = a.asname, a.name
            else:
                bound = target = a.name.split(".")[0]
            out.append(
                Binding(bound, "project" if self.is_project(a.name) else "import", [node], target, None, a)
            )
        return out

    # ---- resolution
    def resolve(self, module: str, name: str, _seen: frozenset = frozenset()) -> Ref | None:
        """What ``name`` means in project module ``module``: following re-exports and star imports."""
        key = (module, name)
        if key in _seen:
            return None
        seen = _seen | {key}
        mod = self.modules.get(module)
        if mod is None:
            return None
        b = mod.bindings.get(name)
        if b is not None:
            if b.kind == "project":
                if b.attr is None:
                    return Ref(b.module) if b.module in self.modules else None
                found = self.resolve(b.module or "", b.attr, seen)
                if found is None and f"{b.module}.{b.attr}" in self.modules:
                    return Ref(f"{b.module}.{b.attr}")
                return found
            return Ref(module, name)
        for star in mod.star_modules:
            if star in self.modules and name in self.modules[star].exports:
                found = self.resolve(star, name, seen)
                if found is not None:
                    return found
        if f"{module}.{name}" in self.modules:
            return Ref(f"{module}.{name}")
        return None

    def resolve_dotted(self, dotted: str) -> Ref | None:
        """``pkg.mod.func`` or ``pkg.func`` (via re-exports) -> a Ref, attribute by attribute as Python
        looks them up: a package's own binding wins over a submodule of the same name (``from slugify
        import slugify`` is the function that ``slugify/__init__.py`` imports, not ``slugify/slugify.py``)."""
        parts = dotted.split(".")
        for i in range(1, len(parts) + 1):
            head = ".".join(parts[:i])
            if head in self.modules:
                ref: Ref | None = Ref(head)
                for attr in parts[i:]:
                    ref = self.attribute(ref, attr) if ref is not None else None
                return ref
        return None

    def attribute(self, ref: Ref, attr: str) -> Ref | None:
        if ref.is_module:
            return self.resolve(ref.module, attr)
        binding = self.binding(ref)
        if binding is not None and binding.kind == "class" and "." not in (ref.name or ""):
            return Ref(ref.module, f"{ref.name}.{attr}")
        return None

    def binding(self, ref: Ref) -> Binding | None:
        if ref.name is None:
            return None
        mod = self.modules.get(ref.module)
        return mod.bindings.get(ref.name.split(".")[0]) if mod else None

    # ---- functions
    def functions(self) -> dict[str, Function]:
        """Every qualifying function, keyed by ``module.qualname``, in module then source order."""
        out: dict[str, Function] = {}
        for mod in sorted(self.modules.values(), key=lambda m: m.rel):
            for name, b in mod.bindings.items():
                node = b.nodes[0] if b.nodes else None
                if b.kind == "def" and isinstance(node, ast.FunctionDef) and len(b.nodes) == 1:
                    out[f"{mod.name}.{name}"] = Function(mod, name, node)
                elif b.kind == "class" and isinstance(node, ast.ClassDef):
                    for item in node.body:
                        if not isinstance(item, ast.FunctionDef):
                            continue
                        kinds = [
                            d.id
                            for d in item.decorator_list
                            if isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod")
                        ]
                        if kinds:
                            qual = f"{name}.{item.name}"
                            out[f"{mod.name}.{qual}"] = Function(mod, qual, item, node, kinds[0])
        return dict(sorted(out.items(), key=lambda kv: (kv[1].module.rel, kv[1].node.lineno, kv[0])))
