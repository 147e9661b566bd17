"""A function's code with what it needs from its module: the imports, constants and same-module helpers it
uses (and, through re-exports and relative imports, definitions from other project modules), in an order
that runs as a standalone snippet in the sandbox.

Imports of the standard library are kept (only the names used); project imports are replaced by the
definitions they import; a third-party import makes the function unusable (the sandbox has only the
standard library). A ``@staticmethod`` or ``@classmethod`` (one that does not use ``cls``) becomes a
top-level function of the same name, since tasks and prompts are about a top-level function.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass

from .discover import STDLIB, Binding, Function, Module, ProjectIndex, statement_lines
from .symbols import free_names

__all__ = ["Assembled", "Unassemblable", "assemble", "MAX_CODE_LINES", "function_source"]

MAX_CODE_LINES = 300  # a longer snippet is a module, not a function a developer would retrieve


class Unassemblable(Exception):
    """The function cannot be made a standalone snippet; ``reason`` is a report key, ``detail`` says why."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass
class Assembled:
    code: str
    defined: set[str]
    """Top-level names the snippet defines (functions, classes, constants)."""
    functions: list[tuple[str, ast.FunctionDef]]
    """(module, def) of every function the snippet's function can call, the function itself last (the
    side-effect check reads them)."""


def _segment(module: Module, node: ast.stmt) -> str:
    start, end = statement_lines(module, node)
    return "\n".join(module.lines[start - 1 : end])


