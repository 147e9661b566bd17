"""Turning one assertion read from a test (or a doctest) into a standalone assert, or a reason it cannot be.

A kept assert calls exactly one project function, by its bare name, and uses nothing else of the project:
its other names are builtins, names bound inside the assert, or what the test setup provides (standard
library imports, self-contained helpers and constants of the test module, the ``_raises`` helper for
expected exceptions). Every reader (:mod:`.pytest_tests`, :mod:`.unittest_tests`, :mod:`.doctests`) hands
its assertions to :func:`classify`.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field

from .discover import Function, ProjectIndex, Ref
from .effects import _classify as classify_call
from .scope import RAISES_ITEM, Poison, Scope, SetupItem, bound_inside

__all__ = ["Candidate", "classify", "REASON_ORDER", "MAX_ASSERT_CHARS"]

MAX_ASSERT_CHARS = 4000
# when an assert has several problems, the one reported is the first in this order
REASON_ORDER = (
    "fixture",
    "files",
    "network",
    "global_state",
    "nondeterministic",
    "side_effects",
    "third_party",
    "test_helper",
    "local_state",
    "instance_method",
    "project_object",
    "several_functions",
    "unresolved_name",
    "no_function_call",
    "unsupported_form",
    "doctest_output",
    "too_long",
)


@dataclass
class Candidate:
    """One assertion found in a file, and what became of it."""

    rel: str
    line: int
    site: str
    """The test (or the docstring's owner) it comes from: tasks take asserts from many sites first."""
    style: str  # pytest | parametrize | unittest | doctest
    status: str = "kept"  # "kept" or a skip reason
    detail: str = ""
    function: str | None = None
    text: str | None = None
    setup: tuple[SetupItem, ...] = field(default_factory=tuple)

    def skip(self, reason: str, detail: str) -> Candidate:
        self.status, self.detail = reason, detail
        return self

    @property
    def kept(self) -> bool:
        return self.status == "kept"


def _chain(node: ast.expr) -> tuple[str, list[str]] | None:
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.insert(0, node.attr)
        node = node.value
    return (node.id, attrs) if isinstance(node, ast.Name) else None


class _Rewrite(ast.NodeTransformer):
    def __init__(
        self, index: ProjectIndex, scope: Scope, functions: dict[str, Function], inside: set[str]
    ) -> None:
        self.index, self.scope, self.functions, self.inside = index, scope, functions, inside
        self.targets: dict[str, Function] = {}
        self.problems: list[tuple[str, str]] = []
        self.setup: list[SetupItem] = []
        self.made: set[int] = set()

    def _project(self, node: ast.expr, ref: Ref, attrs: list[str], shown: str) -> ast.expr:
        for attr in attrs:
            nxt = self.index.attribute(ref, attr)
            if nxt is None:
                binding = self.index.binding(ref)
                if binding is not None and binding.kind == "class":
                    self.problems.append(("instance_method", f"{shown} needs an instance of {ref.name}"))
                elif ref.is_module:
                    self.problems.append(("unresolved_name", f"{shown}: {ref.module} has no {attr}"))
                else:
                    key = f"{ref.module}.{ref.name}"
                    what = "function" if key in self.functions else "object"
                    self.problems.append(
                        ("project_object", f"{shown} uses an attribute of the project {what} {ref.name}")
                    )
                return node
            ref = nxt
        key = f"{ref.module}.{ref.name}"
        if ref.is_module:
            self.problems.append(("project_object", f"uses the module {ref.module} as a value"))
            return node
        fn = self.functions.get(key)
        if fn is None:
            binding = self.index.binding(ref)
            if binding is not None and binding.kind == "class" and "." in (ref.name or ""):
                self.problems.append(("instance_method", f"{shown} is a method that needs an instance"))
            elif binding is not None and binding.kind == "class":
                self.problems.append(("project_object", f"builds or uses the project class {ref.name}"))
            elif binding is not None and binding.kind == "def":
                self.problems.append(
                    ("project_object", f"calls {ref.name}, which cannot be mined (async or redefined)")
                )
            else:
                self.problems.append(("project_object", f"uses the project's {ref.name}"))
            return node
        self.targets[key] = fn
        out = ast.Name(id=fn.name, ctx=ast.Load())
        self.made.add(id(out))
        return ast.copy_location(out, node)

    def _visit_chain(self, node: ast.expr) -> ast.expr:
        found = _chain(node)
        if found is None or found[0] in self.inside:
            return self.generic_visit(node)
        root, attrs = found
        shown = ".".join([root, *attrs])
        res = self.scope.lookup(root)
        if res.kind == "skip":
            self.problems.append((res.reason, res.detail))
            return node
        if res.kind == "project":
            assert res.ref is not None
            return self._project(node, res.ref, attrs, shown)
        self.setup += res.setup
        if res.qualified:
            why = classify_call(".".join([res.qualified, *attrs]))
            if why is not None:
                reason = (
                    "files"
                    if why == "side_effects"
                    and res.qualified.split(".")[0] in ("os", "shutil", "tempfile", "pathlib", "glob", "io")
                    else why
                )
                if any(
                    res.qualified.startswith(p)
                    for p in ("socket", "urllib", "http", "ftplib", "smtplib", "ssl")
                ):
                    reason = "network"
                self.problems.append((reason, f"uses {shown}"))
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if _chain(node) is not None:
            return self._visit_chain(node)
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load):
            return self._visit_chain(node)
        return node


