"""Tasks whose tests cannot tell another task's canonical from their own.

Running every canonical on every other task's asserts is quadratic, so only plausible pairs run (same
arity, argument kinds B's own asserts use, a kind of result B's own asserts expect), first on one probe
assert of A, then the pairs that pass it on all of A's asserts. Each assert runs under a CPU guard, so a
canonical that computes for ages on another task's input costs a fraction of a second. Jobs go through the
caller's job runner (the sandbox, with the execution cache).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Sequence

from ...errors import SandboxError
from ...execution import ExecResult, Job
from .tasks import TaskView, _arity, _calls

RunJobs = Callable[[list[Job]], list[ExecResult]]
# outcomes a job gets for the asserts it never reached: it hung or its process died
_PROCESS_OUTCOMES = re.compile(r"^(TIMEOUT|ERROR:(SIG\w+|Signal\d+|Exit\d+|Lost))$")


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float | complex):
        return "number"
    return type(value).__name__


def _expected_kinds(tests: Iterable[str], function: str) -> list[str | None]:
    """Per assert, the kind of value it expects from the function (None: unknown)."""
    kinds: list[str | None] = []
    for test in tests:
        kind = None
        try:
            node = ast.parse(test).body[0]
        except (SyntaxError, IndexError):
            kinds.append(None)
            continue
        if isinstance(node, ast.Assert):
            expr = node.test
            if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
                expr = expr.operand
            if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == function:
                kind = "bool"  # ``assert f(x)``: a truth value
            elif isinstance(expr, ast.Compare) and len(expr.ops) == 1:
                left, right = expr.left, expr.comparators[0]
                if not (isinstance(left, ast.Call) and getattr(left.func, "id", None) == function):
                    left, right = right, left
                if isinstance(left, ast.Call) and getattr(left.func, "id", None) == function:
                    if isinstance(expr.ops[0], ast.Is | ast.IsNot):
                        kind = "NoneType" if isinstance(right, ast.Constant) and right.value is None else None
                    elif isinstance(expr.ops[0], ast.Eq):
                        try:
                            kind = _kind(ast.literal_eval(right))
                        except (ValueError, SyntaxError, TypeError):
                            kind = None
        kinds.append(kind)
    return kinds


def _defined(code: str) -> set[str]:
    """Top-level names ``code`` binds (definitions, imports, assignments): an alias must not replace one."""
    names: set[str] = set()
    for n in ast.parse(code).body:
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(n.name)
        elif isinstance(n, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, ast.Assign | ast.AnnAssign):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            names.update(x.id for t in targets for x in ast.walk(t) if isinstance(x, ast.Name))
    return names


def _run_complete(run: RunJobs, jobs: list[Job]) -> list[list[str]]:
    """Per-assert outcomes of every job. A job that hung or died at an assert is run again from that assert
    (which then has the time limit to itself); an assert that hangs as the first of its job keeps its
    outcome and the job goes on after it."""
    outcomes: list[list[str]] = [[] for _ in jobs]
    pending = [(i, job) for i, job in enumerate(jobs)]
    while pending:
        results = run([job for _, job in pending])
        again = []
        for (i, job), res in zip(pending, results, strict=True):
            if res.infra_error or len(res.results) != len(job.tests):
                raise SandboxError(f"a job could not be executed: {res.infra_error or 'no verdicts'}")
            got = list(res.results)
            cut = len(got)
            while cut > 0 and _PROCESS_OUTCOMES.match(got[cut - 1]) and got[cut - 1] == got[-1]:
                cut -= 1
            if cut == len(got):
                outcomes[i].extend(got)
                continue
            keep = cut if cut > 0 else 1  # the job stopped at got[cut]
            outcomes[i].extend(got[:keep])
            if keep < len(got):
                again.append((i, Job(job.code, job.tests[keep:], job.timeout, job.setup)))
        pending = again
    return outcomes


# Run in a job's setup: each assert runs through ``_ab_guard``, which stops it after ``ASSERT_CPU`` seconds
# of CPU (a canonical given another task's input may compute for ages, ``nth_prime(10**6)``), so one slow
# assert costs a fraction of a second instead of the job.
ASSERT_CPU = 0.02
_GUARD = f"""
import signal as _ab_signal


def _ab_guard(_ab_test):
    def _ab_stop(*_):
        raise TimeoutError("assert took too long")

    _ab_previous = _ab_signal.signal(_ab_signal.SIGVTALRM, _ab_stop)
    _ab_signal.setitimer(_ab_signal.ITIMER_VIRTUAL, {ASSERT_CPU})
    try:
        exec(_ab_test, globals())
    finally:
        _ab_signal.setitimer(_ab_signal.ITIMER_VIRTUAL, 0)
        _ab_signal.signal(_ab_signal.SIGVTALRM, _ab_previous)
"""


def _guarded_job(code: str, tests: list[str], setup: str) -> Job:
    timeout = 2.0 + ASSERT_CPU * len(tests)
    return Job(code, tuple(f"_ab_guard({t!r})" for t in tests), timeout, f"{setup}\n{_GUARD}")


def _alias(code: str, target: str, source: str) -> str:
    return code if target == source else f"{code.rstrip()}\n\n\n{target} = {source}\n"


def _arg_class(node: ast.expr) -> str | None:
    """What kind of argument a call passes: number, sequence (str, list, tuple: duck-typed code often takes
    any), dict, set, None; None when it is not a literal."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None
    if isinstance(value, bool | int | float | complex):
        return "number"
    if isinstance(value, str | bytes | list | tuple):
        return "sequence"
    return type(value).__name__