def function_source(fn: Function) -> str:
    """The function's own source; a method is dedented and made a top-level function (its
    ``@staticmethod``/``@classmethod`` line dropped, a classmethod's ``cls`` parameter removed)."""
    mod, node = fn.module, fn.node
    if fn.cls is None:
        return _segment(mod, node)
    others = [
        d
        for d in node.decorator_list
        if not (isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod"))
    ]
    if others:
        raise Unassemblable("method_needs_class", f"{fn.qualname} has decorators besides @{fn.method_kind}")
    lines = mod.lines[node.lineno - 1 : node.end_lineno]
    if fn.method_kind == "classmethod":
        args = node.args.posonlyargs + node.args.args
        if not args:
            raise Unassemblable("method_needs_class", f"{fn.qualname} takes no cls parameter")
        first = args[0]
        row = first.lineno - node.lineno
        line = lines[row]
        end = first.end_col_offset if first.end_lineno == first.lineno else None
        if end is None:
            raise Unassemblable("method_needs_class", f"cannot drop the cls parameter of {fn.qualname}")
        rest = line[end:]
        rest = re.sub(r"^\s*,\s*", "", rest) if re.match(r"^\s*,", rest) else rest
        if len(args) == 1 and not (node.args.vararg or node.args.kwonlyargs or node.args.kwarg):
            rest = rest.lstrip(", ")
        lines = [*lines[:row], line[: first.col_offset] + rest, *lines[row + 1 :]]
    text = textwrap.dedent("\n".join(lines))
    try:
        ast.parse(text)
    except SyntaxError as exc:
        raise Unassemblable(
            "method_needs_class", f"{fn.qualname} cannot be made top-level ({exc.msg})"
        ) from exc
    return text


def _method_uses_class(fn: Function) -> str | None:
    """Why a method cannot live outside its class: it names its class or uses ``cls``."""
    assert fn.cls is not None
    source = function_source(fn)
    names = free_names(source)
    if fn.cls.name in names:
        return f"{fn.qualname} refers to its class {fn.cls.name}"
    if fn.method_kind == "classmethod":
        inner = ast.parse(
            textwrap.dedent("\n".join(fn.module.lines[fn.node.lineno - 1 : fn.node.end_lineno]))
        )
        params = inner.body[0].args  # type: ignore[attr-defined]
        cls_name = (params.posonlyargs + params.args)[0].arg
        used = any(isinstance(n, ast.Name) and n.id == cls_name for n in ast.walk(inner.body[0]))  # type: ignore[arg-type]
        if used:
            return f"{fn.qualname} uses {cls_name}"
    return None


def _third_party(binding: Binding) -> str | None:
    top = (binding.module or "").split(".")[0]
    return None if top in STDLIB else top


class _Collector:
    def __init__(self, index: ProjectIndex, fn: Function) -> None:
        self.index = index
        self.fn = fn
        self.stmts: dict[tuple[str, int], tuple[Module, ast.stmt]] = {}  # (module, line) -> stmt
        self.imports: dict[tuple[str, int], tuple[Module, ast.stmt, list[ast.alias]]] = {}
        self.aliases: list[tuple[str, int, str, str]] = []  # (module, import line, bound name, source name)
        self.emitted: dict[str, tuple[str, str]] = {}  # name -> (module, source text)
        self.module_deps: dict[str, set[str]] = {}
        self.done: set[tuple[str, str]] = set()

    def need(self, module: Module, names: set[str]) -> None:
        for name in sorted(names):
            self._need(module, name)

    def _claim(self, name: str, module: str, text: str) -> None:
        prev = self.emitted.get(name)
        if prev is not None and prev[1] != text:
            raise Unassemblable("name_conflict", f"{name} is defined differently in {prev[0]} and {module}")
        self.emitted[name] = (module, text)

    def _need(self, module: Module, name: str) -> None:
        key = (module.name, name)
        if key in self.done:
            return
        self.done.add(key)
        b = module.bindings.get(name)
        if b is None:
            for star in module.star_modules:
                if star in self.index.modules and name in self.index.modules[star].exports:
                    self.module_deps.setdefault(module.name, set()).add(star)
                    self._need(self.index.modules[star], name)
                    return
            return  # a builtin, or a name the code never binds (verification will tell)
        if b.kind == "import":
            if (tp := _third_party(b)) is not None:
                raise Unassemblable("third_party", f"needs the third-party module {tp}")
            node = b.nodes[0]
            entry = self.imports.setdefault((module.name, node.lineno), (module, node, []))
            if b.alias is not None and b.alias not in entry[2]:
                entry[2].append(b.alias)
            self._claim(name, module.name, f"import {b.module} {b.attr}")  # `import os.path` binds os too
            return
        if b.kind == "project":
            if b.attr is None:
                raise Unassemblable(
                    "project_module_object", f"uses the project module {b.module} as an object"
                )
            ref = self.index.resolve(b.module or "", b.attr)
            if ref is None or ref.is_module or ref.name is None:
                raise Unassemblable(
                    "project_module_object", f"imports {b.attr} from {b.module}, which is not a definition"
                )
            target = self.index.modules[ref.module]
            self.module_deps.setdefault(module.name, set()).add(target.name)
            self._need(target, ref.name)
            if ref.name != name:
                self.aliases.append((module.name, b.nodes[0].lineno, name, ref.name))
                self._claim(name, module.name, f"{name} = {ref.name}")
            return
        for node in b.nodes:
            if (module.name, node.lineno) in self.stmts:
                continue
            text = _segment(module, node)
            self.stmts[(module.name, node.lineno)] = (module, node)
            for bound in _names_of(node):
                self._claim(bound, module.name, text)
            self.need(module, free_names(text))

    def import_effects(self) -> None:
        """Add the module-level calls that fill a table the snippet uses (``_irregular('person',
        'people')`` appending to ``PLURALS``), until nothing more is added."""
        from .effects import side_effect

        changed = True
        while changed:
            changed = False
            for modname in sorted({m for m, _ in self.done}):
                module = self.index.modules.get(modname)
                if module is None:
                    continue
                tables = {
                    n
                    for m, n in self.done
                    if m == modname
                    and n in module.bindings
                    and module.bindings[n].kind in ("assign", "compound")
                }
                if not tables:
                    continue
                for stmt in module.effects:
                    if (modname, stmt.lineno) in self.stmts:
                        continue
                    text = _segment(module, stmt)
                    names = free_names(text)
                    hit = bool(names & tables)
                    callee = (
                        stmt.value.func
                        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                        else None
                    )
                    if not hit and isinstance(callee, ast.Name):
                        b = module.bindings.get(callee.id)
                        node = b.nodes[0] if b is not None and b.kind == "def" and b.nodes else None
                        if isinstance(node, ast.FunctionDef):
                            effect = side_effect(module, node)
                            hit = (
                                effect is not None
                                and effect[0] == "global_state"
                                and bool(free_names(_segment(module, node)) & tables)
                            )
                    if hit:
                        self.stmts[(modname, stmt.lineno)] = (module, stmt)
                        self.need(module, names)
                        changed = True


def _names_of(node: ast.stmt) -> list[str]:
    from .discover import _bound_by

    return [n for n, _ in _bound_by(node)]


def _module_order(deps: dict[str, set[str]], modules: set[str], last: str) -> list[str]:
    """Dependencies before dependents; ties by name; the function's own module last when it can be."""
    order: list[str] = []
    visiting: set[str] = set()

    def visit(m: str) -> None:
        if m in order or m in visiting:
            return
        visiting.add(m)
        for d in sorted(deps.get(m, ())):
            visit(d)
        visiting.discard(m)
        order.append(m)

    for m in sorted(modules - {last}):
        visit(m)
    visit(last)
    return [m for m in order if m in modules]


def assemble(index: ProjectIndex, fn: Function) -> Assembled:
    """The function's standalone code, or :class:`Unassemblable`."""
    if fn.cls is not None and (why := _method_uses_class(fn)):
        raise Unassemblable("method_needs_class", why)
    own = function_source(fn)
    col = _Collector(index, fn)
    mod = fn.module
    col.done.add((mod.name, fn.qualname))
    if fn.cls is None:
        col.stmts[(mod.name, fn.node.lineno)] = (mod, fn.node)
    col._claim(fn.name, mod.name, own)
    col.need(mod, free_names(own) - {fn.name} if fn.cls is None else free_names(own))
    called = set(col.stmts)  # what the function reaches; import-time calls added next are not its effects
    col.import_effects()

    modules = {m for m, _ in col.stmts} | {m for m, _ in col.imports} | {a[0] for a in col.aliases}
    order = _module_order(col.module_deps, modules | {mod.name}, mod.name)
    rank = {m: i for i, m in enumerate(order)}

    parts: list[str] = []
    if mod.future_annotations:
        parts.append("from __future__ import annotations")
    seen_imports: set[str] = set()
    for _key, (_module, node, aliases) in sorted(
        col.imports.items(), key=lambda kv: (rank[kv[0][0]], kv[0][1])
    ):
        ordered = [a for a in node.names if a in aliases]  # type: ignore[attr-defined]
        if isinstance(node, ast.ImportFrom):
            text = ast.unparse(ast.ImportFrom(module=node.module, names=ordered, level=0))
        else:
            text = ast.unparse(ast.Import(names=ordered))
        if text not in seen_imports:
            seen_imports.add(text)
            parts.append(text)
    body: list[tuple[tuple[int, int, int], str]] = []
    functions: list[tuple[str, ast.FunctionDef]] = []
    for (m, _line), (module, node) in col.stmts.items():
        if module is mod and node is fn.node:
            continue
        body.append(((rank[m], statement_lines(module, node)[0], 1), _segment(module, node)))
        if (m, _line) in called:
            functions += [(module.name, n) for n in ast.walk(node) if isinstance(n, ast.FunctionDef)]
    for m, line, bound, source_name in col.aliases:
        # where the module imported it: module-level code after that line may use the name
        body.append(((rank[m], line, 0), f"{bound} = {source_name}"))
    functions.sort(key=lambda f: (rank[f[0]], f[1].lineno))
    functions.append((mod.name, fn.node))
    chunks = ["\n".join(parts)] if parts else []
    chunks += [text for _, text in sorted(body)] + [own]
    code = "\n\n\n".join(c.strip("\n") for c in chunks if c.strip()) + "\n"
    if code.count("\n") > MAX_CODE_LINES:
        raise Unassemblable("code_too_long", f"needs {code.count(chr(10))} lines (limit {MAX_CODE_LINES})")
    try:
        ast.parse(code)
    except SyntaxError as exc:
        raise Unassemblable("not_standalone", f"assembled code does not parse ({exc.msg})") from exc
    return Assembled(code, set(col.emitted), functions)
