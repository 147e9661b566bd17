"""Expected values: the canonical run on the generated inputs, in the sandbox.

Each call runs three times in one process and once more in another, each under a CPU guard; an input
gets an expected value only when every run returned the same value and its ``repr`` reads back equal.
The others are dropped and counted by reason (the canonical raises, runs out of time, is
nondeterministic, returns something that is not a literal, or a value too long for a readable assert).
"""

from __future__ import annotations

import ast
import hashlib
from collections import Counter
from typing import Any

from ...execution import ExecResult, Job
from .seeds import Seed

__all__ = ["canonical_jobs", "expected_asserts", "nonce_for"]

PROBE_CPU = 0.3  # CPU seconds for the canonical's three calls on one generated input
PROBES_PER_JOB = 40  # inputs per canonical job: their printed values stay under the sandbox's output limit
HASHES_PER_JOB = 150  # inputs per second-process job, which prints a short hash per input
MAX_REPR = 150  # longer expected values are dropped (an assert should stay readable)

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


# what a probe line's code says about an input it gives no value for
_DROP_REASONS = {
    "R": "canonical_raises",
    "T": "canonical_times_out",
    "N": "nondeterministic",
    "X": "not_a_literal",
    "L": "value_too_long",
}


def nonce_for(query_id: str) -> str:
    """What a task's probe lines start with, so that nothing the canonical prints passes for one."""
    return "ab" + hashlib.sha256(f"augment:{query_id}".encode()).hexdigest()[:10]


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


def canonical_jobs(code: str, setup: str, nonce: str, exprs: list[str]) -> tuple[list[Job], list[Job]]:
    """The canonical on every expression: jobs printing its values, and jobs (a second process) printing
    their hashes."""
    return (
        _probe_jobs(code, setup, nonce, exprs, "_ab_probe", PROBES_PER_JOB),
        _probe_jobs(code, setup, nonce, exprs, "_ab_hash", HASHES_PER_JOB),
    )


def expected_asserts(
    seeds: list[Seed],
    inputs: list[tuple[int, tuple, tuple]],
    exprs: list[str],
    nonce: str,
    value_results: list[ExecResult],
    hash_results: list[ExecResult],
    dropped: Counter,
) -> list[str]:
    """An assert for each input whose value both processes agree on, in input order; every other input
    is counted in ``dropped`` under the reason it has none."""
    values = _read_probes(value_results, nonce)
    hashes = _read_probes(hash_results, nonce)
    asserts: list[str] = []
    for i, expr in enumerate(exprs):
        code_, text = values.get(i, ("M", ""))
        other, digest = hashes.get(i, ("M", ""))
        if code_ != "V":
            dropped[_DROP_REASONS.get(code_, "no_result")] += 1
        elif other == "M":
            dropped["no_result"] += 1
        elif other != "V" or hashlib.sha256(text.encode()).hexdigest()[:12] != digest:
            dropped["nondeterministic"] += 1  # the second process saw another outcome
        else:
            value = ast.literal_eval(text)
            if _has_nested_float(value):
                dropped["float_in_container"] += 1
            else:
                asserts.append(seeds[inputs[i][0]].assert_for(expr, value))
    return asserts
