"""Extract the Python solution from an LLM reply.

Handles fenced blocks (```python, ```py, bare ```, ~~~, unclosed fences of a truncated reply), several
blocks (the last one defining the required function wins; helpers and imports it uses are pulled in
from the other blocks), bare code without fences mixed with prose, doctest-style ``>>>`` blocks, and
demo code (``print(...)``, ``assert``, ``if __name__ == "__main__":``) which is dropped so importing the
solution has no side effects. The result always parses; it is ``""`` when the reply has no function.
"""

from __future__ import annotations

import ast
import builtins
import re
import textwrap
from dataclasses import dataclass, field

__all__ = ["extract_code"]

_PY_LANGS = {"", "python", "py", "python3", "py3", "pycon", "ipython", "sage"}
_FENCE = re.compile(r"^[ \t]{0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w.+#-]*)[^\n`]*$")
_CODE_START = re.compile(r"^(async\s+def\s|def\s|class\s|import\s|from\s+[\w.]+\s+import\s|@\w)")
_CODE_CONT = re.compile(
    r"^(async\s+def\s|def\s|class\s|import\s|from\s+[\w.]+\s+import\s|@\w|#|if\s|elif\s|else\s*:|for\s|while\s"
    r"|try\s*:|except\b|finally\s*:|with\s|return\b|[\w.\[\], ]+\s*([-+*/|&%]?=)(?!=)|[\w.]+\(|[)\]}])"
)
_BUILTINS = frozenset(dir(builtins))


def extract_code(reply: str, function_name: str | None = None) -> str:
    """The code of ``reply`` that defines ``function_name`` (plus its helpers), or ``""``."""
    reply = reply.replace("\r\n", "\n")
    blocks = _fenced_blocks(reply)
    stages = (
        lambda: [_parseable(body) for lang, body in blocks if lang in _PY_LANGS],
        # fences not labelled as Python (```text, ```python3.11 ...) that still hold Python
        lambda: [_parseable(body) for lang, body in blocks if lang not in _PY_LANGS],
        # code outside the fences (or a reply without fences)
        lambda: _bare_regions(_outside_fences(reply) if blocks else reply),
    )
    units: list[_Unit] = []
    for stage in stages:
        units = [u for c in stage() if c is not None if (u := _Unit.of(c)).functions or u.classes]
        if units:
            break
    if not units:
        return ""
    primary = _primary(units, function_name)
    code = _with_helpers(primary, [u for u in units if u is not primary])
    return _drop_demo_code(code)


# --------------------------------------------------------------------------------------------- blocks


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """``(language, body)`` of every fenced block; an unclosed fence runs to the end of the text."""
    blocks: list[tuple[str, str]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m["fence"], m["lang"].lower()
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        blocks.append((lang, textwrap.dedent("\n".join(lines[i + 1 : j]))))
        i = j + 1
    return blocks


def _outside_fences(text: str) -> str:
    """The text with fenced blocks removed (for replies whose fences hold no usable code)."""
    out: list[str] = []
    inside: str | None = None
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if inside is None and m:
            inside = m["fence"]
        elif (
            inside is not None
            and line.strip().startswith(inside[0] * len(inside))
            and not line.strip("`~ \t")
        ):
            inside = None
        elif inside is None:
            out.append(line)
    return "\n".join(out)


def _strip_prompts(code: str) -> str:
    """Doctest / REPL transcripts: keep the ``>>>`` and ``...`` lines, drop the printed output."""
    lines = code.split("\n")
    if not any(line.lstrip().startswith(">>>") for line in lines):
        return code
    kept = []
    for line in lines:
        s = line.lstrip()
        if s.startswith(">>>") or s.startswith("..."):
            kept.append(s[4:] if len(s) > 3 and s[3] == " " else s[3:])
    return "\n".join(kept)


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def _parseable(code: str) -> str | None:
    """``code`` or the largest part of it that parses: prose lines trimmed from the start, a truncated
    tail trimmed from the end. ``None`` when nothing with content parses. Code that parses and defines
    something is kept as it is: ``>>>`` lines in its docstrings are examples, not a transcript."""
    code = code.strip("\n")
    if not code.strip():
        return None
    if _parses(code) and _has_definition(code):
        return code
    code = _strip_prompts(code).strip("\n")
    if not code.strip():
        return None
    if _parses(code):
        return code
    lines = code.split("\n")
    starts = [i for i, line in enumerate(lines) if _CODE_START.match(line)] or [0]
    for start in starts[:5]:
        for end in range(len(lines), start, -1):
            chunk = "\n".join(lines[start:end]).rstrip()
            if chunk.strip() and _parses(chunk) and _has_definition(chunk):
                return chunk
    return None


def _has_definition(code: str) -> bool:
    tree = ast.parse(code)
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) for n in tree.body)