def _signatures(t: TaskView) -> set[tuple[str | None, ...]]:
    return {tuple(_arg_class(a) for a in c.args) for test in t.tests for c in _calls(test, t.function)}


def _fits(call: tuple[str | None, ...], seen: set[tuple[str | None, ...]]) -> bool:
    return any(
        len(call) == len(s) and all(x is None or y is None or x == y for x, y in zip(call, s, strict=True))
        for s in seen
    )


def _bindings(setup: str) -> dict[str, str]:
    """Top-level name -> the statement binding it, so two setups can share a job when they agree."""
    out: dict[str, str] = {}
    for node in ast.parse(setup).body:
        text = ast.unparse(node)
        names = _defined(text) or {f"<statement {text}>"}
        out.update(dict.fromkeys(names, text))
    return out


def _setup_groups(setups: list[str]) -> list[list[int]]:
    """Indices of ``setups`` grouped so that each group's setups can run one after another in one job
    (no name bound differently by two of them)."""
    groups: list[tuple[list[int], dict[str, str]]] = []
    for i, setup in enumerate(setups):
        binds = _bindings(setup)
        for members, bound in groups:
            if all(bound.get(k, v) == v for k, v in binds.items()):
                members.append(i)
                bound.update(binds)
                break
        else:
            groups.append(([i], dict(binds)))
    return [members for members, _ in groups]


def _probe(t: TaskView) -> int | None:
    """The assert that screens candidate pairs: the longest one calling the function with positional
    arguments (the first asserts are often edge cases, ``f([]) == []``, that many tasks share)."""
    usable = [
        i for i, test in enumerate(t.tests) if (calls := _calls(test, t.function)) and not calls[0].keywords
    ]
    return max(usable, key=lambda i: (len(t.tests[i]), -i)) if usable else None


def duplicate_pairs(tasks: Sequence[TaskView], run: RunJobs) -> list[tuple[str, str]]:
    """(A, B) keys where B's canonical passes every assert of A (A != B), sorted.

    Candidate pairs: B accepts as many arguments as A's probe assert (:func:`_probe`) passes, of kinds
    (number, sequence, dict, ...) B's own asserts pass in those positions, and the probe expects a kind
    of value (bool, number, str, list, ...) B's own asserts expect from B. Candidates run on the probe;
    those that pass it run on the rest of A's asserts."""
    info = []
    for t in tasks:
        probe = _probe(t)
        kinds = _expected_kinds(t.tests, t.function)
        sig = (
            None
            if probe is None
            else tuple(_arg_class(a) for a in _calls(t.tests[probe], t.function)[0].args)
        )
        returned = {k for k in kinds if k is not None}
        expects = None if probe is None else kinds[probe]
        info.append((probe, sig, expects, _signatures(t), returned, _arity(t.code, t.function)))
    defined = [_defined(t.code) for t in tasks]

    def compatible(a: int, b: int) -> bool:
        _, sig, expects, _, _, _ = info[a]
        _, _, _, seen, returned, accepts = info[b]
        if a == b or sig is None or accepts is None or not accepts[0] <= len(sig) <= accepts[1]:
            return False
        if tasks[a].function != tasks[b].function and tasks[a].function in defined[b]:
            return False  # the alias would replace a name B's code uses
        if not _fits(sig, seen):
            return False
        return expects is None or not returned or expects in returned

    def asserts_of(a: int, probe_only: bool) -> tuple[str, ...]:
        probe = info[a][0]
        tests = tasks[a].tests
        return (tests[probe],) if probe_only else tests[:probe] + tests[probe + 1 :]

    def round_of(pairs: dict[int, list[int]], probe_only: bool) -> dict[int, list[int]]:
        """Run each B against its A's in as few jobs as their setups allow; the A's whose asserts B passes."""
        plan: list[tuple[int, list[tuple[int, int]]]] = []  # (b, [(a, asserts)])
        jobs: list[Job] = []
        for b, As in pairs.items():
            setups = sorted({tasks[a].setup for a in As})
            for group in _setup_groups(setups):
                in_group = {setups[i] for i in group}
                tests: list[str] = []
                spans = []
                code = tasks[b].code
                for a in As:
                    if tasks[a].setup in in_group:
                        chosen = asserts_of(a, probe_only)
                        tests.extend(chosen)
                        spans.append((a, len(chosen)))
                        code = _alias(code, tasks[a].function, tasks[b].function)
                setup = "\n".join(setups[i] for i in group if setups[i])
                plan.append((b, spans))
                jobs.append(_guarded_job(code, tests, setup))
        passed: dict[int, list[int]] = {}
        for (b, spans), outcomes in zip(plan, _run_complete(run, jobs), strict=True):
            pos = 0
            for a, n in spans:
                if all(o == "pass" for o in outcomes[pos : pos + n]):
                    passed.setdefault(b, []).append(a)
                pos += n
        return passed

    candidates = {b: [a for a in range(len(tasks)) if compatible(a, b)] for b in range(len(tasks))}
    survivors = round_of({b: As for b, As in candidates.items() if As}, probe_only=True)
    full = round_of(survivors, probe_only=False)
    return sorted((tasks[a].key, tasks[b].key) for b, As in full.items() for a in As)
