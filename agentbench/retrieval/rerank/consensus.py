"""``exec-consensus``: rerank by agreement with the other candidates' behaviour, no expected outputs needed.

Inputs come from the visible asserts: the argument expressions of every call to the query's function
(never the expected values), plus type-directed variations of each literal argument (boundary integers
0, 1, -1 and the value +-1; empty, one-element, shortened and reversed strings and collections; a flipped
bool). Each candidate runs once on all inputs in the sandbox (one job, cached like any other). Its
behaviour on an input is the normalised value it returns (``==``-equal results match: ``1`` and ``1.0``,
sets in any order) or the type of exception it raises.

A candidate's score is, summed over inputs, how many other candidates behaved exactly like it; candidates
that do not define the function (another query's snippet) take no part and go last. Near-clone
distractors each deviate from the canonical on different inputs, so the canonical's behaviour is usually
the majority's and it collects the highest score. Equal scores are broken by how many distinct behaviours
a candidate shows across the inputs (more first): broken clones that return a constant or raise
everywhere agree with each other, and on the core pool this tie-break lifts exec@1 by about 0.04. Only
then does vector order decide; ``unique_winner`` counts the queries where it did not have to.

How behaviours leave the sandbox: the probe raises an exception whose *type name* is a hash of the
behaviour, and the harness reports ``ERROR:<TypeName>`` on its own result channel. Nothing is read from
the candidate's stdout, so printing cannot fake a behaviour.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Sequence

from ...execution.base import Job
from .base import Reranker, RerankInput, RerankOutcome, RerankStats, Sandbox, stable_order

__all__ = ["ConsensusReranker", "ConsensusStats", "derive_inputs", "probe_tests", "DEFAULT_MAX_INPUTS"]

DEFAULT_MAX_INPUTS = 32
PROBE_SECONDS = 2.0  # per input; a looping candidate loses that input, not the whole job

# Runs inside the sandbox, in the candidate's namespace, after the candidate's code. Standard library only.
_PRELUDE = """
def __agentbench_probe(call, _limit={limit}):
    import hashlib, itertools, signal

    def canon(v, depth=0):
        if depth > 40:
            return "..."
        if v is None or type(v) is bool:
            return repr(v)
        if isinstance(v, int) and not isinstance(v, bool):
            return "n" + repr(int(v))
        if isinstance(v, float):
            if v != v:
                return "nan"
            if v.is_integer() and abs(v) < 1e15:
                return "n" + repr(int(v))
            return "n" + format(v, ".10g")
        if isinstance(v, (str, bytes, complex)):
            return repr(v)
        if isinstance(v, list):
            return "L[" + ",".join(canon(x, depth + 1) for x in v) + "]"
        if isinstance(v, tuple):
            return "T(" + ",".join(canon(x, depth + 1) for x in v) + ")"
        if isinstance(v, (set, frozenset)):
            return "S{{" + ",".join(sorted(canon(x, depth + 1) for x in v)) + "}}"
        if isinstance(v, dict):
            items = sorted(canon(k, depth + 1) + ":" + canon(x, depth + 1) for k, x in v.items())
            return "D{{" + ",".join(items) + "}}"
        if hasattr(v, "__next__"):
            return "I" + canon(list(itertools.islice(v, 100000)), depth + 1)
        text = repr(v)
        if " at 0x" in text:
            text = ""
        return type(v).__name__ + ":" + text

    class ProbeTimeout(BaseException):
        pass

    def alarm(*_):
        raise ProbeTimeout()

    try:
        signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, _limit)
    except Exception:
        pass
    try:
        out = "value:" + canon(call())
    except ProbeTimeout:
        out = "timeout"
    except BaseException as exc:
        out = "raise:" + type(exc).__name__
    finally:
        try:
            signal.setitimer(signal.ITIMER_REAL, 0)
        except Exception:
            pass
    digest = hashlib.sha256(out.encode("utf-8", "backslashreplace")).hexdigest()[:40]
    raise type("Behaviour_" + digest, (Exception,), {{}})()

