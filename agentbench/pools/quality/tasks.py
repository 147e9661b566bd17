"""What the quality checks need of a task, and the AST helpers they share."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ...signature import function_signature
from ..models import Pool


@dataclass(frozen=True)
class TaskView:
    """What the checks need of one task: its canonical, asserts, setup and the function the asserts call."""

    key: str  # query id
    name: str  # entry_id, for messages
    function: str
    code: str
    tests: tuple[str, ...]
    setup: str
    spec: str

    @property
    def arity(self) -> int | None:
        """Positional parameters of the function (None when it takes *args)."""
        accepts = _arity(self.code, self.function)
        return None if accepts is None or accepts[0] != accepts[1] else accepts[0]


def task_views(pool: Pool) -> list[TaskView]:
    views = []
    for q in pool.queries:
        code = pool.snippet(q.correct_corpus_ids[0]).code
        name, _ = function_signature(code, q.test_suite)
        views.append(
            TaskView(
                q.query_id, str(q.entry_id), name, code, tuple(q.test_suite), q.test_setup or "", q.spec or ""
            )
        )
    return views


# ------------------------------------------------------------------------------------------ examples


def _calls(test: str, function: str) -> list[ast.Call]:
    try:
        tree = ast.parse(test)
    except SyntaxError:
        return []
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == function
    ]


def _arity(code: str, function: str) -> tuple[int, float] | None:
    """(fewest, most) positional arguments ``function`` accepts."""
    for n in ast.parse(code).body:
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == function:
            positional = [*n.args.posonlyargs, *n.args.args]
            most = float("inf") if n.args.vararg else len(positional)
            return len(positional) - len(n.args.defaults), most
    return None