def _called(tree: ast.AST, made: set[int]) -> bool:
    return any(isinstance(n, ast.Call) and id(n.func) in made for n in ast.walk(tree))


def _numeric(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (int, float, bool)


def _hash_ordered(node: ast.AST) -> bool:
    """A set whose iteration order changes between processes (its elements' hashes are randomized:
    strings, bytes, None, tuples of them); a set of numbers iterates the same everywhere."""
    if isinstance(node, ast.Set):
        return not all(_numeric(e) for e in node.elts)
    if isinstance(node, ast.SetComp):
        return True
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("set", "frozenset")
    ):
        if not node.args:
            return False
        arg = node.args[0]
        if isinstance(arg, ast.List | ast.Tuple):
            return not all(_numeric(e) for e in arg.elts)
        return not (isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id == "range")
    return False


def _unordered_argument(tree: ast.AST, made: set[int]) -> bool:
    """The function is given a set it may iterate: its result (a mutant's verdict) may depend on the
    process's hash seed."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and id(n.func) in made:
            if any(_hash_ordered(m) for a in [*n.args, *n.keywords] for m in ast.walk(a)):
                return True
    return False


def classify(
    cand: Candidate,
    index: ProjectIndex,
    scope: Scope,
    functions: dict[str, Function],
    expr: ast.expr | Poison | None = None,
    raises: tuple[ast.expr, ast.expr | Poison, ast.expr | None] | None = None,
) -> Candidate:
    """Fill in ``cand``: the standalone assert for ``expr`` (a boolean expression) or ``raises``
    (exception, the expression that raises, an optional message regex), or the reason it is skipped."""
    if isinstance(expr, Poison):
        return cand.skip(expr.reason, expr.detail)
    if raises is not None:
        exc, body, match = raises
        if isinstance(body, Poison):
            return cand.skip(body.reason, body.detail)
        if (
            isinstance(body, ast.Call)
            and isinstance(body.func, ast.Lambda)
            and not body.args
            and not body.keywords
        ):
            body = body.func  # assertRaises(E, f) with f a local `def f(): return ...`
        if isinstance(body, ast.Lambda) and not body.args.args:
            body = body.body
        lam = ast.Lambda(
            args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]), body=body
        )
        call_args: list[ast.expr] = [copy.deepcopy(exc), lam] + (
            [copy.deepcopy(match)] if match is not None else []
        )
        tree: ast.expr = ast.Call(func=ast.Name(id="_raises", ctx=ast.Load()), args=call_args, keywords=[])
    else:
        assert expr is not None
        tree = expr
    # a fresh tree: readers may share a node between two places (assertAlmostEqual's first argument)
    tree = ast.parse(ast.unparse(ast.fix_missing_locations(tree)), mode="eval").body
    inside = bound_inside(tree) | ({"_raises"} if raises is not None else set())
    rw = _Rewrite(index, scope, functions, inside)
    tree = rw.visit(tree)
    problems = list(rw.problems)
    if len(rw.targets) > 1:
        problems.append(
            ("several_functions", f"calls {', '.join(sorted(f.qualname for f in rw.targets.values()))}")
        )
    elif not rw.targets or not _called(tree, rw.made):
        problems.append(("no_function_call", "calls no function of the project"))
    elif _unordered_argument(tree, rw.made):
        problems.append(
            ("nondeterministic", "passes a set of strings (or None), whose order changes between runs")
        )
    if problems:
        reason, detail = min(problems, key=lambda p: REASON_ORDER.index(p[0]) if p[0] in REASON_ORDER else 99)
        return cand.skip(reason, detail)
    ast.fix_missing_locations(tree)
    text = "assert " + ast.unparse(tree)
    if len(text) > MAX_ASSERT_CHARS:
        return cand.skip("too_long", f"the assert has {len(text)} characters")
    fn = next(iter(rw.targets.values()))
    cand.function = fn.key
    cand.text = text
    setup = list(dict.fromkeys(rw.setup))
    if raises is not None:
        setup.append(RAISES_ITEM)
    cand.setup = tuple(setup)
    return cand