assert callable({name})
"""


# ---------------------------------------------------------------- inputs from the visible asserts

_NO_VALUE = object()
_MAX_POWER = 256


def _fold(node: ast.AST):
    """The value of a literal expression (constants, containers, +-*/ ** << on numbers), else _NO_VALUE.

    Evaluated here, in the parent, without ``eval``: only the node types below are understood."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        items = [_fold(e) for e in node.elts]
        if any(i is _NO_VALUE for i in items):
            return _NO_VALUE
        kind = {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)]
        try:
            return kind(items)
        except TypeError:  # unhashable set element
            return _NO_VALUE
    if isinstance(node, ast.Dict):
        keys = [_fold(k) if k is not None else _NO_VALUE for k in node.keys]
        values = [_fold(v) for v in node.values]
        if any(x is _NO_VALUE for x in keys + values):
            return _NO_VALUE
        try:
            return dict(zip(keys, values, strict=True))
        except TypeError:
            return _NO_VALUE
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd | ast.Invert):
        v = _fold(node.operand)
        if type(v) not in (int, float) or (isinstance(node.op, ast.Invert) and type(v) is not int):
            return _NO_VALUE
        return {ast.USub: lambda x: -x, ast.UAdd: lambda x: +x, ast.Invert: lambda x: ~x}[type(node.op)](v)
    if isinstance(node, ast.BinOp):
        a, b = _fold(node.left), _fold(node.right)
        if type(a) not in (int, float) or type(b) not in (int, float):
            return _NO_VALUE
        op = type(node.op)
        if op in (ast.Pow, ast.LShift) and (abs(b) > _MAX_POWER or b < 0 and op is ast.LShift):
            return _NO_VALUE
        ops = {
            ast.Add: lambda: a + b,
            ast.Sub: lambda: a - b,
            ast.Mult: lambda: a * b,
            ast.Div: lambda: a / b,
            ast.FloorDiv: lambda: a // b,
            ast.Mod: lambda: a % b,
            ast.Pow: lambda: a**b,
            ast.LShift: lambda: a << b,
            ast.RShift: lambda: a >> b,
            ast.BitOr: lambda: a | b,
            ast.BitAnd: lambda: a & b,
            ast.BitXor: lambda: a ^ b,
        }
        if op not in ops:
            return _NO_VALUE
        try:
            return ops[op]()
        except (ArithmeticError, TypeError, ValueError):
            return _NO_VALUE
    return _NO_VALUE


def _literal(value) -> str | None:
    """Source text for ``value`` that reads back as an equal value, or None."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, set | frozenset) and (not value or type(value) is frozenset):
        try:
            items = _literal(sorted(value))
        except TypeError:
            return None
        return f"{type(value).__name__}({items if value else ''})" if items is not None else None
    text = repr(value)
    try:
        return text if _fold(ast.parse(text, mode="eval").body) == value else None
    except (SyntaxError, RecursionError):
        return None


def variations(value) -> list:
    """Type-directed variations of one argument value (boundaries, empty and one-element collections)."""
    if value is None:
        return []
    if type(value) is bool:
        return [not value]
    if type(value) is int:
        return [0, 1, -1, value - 1, value + 1]
    if type(value) is float:
        return [0.0, -value, value + 1.0]
    if isinstance(value, str | bytes | list | tuple):
        return [value[:0], value[:1], value[:-1], value[::-1]]
    if isinstance(value, dict):
        return [{}, dict(list(value.items())[:1])]
    if isinstance(value, set | frozenset):
        try:
            first = sorted(value)[:1]
        except TypeError:
            first = []
        return [type(value)(), type(value)(first)]
    return []


def _calls(test: str, name: str) -> list[ast.Call]:
    try:
        tree = ast.parse(test)
    except SyntaxError:
        return []
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    return sorted((n for n in found if n.func.id == name), key=lambda n: (n.lineno, n.col_offset))


def _render(name: str, args: list[str], kwargs: list[tuple[str | None, str]]) -> str:
    parts = args + [f"{k}={v}" if k is not None else f"**{v}" for k, v in kwargs]
    return f"{name}({', '.join(parts)})"


def _varied(
    name: str, args: list[str], kwargs: list[tuple[str | None, str]], call: ast.Call
) -> list[list[str]]:
    """One list of varied calls per literal argument of ``call``."""
    groups = []
    for i, arg in enumerate(call.args):
        value = _fold(arg)
        if value is not _NO_VALUE:
            texts = [t for t in map(_literal, variations(value)) if t]
            groups.append([_render(name, args[:i] + [t] + args[i + 1 :], kwargs) for t in texts])
    for j, kw in enumerate(call.keywords):
        value = _fold(kw.value) if kw.arg is not None else _NO_VALUE
        if value is not _NO_VALUE:
            texts = [t for t in map(_literal, variations(value)) if t]
            groups.append([_render(name, args, kwargs[:j] + [(kw.arg, t)] + kwargs[j + 1 :]) for t in texts])
    return groups


def derive_inputs(tests: Sequence[str], name: str, max_inputs: int = DEFAULT_MAX_INPUTS) -> list[str]:
    """Call expressions (``name(...)`` source text) to run every candidate on; never an expected value.

    The asserts' own calls come first, then the variations, one from each (call, argument) in turn, so a
    cap keeps variations of every argument rather than all of the first one's."""
    base: list[str] = []
    groups: list[list[str]] = []
    for test in tests:
        for call in _calls(test, name):
            args = [ast.get_source_segment(test, a) or ast.unparse(a) for a in call.args]
            kwargs = [
                (kw.arg, ast.get_source_segment(test, kw.value) or ast.unparse(kw.value))
                for kw in call.keywords
            ]
            base.append(_render(name, args, kwargs))
            if not any(isinstance(a, ast.Starred) for a in call.args):
                groups += _varied(name, args, kwargs, call)
    ordered = list(base)
    depth = max((len(g) for g in groups), default=0)
    ordered += [g[i] for i in range(depth) for g in groups if i < len(g)]
    return list(dict.fromkeys(ordered))[:max_inputs]


