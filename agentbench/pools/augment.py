"""Tests that separate wrong solutions: new asserts derived from a task's own asserts (EvalPlus-style).

A pool's asserts are often too few to tell a canonical from a near-miss: ``x >= t`` and ``x > t`` agree
when no input holds an element equal to ``t``. For each task this module

1. reads the asserts of the form ``assert <expr with f(literals)> == <expected>`` (also ``assert f(..)``,
   ``assert not f(..)``, ``f(..) is True`` and ``abs(f(..) - v) < tol``) and derives new inputs from their
   literal arguments: type-aware changes of ints, floats, strings, lists, tuples and dicts (boundary values,
   sign flips, empty and one-element values, shuffles, growth, whitespace and non-ASCII characters), drawn
   from a generator seeded with the pool seed and the task's id;
2. runs the canonical on them in the sandbox, three times in one process and once more in another, each
   call under a CPU guard, and takes its output as the expected value, dropping (and counting) inputs where
   it raises, runs out of time, returns a value ``repr`` cannot round-trip, or is nondeterministic;
3. runs every single-edit mutant (:func:`~.mutate.find_mutants`) that passes all original asserts on the
   new asserts; a mutant that fails one is shown non-equivalent, and a greedy set cover keeps a few new
   asserts that kill them all.

The kept asserts go to the query's ``augmented_tests`` field, never into ``test_suite``: a run can score on
the original tests alone (``agentbench run --tests original``), and readers of the release format that do
not know the field ignore it. Every decision depends only on the pool, the seed and the verdicts, so the
same pool and seed give byte-identical output.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..execution import ExecResult, Job
from .models import Pool, Query
from .mutate import find_mutants

__all__ = [
    "AugmentReport",
    "TaskAugment",
    "Seed",
    "augment_pool",
    "generate_inputs",
    "parse_seeds",
    "DEFAULT_INPUTS",
    "DEFAULT_MAX_ADDED",
    "AUGMENT_REPORT",
]

RunJobs = Callable[[list[Job]], list[ExecResult]]

AUGMENT_REPORT = "augment_report.json"  # written beside the pool files: per-task inputs and mutation scores
DEFAULT_INPUTS = 200  # generated inputs per task
DEFAULT_MAX_ADDED = 10  # new asserts kept per task at most
MAX_MUTANTS = 80  # mutants per task tried (a seeded sample of longer lists)
PROBE_CPU = 0.3  # CPU seconds for the canonical's three calls on one generated input
ASSERT_CPU = 0.1  # CPU seconds a mutant gets per generated assert
PROBES_PER_JOB = 40  # inputs per canonical job: their printed values stay under the sandbox's output limit
HASHES_PER_JOB = 150  # inputs per second-process job, which prints a short hash per input
ORIGINAL_CPU = 0.25  # CPU seconds a mutant gets per original assert (a mutant that needs more is dropped)
MAX_REPR = 150  # longer expected values are dropped (an assert should stay readable)
MAX_CALL = 400  # longer calls are not generated
MAX_LEN = 40  # generated strings, lists and dicts grow to this length at most
_INT_LIMIT = 10**9
# characters strings gain: whitespace other than a space, punctuation, a non-ASCII letter and digit
_EXTRA_CHARS = (" ", "\t", "\n", "-", "_", ".", "0", "9", "A", "z", "é", "٣")
# outcomes that show the mutant computed something else, not that it ran out of a resource
_NO_VERDICT = re.compile(
    r"^(TIMEOUT|ERROR:(TimeoutError|MemoryError|RecursionError|Infra|Tampered|SIG\w+|Signal\d+|Exit\d+|Lost))$"
)


# --------------------------------------------------------------------------------------------- seeds


@dataclass(frozen=True)
class Seed:
    """One original assert that calls the task's function with literal arguments.

    ``subject`` is the assert's value side with the call replaced by ``_AB_CALL`` (``sorted(_AB_CALL)``);
    ``kind`` is ``eq`` (compared with ``==``) or ``close`` (``abs(... - v) < tol``, ``tol`` kept)."""

    function: str
    subject: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]
    kind: str = "eq"
    tol: str = ""
    close_op: str = "<"

    def call(self, args: tuple[Any, ...], kwargs: tuple[tuple[str, Any], ...]) -> str:
        parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs]
        return f"{self.function}({', '.join(parts)})"

    def expression(self, args: tuple[Any, ...], kwargs: tuple[tuple[str, Any], ...]) -> str:
        return self.subject.replace(_PLACEHOLDER, self.call(args, kwargs))

    def assert_for(self, expression: str, value: Any) -> str:
        if self.kind == "close":
            return f"assert abs({expression} - {value!r}) {self.close_op} {self.tol}"
        if type(value) is float:
            return f"assert abs({expression} - {value!r}) <= 1e-09 * max(1.0, abs({value!r}))"
        return f"assert {expression} == {value!r}"


_PLACEHOLDER = "_AB_CALL"


def _literal(node: ast.expr) -> tuple[bool, Any]:
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None
    return _representable(value), value


def _representable(value: Any, depth: int = 0) -> bool:
    """Values whose ``repr`` reads back equal: None, bool, int, finite float, str, and containers of them."""
    if depth > 6:
        return False
    if value is None or isinstance(value, bool | int | str):
        return True
    if isinstance(value, float):
        return value == value and abs(value) != float("inf")
    if isinstance(value, list | tuple):
        return all(_representable(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(_representable(k, depth + 1) and _representable(v, depth + 1) for k, v in value.items())
    return False


def _calls_of(node: ast.AST, function: str) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(node)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == function
    ]


def _subject(expr: ast.expr, call: ast.Call) -> str:
    """``expr`` as text with ``call`` replaced by the placeholder."""

    class _Swap(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            if node is call:
                return ast.Name(_PLACEHOLDER, ast.Load())
            return self.generic_visit(node)

    return ast.unparse(_Swap().visit(copy.copy(expr)) if expr is not call else ast.Name(_PLACEHOLDER))


def _seed_of(test: str, function: str) -> Seed | None:
    try:
        tree = ast.parse(test)
    except SyntaxError:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert):
        return None
    expr = tree.body[0].test
    calls = _calls_of(expr, function)
    if len(calls) != 1:
        return None
    call = calls[0]
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    args, kwargs = [], []
    for a in call.args:
        ok, value = _literal(a)
        if not ok:
            return None
        args.append(value)
    for k in call.keywords:
        ok, value = _literal(k.value)
        if not ok:
            return None
        kwargs.append((k.arg, value))
    subject: ast.expr | None = None
    kind, tol, close_op = "eq", "", "<"
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        expr = expr.operand
    if isinstance(expr, ast.Compare) and len(expr.ops) == 1:
        left, right, op = expr.left, expr.comparators[0], expr.ops[0]
        in_left = bool(_calls_of(left, function))
        if isinstance(op, ast.Eq | ast.Is):
            subject = left if in_left else right
        elif (
            isinstance(op, ast.Lt | ast.LtE)
            and in_left
            and isinstance(left, ast.Call)
            and isinstance(left.func, ast.Name)
            and left.func.id == "abs"
            and len(left.args) == 1
            and isinstance(left.args[0], ast.BinOp)
            and isinstance(left.args[0].op, ast.Sub)
            and _calls_of(left.args[0].left, function)
            and not _calls_of(left.args[0].right, function)
        ):
            subject, kind, tol = left.args[0].left, "close", ast.unparse(right)
            close_op = "<" if isinstance(op, ast.Lt) else "<="
    elif expr is call or not isinstance(expr, ast.Compare | ast.BoolOp):
        subject = expr
    if subject is None or len(_calls_of(subject, function)) != 1:
        return None
    return Seed(function, _subject(subject, call), tuple(args), tuple(kwargs), kind, tol, close_op)


def parse_seeds(tests: list[str], function: str) -> list[Seed]:
    """The asserts new inputs can be derived from (others, such as loops over helpers, are skipped)."""
    return [s for t in tests if (s := _seed_of(t, function)) is not None]


# --------------------------------------------------------------------------------------------- inputs


def _clip(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return max(-_INT_LIMIT, min(_INT_LIMIT, value))
    return value


def _variants(value: Any, rng: random.Random, depth: int = 0) -> list[Any]:
    """Type-aware neighbours of ``value`` (deterministic given ``rng``'s state)."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        out = [0, 1, -1, 2, value + 1, value - 1, -value, value * 2, value // 2, rng.randint(-20, 20)]
        out.append(rng.randint(0, max(10, abs(value) * 3)))
        return [_clip(v) for v in out]
    if isinstance(value, float):
        out = [0.0, 1.0, -1.0, -value, value + 1.0, value - 1.0, value * 2, value / 2, value + 0.5]
        out.append(round(rng.uniform(-2 * abs(value) - 10, 2 * abs(value) + 10), 3))
        return out
    if isinstance(value, str):
        chars = list(value)
        out = ["", value[:1], value[-1:], value[::-1], value.upper(), value.lower(), value.swapcase()]
        out += [f" {value} ", value.replace(" ", "\t"), value.replace(" ", "  "), value[: len(value) // 2]]
        if len(value) <= MAX_LEN // 2:
            out.append(value + value)
        if chars:
            shuffled = chars[:]
            rng.shuffle(shuffled)
            out.append("".join(shuffled))
            i = rng.randrange(len(chars))
            out.append(value[:i] + value[i + 1 :])
            out.append(value[:i] + value[i] + value[i:])
        i = rng.randrange(len(chars) + 1)
        out.append(value[:i] + rng.choice(_EXTRA_CHARS) + value[i:])
        return [v for v in out if len(v) <= MAX_LEN]
    if isinstance(value, list | tuple):
        items = list(value)
        out: list[list[Any]] = [[], items[:1], items[-1:], items[::-1]]
        try:
            out.append(sorted(items))
            out.append(sorted(items, reverse=True))
        except TypeError:
            pass
        if items:
            shuffled = items[:]
            rng.shuffle(shuffled)
            out.append(shuffled)
            i = rng.randrange(len(items))
            out.append(items[:i] + items[i + 1 :])
            out.append(items[:i] + [items[i]] + items[i:])
            if depth < 2:
                for _ in range(2):
                    j = rng.randrange(len(items))
                    options = _variants(items[j], rng, depth + 1)
                    if options:
                        out.append(items[:j] + [rng.choice(options)] + items[j + 1 :])
                options = _variants(rng.choice(items), rng, depth + 1)
                if options:
                    out.append(items + [rng.choice(options)])
            if len(items) <= MAX_LEN // 2:
                out.append(items + items)
        return [tuple(v) if isinstance(value, tuple) else v for v in out if len(v) <= MAX_LEN]
    if isinstance(value, dict):
        keys = list(value)
        out_d: list[dict[Any, Any]] = [{}]
        if keys:
            k = rng.choice(keys)
            out_d.append({key: v for key, v in value.items() if key != k})
            if depth < 2:
                options = _variants(value[k], rng, depth + 1)
                if options:
                    out_d.append({**value, k: rng.choice(options)})
                new_keys = [n for n in _variants(k, rng, depth + 1) if n not in value]
                if new_keys:
                    out_d.append({**value, rng.choice(new_keys): value[k]})
        return out_d
    return []


@dataclass(frozen=True)
class _Domain:
    """What the original asserts pass in one argument position: generated values stay inside it, so
    that a new assert does not test behaviour the spec leaves open (``is_prime(-7)`` or
    ``largest_prime_factor(0)`` when every example is at least 2, ``"ABC"`` when every example string is
    lower case, ``[]`` when no example is empty)."""

    lowest: float | None  # numbers at least this (the smallest example number when none is negative)
    chars: frozenset[str] | None  # None: no strings seen
    empty: bool  # an example string or container here is empty

    @classmethod
    def of(cls, values: list[Any]) -> _Domain:
        numbers: list[float] = []
        chars: set[str] = set()
        seen_str = False
        for v in values:
            for leaf in _leaves(v):
                if isinstance(leaf, bool):
                    continue
                if isinstance(leaf, int | float):
                    numbers.append(leaf)
                elif isinstance(leaf, str):
                    seen_str = True
                    chars.update(leaf)
        lowest = min(numbers) if numbers and min(numbers) >= 0 else None
        empty = any(_has_empty(v) for v in values)
        return cls(lowest, frozenset(chars) if seen_str else None, empty)

    def admits(self, value: Any) -> bool:
        if not self.empty and _has_empty(value):
            return False
        for leaf in _leaves(value):
            if isinstance(leaf, bool):
                continue
            if self.lowest is not None and isinstance(leaf, int | float) and leaf < self.lowest:
                return False
            if self.chars is not None and isinstance(leaf, str) and not set(leaf) <= self.chars:
                return False
        return True


def _has_empty(value: Any) -> bool:
    if isinstance(value, str | list | tuple | dict) and not value:
        return True
    if isinstance(value, list | tuple):
        return any(_has_empty(v) for v in value)
    if isinstance(value, dict):
        return any(_has_empty(v) for v in value.values())
    return False


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, list | tuple):
        return [leaf for v in value for leaf in _leaves(v)]
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in (*_leaves(k), *_leaves(v))]
    return [value]


def _domains(seeds: list[Seed]) -> dict[int | str, _Domain]:
    """Per argument position (index, or keyword name), the domain of the seeds' values there."""
    values: dict[int | str, list[Any]] = {}
    for s in seeds:
        for i, a in enumerate(s.args):
            values.setdefault(i, []).append(a)
        for name, v in s.kwargs:
            values.setdefault(name, []).append(v)
    return {key: _Domain.of(vs) for key, vs in values.items()}


def _type_shape(value: Any) -> str:
    return type(value).__name__


def generate_inputs(
    seeds: list[Seed], rng: random.Random, n: int, strict: bool = True
) -> list[tuple[int, tuple, tuple]]:
    """Up to ``n`` new (seed index, args, kwargs) triples, no two giving the same call, none an original.
    ``strict``: only values inside the seeds' domain of each argument (:class:`_Domain`).

    First every single-argument change of every seed (in a seeded order), then random changes of one or
    two arguments mixed with recombinations of arguments of different seeds with the same type."""
    seen = {s.call(s.args, s.kwargs) for s in seeds}
    out: list[tuple[int, tuple, tuple]] = []
    domains = _domains(seeds) if strict else {}

    def inside(args: tuple, kwargs: tuple) -> bool:
        keyed = [*enumerate(args), *kwargs]
        return all(_representable(v) and (k not in domains or domains[k].admits(v)) for k, v in keyed)

    def add(i: int, args: tuple, kwargs: tuple) -> None:
        if len(out) >= n or not inside(args, kwargs):
            return
        text = seeds[i].call(args, kwargs)
        if text in seen or len(text) > MAX_CALL:
            return
        seen.add(text)
        out.append((i, args, kwargs))

    # every argument's neighbours, computed once per seed (the random phase combines them)
    options: list[list[list[Any]]] = [
        [_variants(v, rng) for v in (*s.args, *(value for _, value in s.kwargs))] for s in seeds
    ]

    def with_value(s: Seed, pos: int, value: Any, args: tuple, kwargs: tuple) -> tuple[tuple, tuple]:
        if pos < len(args):
            return args[:pos] + (value,) + args[pos + 1 :], kwargs
        k = pos - len(args)
        return args, kwargs[:k] + ((kwargs[k][0], value),) + kwargs[k + 1 :]

    singles = [
        (i, *with_value(s, pos, v, s.args, s.kwargs))
        for i, s in enumerate(seeds)
        for pos, values in enumerate(options[i])
        for v in values
    ]
    rng.shuffle(singles)  # so that a budget smaller than the singles still covers every seed and argument
    for i, a, k in singles:
        add(i, a, k)
    attempts = 0
    while len(out) < n and attempts < 5 * n and seeds:
        attempts += 1
        i = rng.randrange(len(seeds))
        s = seeds[i]
        width = len(s.args) + len(s.kwargs)
        if width == 0:
            continue
        if width > 1 and rng.random() < 0.5:  # recombine with another seed's argument of the same type
            other = seeds[rng.randrange(len(seeds))]
            pos = rng.randrange(min(len(s.args), len(other.args))) if s.args and other.args else None
            if pos is not None and _type_shape(s.args[pos]) == _type_shape(other.args[pos]):
                add(i, *with_value(s, pos, other.args[pos], s.args, s.kwargs))
                continue
        args, kwargs = s.args, s.kwargs
        for pos in rng.sample(range(width), min(width, rng.choice((1, 2)))):
            if options[i][pos]:
                args, kwargs = with_value(s, pos, rng.choice(options[i][pos]), args, kwargs)
        add(i, args, kwargs)
    return out


# ------------------------------------------------------------------------------------- sandbox jobs

# Run in a probe job's setup: ``_ab_probe(i, thunk)`` calls the canonical three times under a CPU guard,
# with its prints swallowed, and writes one line ``<nonce> <i> <code><repr>`` on the real stdout: V (a value
# whose repr reads back equal), R (it raised), T (out of time), N (calls disagreed), X (not a literal),
# L (too long). ``_ab_hash`` writes the value's hash instead, for the second process.
_PROBE = f"""
import ast as _ab_ast
import hashlib as _ab_hashlib
import io as _ab_io
import os as _ab_os
import signal as _ab_signal
import sys as _ab_sys


def _ab_value(_ab_i, _ab_thunk):
    def _ab_stop(*_):
        raise TimeoutError("probe took too long")

    _ab_previous = _ab_signal.signal(_ab_signal.SIGVTALRM, _ab_stop)
    _ab_out = _ab_sys.stdout
    _ab_sys.stdout = _ab_io.StringIO()
    _ab_signal.setitimer(_ab_signal.ITIMER_VIRTUAL, {PROBE_CPU})
    try:
        _ab_got = [repr(_ab_thunk()) for _ in range(3)]
        _ab_last = _ab_thunk()
    except TimeoutError:
        return "T", None
    except BaseException:
        return "R", None
    finally:
        _ab_signal.setitimer(_ab_signal.ITIMER_VIRTUAL, 0)
        _ab_signal.signal(_ab_signal.SIGVTALRM, _ab_previous)
        _ab_sys.stdout = _ab_out
    if len(set(_ab_got)) > 1 or repr(_ab_last) != _ab_got[0]:
        return "N", None
    _ab_text = _ab_got[0]
    if len(_ab_text) > {MAX_REPR}:
        return "L", None
    try:
        _ab_back = _ab_ast.literal_eval(_ab_text)
    except BaseException:
        return "X", None
    if type(_ab_back) is not type(_ab_last) or repr(_ab_back) != _ab_text:
        return "X", None
    return "V", _ab_text


def _ab_emit(_ab_line):
    _ab_os.write(1, (_ab_line + "\\n").encode("utf-8", "backslashreplace"))


def _ab_probe(_ab_nonce, _ab_i, _ab_thunk):
    _ab_code, _ab_text = _ab_value(_ab_i, _ab_thunk)
    _ab_emit(f"{{_ab_nonce}} {{_ab_i}} {{_ab_code}}{{_ab_text or ''}}")


def _ab_hash(_ab_nonce, _ab_i, _ab_thunk):
    _ab_code, _ab_text = _ab_value(_ab_i, _ab_thunk)
    _ab_digest = _ab_hashlib.sha256((_ab_text or "").encode()).hexdigest()[:12]
    _ab_emit(f"{{_ab_nonce}} {{_ab_i}} {{_ab_code}}{{_ab_digest if _ab_text else ''}}")
"""

# Run in a mutant job's setup: the task's mutants, each executed in a namespace of its own (then the test
# setup in a copy of it, as the harness does), and ``_ab_check(m, test)`` running one assert against mutant
# ``m`` under a CPU guard. Many mutants share one job (one process instead of one each); one input that
# sends a mutant into a loop costs a fraction of a second, not the job.
_MULTI = """
import signal as _ab_signal


def _ab_guarded(_ab_code, _ab_scope):
    def _ab_stop(*_):
        raise TimeoutError("assert took too long")

    _ab_previous = _ab_signal.signal(_ab_signal.SIGVTALRM, _ab_stop)
    _ab_signal.setitimer(_ab_signal.ITIMER_VIRTUAL, _AB_CPU)
    try:
        exec(_ab_code, _ab_scope)
    finally:
        _ab_signal.setitimer(_ab_signal.ITIMER_VIRTUAL, 0)
        _ab_signal.signal(_ab_signal.SIGVTALRM, _ab_previous)


_ab_scopes = {}
_ab_slow = {}


def _ab_check(_ab_m, _ab_test):
    if _ab_slow.get(_ab_m, 0) >= _AB_MAX_SLOW:  # out of time often enough: no more CPU for this one
        raise TimeoutError("skipped: the mutant ran out of time before")
    try:
        _ab_run(_ab_m, _ab_test)
    except TimeoutError:
        _ab_slow[_ab_m] = _ab_slow.get(_ab_m, 0) + 1
        raise


def _ab_run(_ab_m, _ab_test):
    if _ab_m not in _ab_scopes:
        _ab_scope = {"__name__": "__main__", "__builtins__": __builtins__}
        try:
            _ab_guarded(compile(_AB_CODES[_ab_m], "<snippet>", "exec"), _ab_scope)
            if _AB_SETUP:
                _ab_scope = dict(_ab_scope)
                _ab_guarded(compile(_AB_SETUP, "<test setup>", "exec"), _ab_scope)
        except BaseException as _ab_exc:
            _ab_scope = _ab_exc
        _ab_scopes[_ab_m] = _ab_scope
    _ab_scope = _ab_scopes[_ab_m]
    if isinstance(_ab_scope, BaseException):
        raise _ab_scope
    _ab_guarded(compile(_ab_test, "<assert>", "exec"), _ab_scope)
"""
TESTS_PER_JOB = 400  # (mutant, assert) pairs per mutant job


def _mutant_jobs(
    codes: list[str], tests: list[str], setup: str, cpu: float, max_slow: int
) -> list[tuple[Job, int]]:
    """Jobs running every code on every test, several codes per job; with each job, how many codes.
    A code that ran out of its ``cpu`` on ``max_slow`` tests is not run on the rest (they count as
    timeouts: no verdict), so a mutant that loops costs a fraction of a second, not one per test."""
    per_job = max(1, TESTS_PER_JOB // max(len(tests), 1))
    jobs = []
    for start in range(0, len(codes), per_job):
        chunk = codes[start : start + per_job]
        prelude = (
            f"_AB_CODES = {chunk!r}\n_AB_SETUP = {setup!r}\n_AB_CPU = {cpu!r}\n_AB_MAX_SLOW = {max_slow}\n"
        )
        checks = tuple(f"_ab_check({m}, {t!r})" for m in range(len(chunk)) for t in tests)
        jobs.append((Job("", checks, 2.0 + cpu * len(checks), prelude + _MULTI), len(chunk)))
    return jobs


def _mutant_outcomes(jobs: list[tuple[Job, int]], results: list[ExecResult], n_tests: int) -> list[list[str]]:
    """Per code, its outcome on each test (an infrastructure error: every outcome ``ERROR:Infra``)."""
    out: list[list[str]] = []
    for (_, n_codes), r in zip(jobs, results, strict=True):
        outcomes = r.results if r.infra_error is None else ["ERROR:Infra"] * (n_codes * n_tests)
        out += [outcomes[m * n_tests : (m + 1) * n_tests] for m in range(n_codes)]
    return out


def _nonce(query: Query) -> str:
    return "ab" + hashlib.sha256(f"augment:{query.query_id}".encode()).hexdigest()[:10]


def _probe_jobs(code: str, setup: str, nonce: str, exprs: list[str], fn: str, per_job: int) -> list[Job]:
    jobs = []
    for start in range(0, len(exprs), per_job):
        chunk = exprs[start : start + per_job]
        tests = tuple(f"{fn}({nonce!r}, {start + i}, lambda: {e})" for i, e in enumerate(chunk))
        jobs.append(Job(code, tests, 2.0 + PROBE_CPU * len(chunk), f"{setup}\n{_PROBE}"))
    return jobs


def _read_probes(results: list[ExecResult], nonce: str) -> dict[int, tuple[str, str]]:
    found: dict[int, tuple[str, str]] = {}
    for r in results:
        for line in r.stdout.splitlines():
            head, _, rest = line.partition(" ")
            if head != nonce:
                continue
            idx, _, payload = rest.partition(" ")
            if idx.isdigit() and payload and int(idx) not in found:
                found[int(idx)] = (payload[0], payload[1:])
    return found


def _has_nested_float(value: Any, top: bool = True) -> bool:
    if isinstance(value, float):
        return not top
    if isinstance(value, list | tuple):
        return any(_has_nested_float(v, False) for v in value)
    if isinstance(value, dict):
        return any(_has_nested_float(k, False) or _has_nested_float(v, False) for k, v in value.items())
    return False


# --------------------------------------------------------------------------------------------- report

_DROP_REASONS = {
    "R": "canonical_raises",
    "T": "canonical_times_out",
    "N": "nondeterministic",
    "X": "not_a_literal",
    "L": "value_too_long",
}


@dataclass
class TaskAugment:
    """What augmenting one task found: inputs, dropped inputs by reason, and mutation scores."""

    query_id: str
    entry_id: str
    seeds: int = 0
    inputs: int = 0
    usable: int = 0
    dropped: Counter = field(default_factory=Counter)
    mutants: int = 0
    killed_by_original: int = 0
    survivors: int = 0
    non_equivalent: int = 0
    """Survivors that fail some generated assert (shown not equivalent to the canonical)."""
    killed_by_added: int = 0
    added: int = 0

    @property
    def known_non_equivalent(self) -> int:
        return self.killed_by_original + self.non_equivalent

    def score(self, after: bool) -> float | None:
        """Killed / non-equivalent mutants, on the original asserts or on original plus added ones."""
        if not self.known_non_equivalent:
            return None
        killed = self.killed_by_original + (self.killed_by_added if after else 0)
        return round(killed / self.known_non_equivalent, 4)

    def to_json(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id,
            "entry_id": self.entry_id,
            "seed_asserts": self.seeds,
            "inputs": self.inputs,
            "usable_inputs": self.usable,
            "dropped_inputs": dict(sorted(self.dropped.items())),
            "mutants": self.mutants,
            "killed_by_original": self.killed_by_original,
            "surviving_non_equivalent_before": self.non_equivalent,
            "surviving_non_equivalent_after": self.non_equivalent - self.killed_by_added,
            "added_asserts": self.added,
            "mutation_score_before": self.score(False),
            "mutation_score_after": self.score(True),
        }


@dataclass
class AugmentReport:
    tasks: list[TaskAugment] = field(default_factory=list)
    seed: int = 0
    inputs_per_task: int = DEFAULT_INPUTS

    def summary(self) -> dict[str, Any]:
        before = sum(t.non_equivalent for t in self.tasks)
        after = sum(t.non_equivalent - t.killed_by_added for t in self.tasks)
        known = sum(t.known_non_equivalent for t in self.tasks)
        killed_orig = sum(t.killed_by_original for t in self.tasks)
        dropped: Counter = Counter()
        for t in self.tasks:
            dropped.update(t.dropped)
        return {
            "tasks": len(self.tasks),
            "tasks_augmented": sum(1 for t in self.tasks if t.added),
            "tasks_without_seed_asserts": sum(1 for t in self.tasks if not t.seeds),
            "inputs": sum(t.inputs for t in self.tasks),
            "usable_inputs": sum(t.usable for t in self.tasks),
            "dropped_inputs": dict(sorted(dropped.items())),
            "added_asserts": sum(t.added for t in self.tasks),
            "mutants": sum(t.mutants for t in self.tasks),
            "surviving_non_equivalent_before": before,
            "surviving_non_equivalent_after": after,
            "reduction": round(1 - after / before, 4) if before else None,
            "mutation_score_before": round(killed_orig / known, 4) if known else None,
            "mutation_score_after": round((known - after) / known, 4) if known else None,
        }

    def summary_line(self) -> str:
        s = self.summary()
        red = "n/a" if s["reduction"] is None else f"{100 * s['reduction']:.0f}%"
        return (
            f"augmented {s['tasks_augmented']}/{s['tasks']} tasks with {s['added_asserts']} asserts; "
            f"surviving non-equivalent mutants {s['surviving_non_equivalent_before']} -> "
            f"{s['surviving_non_equivalent_after']} (down {red}); mutation score "
            f"{s['mutation_score_before']} -> {s['mutation_score_after']}; dropped inputs "
            f"{sum(s['dropped_inputs'].values())} ({', '.join(f'{k} {v}' for k, v in s['dropped_inputs'].items()) or 'none'})"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "inputs_per_task": self.inputs_per_task,
            "summary": self.summary(),
            "tasks": [t.to_json() for t in self.tasks],
        }


# ------------------------------------------------------------------------------------------- driver


@dataclass
class _Work:
    query: Query
    row: TaskAugment
    code: str
    setup: str
    seeds: list[Seed]
    inputs: list[tuple[int, tuple, tuple]] = field(default_factory=list)
    exprs: list[str] = field(default_factory=list)
    mutants: list[str] = field(default_factory=list)
    asserts: list[str] = field(default_factory=list)  # generated asserts, one per usable input


def _function(query: Query, code: str) -> str:
    from ..signature import function_signature

    meta = query.metadata if isinstance(query.metadata, dict) else {}
    try:
        name, _ = function_signature(code, query.test_suite)
    except Exception:  # noqa: BLE001 - a canonical without a function gets no new inputs
        return str(meta.get("function_name") or "")
    return name


def _sample_mutants(code: str, rng: random.Random) -> list[str]:
    try:
        codes = [m.code for m in find_mutants(code)]
    except SyntaxError:
        return []
    if len(codes) > MAX_MUTANTS:
        codes = sorted(rng.sample(codes, MAX_MUTANTS), key=codes.index)
    return codes


def _greedy_cover(kills: list[set[int]], limit: int) -> list[int]:
    """Indices of at most ``limit`` asserts covering as many mutants as possible (ties: lowest index)."""
    covered: set[int] = set()
    chosen: list[int] = []
    while len(chosen) < limit:
        best, gain = -1, 0
        for i, k in enumerate(kills):
            g = len(k - covered)
            if g > gain:
                best, gain = i, g
        if best < 0:
            break
        chosen.append(best)
        covered |= kills[best]
    return sorted(chosen)


def augment_pool(
    pool: Pool,
    run: RunJobs,
    *,
    seed: int = 0,
    inputs: int = DEFAULT_INPUTS,
    max_added: int = DEFAULT_MAX_ADDED,
    timeout: float = 10.0,
    strict: bool = True,
) -> tuple[Pool, AugmentReport]:
    """``pool`` with each query's ``augmented_tests`` set (replaced if it had some), and the report.

    Two rounds of sandbox jobs for the whole pool: the canonicals on the generated inputs (twice, in
    separate processes) and the mutants on the original asserts; then the canonical (as a run executes
    it) and the surviving mutants on the generated asserts. ``timeout`` bounds the canonical's job;
    ``strict=False`` also generates values outside the seeds' domain (negative numbers where every
    example is non-negative, characters no example string has)."""
    report = AugmentReport(seed=seed, inputs_per_task=inputs)
    work: list[_Work] = []
    for q in pool.queries:
        code = pool.snippet(q.correct_corpus_ids[0]).code
        row = TaskAugment(q.query_id, str(q.entry_id))
        report.tasks.append(row)
        fn = _function(q, code)
        seeds = parse_seeds(list(q.test_suite), fn) if fn else []
        row.seeds = len(seeds)
        w = _Work(q, row, code, q.test_setup or "", seeds)
        meta = q.metadata if isinstance(q.metadata, dict) else {}
        rng = random.Random(f"augment:{seed}:{meta.get('seed', 0)}:{q.query_id}")
        if seeds:
            w.inputs = generate_inputs(seeds, rng, inputs, strict)
            w.exprs = [seeds[i].expression(a, k) for i, a, k in w.inputs]
        row.inputs = len(w.inputs)
        w.mutants = _sample_mutants(code, rng) if seeds else []
        row.mutants = len(w.mutants)
        work.append(w)

    # round 1: canonical probes (two processes) and mutants on the original asserts
    jobs: list[Job] = []
    plans: list[tuple[int, int, int, list[tuple[Job, int]]]] = []
    for w in work:
        nonce = _nonce(w.query)
        begin = len(jobs)
        jobs += _probe_jobs(w.code, w.setup, nonce, w.exprs, "_ab_probe", PROBES_PER_JOB)
        middle = len(jobs)
        jobs += _probe_jobs(w.code, w.setup, nonce, w.exprs, "_ab_hash", HASHES_PER_JOB)
        mutant_jobs = _mutant_jobs(w.mutants, list(w.query.test_suite), w.setup, ORIGINAL_CPU, 1)
        plans.append((begin, middle, len(jobs), mutant_jobs))
        jobs += [j for j, _ in mutant_jobs]
    results = run(jobs) if jobs else []
    survivors: list[list[str]] = []
    for w, (begin, middle, end, mutant_jobs) in zip(work, plans, strict=True):
        nonce = _nonce(w.query)
        values = _read_probes(results[begin:middle], nonce)
        hashes = _read_probes(results[middle:end], nonce)
        for i, expr in enumerate(w.exprs):
            code_, text = values.get(i, ("M", ""))
            other, digest = hashes.get(i, ("M", ""))
            if code_ != "V":
                w.row.dropped[_DROP_REASONS.get(code_, "no_result")] += 1
            elif other == "M":
                w.row.dropped["no_result"] += 1
            elif other != "V" or hashlib.sha256(text.encode()).hexdigest()[:12] != digest:
                w.row.dropped["nondeterministic"] += 1  # the second process saw another outcome
            else:
                value = ast.literal_eval(text)
                if _has_nested_float(value):
                    w.row.dropped["float_in_container"] += 1
                else:
                    w.asserts.append(w.seeds[w.inputs[i][0]].assert_for(expr, value))
        outcomes = _mutant_outcomes(
            mutant_jobs, results[end : end + len(mutant_jobs)], len(w.query.test_suite)
        )
        alive = [m for m, o in zip(w.mutants, outcomes, strict=True) if all(r == "pass" for r in o)]
        w.row.killed_by_original = sum(1 for o in outcomes if any(_is_kill(r) for r in o))
        w.row.survivors = len(alive)
        survivors.append(alive)

    # round 2: the canonical (unguarded, as a run executes it) and the survivors on the generated asserts
    jobs = []
    plans2: list[tuple[int, list[tuple[Job, int]]]] = []
    for w, alive in zip(work, survivors, strict=True):
        begin = len(jobs)
        mutant_jobs = _mutant_jobs(alive, w.asserts, w.setup, ASSERT_CPU, 3) if w.asserts and alive else []
        if w.asserts:
            jobs.append(Job(w.code, tuple(w.asserts), timeout, w.setup))
            jobs += [j for j, _ in mutant_jobs]
        plans2.append((begin, mutant_jobs))
    results = run(jobs) if jobs else []
    out_queries: list[Query] = []
    for w, (begin, mutant_jobs) in zip(work, plans2, strict=True):
        added: list[str] = []
        if w.asserts:
            canon = results[begin]
            ok = (
                {i for i, r in enumerate(canon.results) if r == "pass"}
                if canon.infra_error is None
                else set()
            )
            if len(ok) < len(w.asserts):
                w.row.dropped["canonical_disagrees"] += len(w.asserts) - len(ok)
            w.row.usable = len(ok)
            kills: list[set[int]] = [set() for _ in w.asserts]
            part = results[begin + 1 : begin + 1 + len(mutant_jobs)]
            for m_index, outcomes in enumerate(_mutant_outcomes(mutant_jobs, part, len(w.asserts))):
                for i, outcome in enumerate(outcomes):
                    if i in ok and _is_kill(outcome):
                        kills[i].add(m_index)
            w.row.non_equivalent = len(set().union(*kills))
            chosen = _greedy_cover(kills, max_added)
            w.row.killed_by_added = len(set().union(*(kills[i] for i in chosen))) if chosen else 0
            added = [w.asserts[i] for i in chosen]
        w.row.added = len(added)
        out_queries.append(w.query.model_copy(update={"augmented_tests": added or None}))
    return pool.model_copy(update={"queries": out_queries}), report


def _is_kill(outcome: str) -> bool:
    """A wrong value or an exception: not running out of time, memory or stack, and not a process that
    died (which would take the other mutants of its job with it)."""
    return outcome != "pass" and not _NO_VERDICT.match(outcome)