def _bare_regions(text: str) -> list[str]:
    """Code regions in unfenced text: from a ``def``/``import``/``class`` line through indented lines and
    code-looking top-level lines, stopping at prose."""
    whole = text.strip("\n")
    if whole.strip() and _parses(whole):
        return [whole]
    regions: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if not _CODE_START.match(lines[i]):
            i += 1
            continue
        j = i + 1
        while j < len(lines):
            line = lines[j]
            if line.strip() and not line[0].isspace() and not _CODE_CONT.match(line):
                break
            j += 1
        code = _parseable("\n".join(lines[i:j]))
        if code is not None:
            regions.append(code)
        i = j
    return regions


# ------------------------------------------------------------------------------------------ selection


@dataclass
class _Unit:
    code: str
    tree: ast.Module
    functions: set[str] = field(default_factory=set)
    classes: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, code: str) -> _Unit:
        tree = ast.parse(code)
        unit = cls(code, tree)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                unit.functions.add(node.name)
            elif isinstance(node, ast.ClassDef):
                unit.classes.add(node.name)
        return unit

    @property
    def defined(self) -> set[str]:
        return set().union(*(_bound_names(n) for n in self.tree.body)) if self.tree.body else set()


def _primary(units: list[_Unit], function_name: str | None) -> _Unit:
    if function_name:
        named = [u for u in units if function_name in u.functions or function_name in u.classes]
        if named:
            return named[-1]  # a later block is usually the corrected / final version
    with_functions = [u for u in units if u.functions]
    return (with_functions or units)[-1]


def _bound_names(node: ast.stmt) -> set[str]:
    """Top-level names a statement binds."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def _used_names(nodes: list[ast.stmt]) -> set[str]:
    return {
        n.id
        for node in nodes
        for n in ast.walk(node)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }


def _segment(code: str, node: ast.stmt) -> str:
    lines = code.split("\n")
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return "\n".join(lines[first - 1 : node.end_lineno])


def _with_helpers(primary: _Unit, others: list[_Unit]) -> str:
    """Prepend the definitions and imports from other blocks that the primary block needs (transitively)."""
    have = primary.defined | _BUILTINS
    needed = _used_names(primary.tree.body) - have
    imports: list[str] = []
    helpers: list[str] = []
    seen: set[int] = set()
    while needed:
        found = False
        for unit in others:
            for node in unit.tree.body:
                bound = _bound_names(node)
                if id(node) in seen or not (bound & needed):
                    continue
                seen.add(id(node))
                found = True
                (imports if isinstance(node, ast.Import | ast.ImportFrom) else helpers).append(
                    _segment(unit.code, node)
                )
                have |= bound
                needed = (needed | (_used_names([node]) - have)) - have
        if not found:
            break
    parts = ["\n".join(imports)] if imports else []
    parts += ["\n\n".join(helpers)] if helpers else []
    parts.append(primary.code)
    code = "\n\n\n".join(parts)
    return code if _parses(code) else primary.code


def _is_main_guard(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
    )


def _calls(node: ast.AST) -> set[str]:
    return {c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}


def _drop_demo_code(code: str) -> str:
    """Remove top-level statements that only demonstrate or test the solution (prints, asserts, calls of
    the defined functions or of bare names like ``main()``, ``if __name__ == "__main__":``) unless a
    function relies on what they bind. Set-up calls on modules (``sys.setrecursionlimit(...)``) stay."""
    tree = ast.parse(code)
    defined_functions = {
        n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }
    used_by_definitions = _used_names(
        [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)]
    )
    drop: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(
            node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Import | ast.ImportFrom
        ):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # docstrings and stray string literals are harmless
        if isinstance(node, ast.AnnAssign) and node.value is None:
            drop.append(node)  # a bare annotation does nothing (and "Note: text" prose parses as one)
            continue
        demo = (
            isinstance(node, ast.Assert)
            or _is_main_guard(node)
            or bool(_calls(node) & (defined_functions | {"print", "input", "exit", "quit"}))
            or (
                isinstance(node, ast.Expr)
                and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name)
            )
        )
        if demo and not (_bound_names(node) & used_by_definitions):
            drop.append(node)
    if not drop:
        return code
    lines = code.split("\n")
    remove = {i for node in drop for i in range(node.lineno - 1, node.end_lineno or node.lineno)}
    kept = "\n".join(line for i, line in enumerate(lines) if i not in remove)
    kept = re.sub(r"\n{3,}(?=\S)", "\n\n\n", kept).strip("\n")
    return kept if _parses(kept) else code