def probe_tests(inputs: Sequence[str], name: str) -> tuple[str, ...]:
    """The job's "asserts": a prelude checking ``name`` is defined, then one probe per input."""
    prelude = _PRELUDE.format(limit=PROBE_SECONDS, name=name)
    return (prelude, *(f"__agentbench_probe(lambda: {call})" for call in inputs))


# ---------------------------------------------------------------- scoring


def consensus_scores(behaviours: Sequence[Sequence[str] | None]) -> list[int]:
    """Per candidate, summed over inputs: how many other candidates behaved the same (-1: no part)."""
    valid = [b for b in behaviours if b is not None]
    n_inputs = min((len(b) for b in valid), default=0)
    counts = [Counter(b[i] for b in valid) for i in range(n_inputs)]
    return [-1 if b is None else sum(counts[i][b[i]] - 1 for i in range(n_inputs)) for b in behaviours]


class ConsensusStats(RerankStats):
    """``exec-consensus``'s statistics over all queries."""

    inputs_total: int
    """Inputs every candidate ran on, summed over queries."""
    inputs_mean: float
    """Inputs per query (2 decimals)."""
    queries_without_inputs: int
    """Queries with no input to run (no visible call to the function): vector order kept."""
    unique_winner: int
    """Queries whose winner was decided by agreement and behaviour diversity, not by vector order."""
    unique_winner_share: float | None
    """``unique_winner`` over the queries (4 decimals); None without queries."""
    tie_broken_by_diversity: int
    """Queries where candidates tied on agreement and the number of distinct behaviours decided."""
    candidates_defining_function_mean: float
    """Candidates per query that define the function the asserts call (2 decimals)."""


class ConsensusReranker(Reranker):
    """``exec-consensus``: see the module docstring."""

    name = "exec-consensus"
    form = "exec-consensus"
    stats_model = ConsensusStats

    def __init__(self, max_inputs: int = DEFAULT_MAX_INPUTS) -> None:
        self.max_inputs = max_inputs

    def rerank(self, inputs: Sequence[RerankInput], sandbox: Sandbox) -> list[RerankOutcome]:
        plans = []
        jobs = []
        for inp in inputs:
            calls = (
                derive_inputs(inp.visible_tests, inp.function_name, self.max_inputs)
                if inp.function_name
                else []
            )
            plans.append(calls)
            if calls:
                tests = probe_tests(calls, inp.function_name)
                jobs += [Job(c.code, tests, sandbox.timeout, inp.test_setup) for c in inp.candidates]
        results = iter(sandbox.run(jobs, "reranking by consensus"))
        outcomes = []
        for inp, calls in zip(inputs, plans, strict=True):
            n = len(inp.candidates)
            if not calls:
                outcomes.append(
                    RerankOutcome(list(range(n)), {"inputs": 0, "scores": [], "unique_winner": False})
                )
                continue
            behaviours = []
            for _ in range(n):
                verdicts = next(results).results
                behaviours.append(verdicts[1:] if verdicts and verdicts[0] == "pass" else None)
            scores = consensus_scores(behaviours)
            distinct = [len(set(b)) if b is not None else 0 for b in behaviours]
            keys = [(-s, -d) for s, d in zip(scores, distinct, strict=True)]
            order = stable_order(keys)
            outcomes.append(
                RerankOutcome(
                    order,
                    {
                        "inputs": len(calls),
                        "scores": scores,
                        "distinct_behaviours": distinct,
                        "defines_function": sum(b is not None for b in behaviours),
                        "unique_winner": scores[order[0]] >= 0 and keys.count(keys[order[0]]) == 1,
                        "tie_broken_by_diversity": scores.count(scores[order[0]]) > 1
                        and keys.count(keys[order[0]]) == 1,
                    },
                )
            )
        return outcomes

    def summarize(self, outcomes: Sequence[RerankOutcome]) -> ConsensusStats:
        used = [o.details["inputs"] for o in outcomes]
        unique = sum(o.details["unique_winner"] for o in outcomes)
        return ConsensusStats(
            inputs_total=sum(used),
            inputs_mean=round(sum(used) / len(used), 2) if used else 0.0,
            queries_without_inputs=sum(u == 0 for u in used),
            unique_winner=unique,
            unique_winner_share=round(unique / len(outcomes), 4) if outcomes else None,
            tie_broken_by_diversity=sum(o.details.get("tie_broken_by_diversity", False) for o in outcomes),
            candidates_defining_function_mean=round(
                sum(o.details.get("defines_function", 0) for o in outcomes) / len(outcomes), 2
            )
            if outcomes
            else 0.0,
        )
