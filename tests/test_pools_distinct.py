"""Distinct, plausible distractors: no no-op edits, no impossible comparisons, no two distractors of a
query that behave the same on every assert, rejections by reason in ``pool stats``; and the bundled
pools hold no behaviour-identical distractor pair."""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from pathlib import Path

import pytest

from agentbench.execution import Job, ProcessExecutor, make_executor
from agentbench.execution.cache import ExecCache, run_cached
from agentbench.pools import build_pool, find_mutants, load_pool, read_sources
from agentbench.pools.build import BUILD_REPORT_FILE, probe_fingerprint, probe_job

from .conftest import run_cli

# `x < 0` and `not x > 0` differ only on zeros, which no assert passes: the same behaviour on every assert.
TWINS = {
    "id": "count_positive",
    "query": "how many numbers in a list are positive",
    "code": (
        "def count_positive(xs):\n"
        "    n = 0\n"
        "    for x in xs:\n"
        "        if x > 0:\n"
        "            n += 1\n"
        "    return n\n"
    ),
    "tests": [
        "assert count_positive([]) == 0",
        "assert count_positive([1, -1, 2]) == 2",
        "assert count_positive([-3]) == 0",
        "assert count_positive([5, 7]) == 2",
        "assert count_positive([-1, -2, 4]) == 1",
        "assert count_positive([10, -10, 10, -10, 10]) == 3",
    ],
}
# A length guard (`len(xs) == 0` -> `len(xs) == -1` never fires) and constants next to operators (`- 1`
# -> `- 0`, `* 2` -> `* 1` leave a no-op).
GUARDED = {
    "id": "last_doubled",
    "query": "twice the last element of a list, 0 for an empty list",
    "code": (
        "def last_doubled(xs):\n    if len(xs) == 0:\n        return 0\n    return xs[len(xs) - 1] * 2\n"
    ),
    "tests": [
        "assert last_doubled([]) == 0",
        "assert last_doubled([1]) == 2",
        "assert last_doubled([1, 2]) == 4",
        "assert last_doubled([3, 2, 5]) == 10",
        "assert last_doubled([-4]) == -8",
        "assert last_doubled([0, 0, 7]) == 14",
    ],
}


def _codes(pool) -> set[str]:
    return {s.code for s in pool.corpus if s.label == "incorrect"}


def test_no_op_edits_are_crude() -> None:
    by_line = {m.line_after.strip(): m.crude for m in find_mutants(GUARDED["code"])}
    assert by_line["return xs[len(xs) - 0] * 2"] == "no_op"
    assert by_line["return xs[len(xs) - 1] * 1"] == "no_op"
    assert by_line["return xs[len(xs) - 1] * 3"] is None  # a real change stays
    code = "def f(n):\n    total = 1\n    total += n ** 2\n    return -1 if n else total\n"
    crude = {m.line_after.strip(): m.crude for m in find_mutants(code)}
    assert crude["total += n ** 1"] == "no_op"
    assert crude["return -0 if n else total"] == "no_op"
    assert crude["total = 0"] is None
    # a canonical that already holds a no-op does not make every mutant crude
    kept = {m.crude for m in find_mutants("def f(x):\n    return x * 1 + 2\n") if "+ 3" in m.line_after}
    assert kept == {None}


def test_impossible_length_and_count_comparisons_are_crude() -> None:
    by_line = {m.line_after.strip(): m.crude for m in find_mutants(GUARDED["code"])}
    assert by_line["if len(xs) == -1:"] == "impossible_comparison"
    assert by_line["if len(xs) == 1:"] is None
    code = "def f(xs, k):\n    n = len(xs)\n    if n < 1 or abs(k) > 0:\n        return 0\n    return n + k\n"
    crude = {m.line_after.strip(): m.crude for m in find_mutants(code)}
    assert crude["if n < 0 or abs(k) > 0:"] == "impossible_comparison"  # a count below zero
    assert crude["if n < 1 or abs(k) > -1:"] == "impossible_comparison"
    assert crude["if n < 1 or abs(k) >= 0:"] == "impossible_comparison"  # always true
    assert crude["if n < 2 or abs(k) > 0:"] is None
    # a parameter may be negative: comparing it with -1 is a real edit
    param = {m.line_after.strip(): m.crude for m in find_mutants("def f(n):\n    return n == 0\n")}
    assert param["return n == -1"] is None


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    src = tmp_path_factory.mktemp("distinct") / "tasks.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in (TWINS, GUARDED)))
    with ProcessExecutor() as ex:
        pool, report = build_pool(read_sources(src), ex.run, seed=1, timeout=2)
    return src, pool, report


def test_build_rejects_no_ops_and_impossible_guards(built) -> None:
    _, pool, report = built
    assert report.rejects["no_op"] >= 2
    assert report.rejects["impossible_comparison"] >= 1
    codes = "\n".join(_codes(pool))
    assert "- 0]" not in codes and "* 1\n" not in codes and "== -1" not in codes


def test_behaviour_identical_mutants_keep_one(built) -> None:
    _, pool, report = built
    twins = {"        if x < 0:\n", "        if not x > 0:\n"}
    candidates = [m for m in find_mutants(TWINS["code"]) if m.line_after + "\n" in twins]
    assert len(candidates) == 2
    kept = [c for c in candidates if c.code in _codes(pool)]
    assert len(kept) == 1
    assert report.rejects["duplicate_behaviour"] >= 1


def test_probe_tells_values_apart_where_verdicts_agree() -> None:
    tests = ["assert f(1) == 3", "assert f(2) == 2"]
    codes = {
        "one": "def f(x):\n    return 1 if x == 1 else x\n",
        "one_again": "def f(x):\n    return x if x != 1 else 1\n",
        "five": "def f(x):\n    return 5 if x == 1 else x\n",
        "raises": "def f(x):\n    if x == 1:\n        raise ValueError\n    return x\n",
        "raises_other": "def f(x):\n    if x == 1:\n        raise KeyError(x)\n    return x\n",
        "set_order": "def f(x):\n    return {'b', 'a'} if x == 1 else x\n",
        "set_order_2": "def f(x):\n    return {'a', 'b'} if x == 1 else x\n",
    }
    with ProcessExecutor() as ex:
        verdicts = ex.run([Job(c, tuple(tests), 2) for c in codes.values()])
        probes = ex.run([probe_job(tests, None, c, 2) for c in codes.values()])
    # the plain verdicts cannot tell "one" from "five" (both FAIL then pass)
    assert verdicts[0].results == verdicts[2].results == ["FAIL", "pass"]
    fp = dict(zip(codes, (probe_fingerprint(r) for r in probes), strict=True))
    assert all(v is not None for v in fp.values())
    assert fp["one"] == fp["one_again"]
    assert fp["one"] != fp["five"]
    assert fp["raises"] != fp["raises_other"]
    assert fp["set_order"] == fp["set_order_2"]
    assert fp["one"][1] == fp["five"][1]  # same value on the second assert


def test_probe_records_the_calls_a_setup_helper_makes() -> None:
    setup = "def _check_loop():\n    for x in range(3):\n        assert f(x) == x\n    return True\n"
    tests = ["assert _check_loop()"]  # HumanEval's loops become one assert calling a helper
    codes = {
        "plus_one": "def f(x):\n    return x + 1\n",
        "one_plus": "def f(x):\n    return 1 + x\n",
        "plus_two": "def f(x):\n    return x + 2\n",
    }
    with ProcessExecutor() as ex:
        verdicts = ex.run([Job(c, tuple(tests), 2, setup) for c in codes.values()])
        probes = ex.run([probe_job(tests, setup, c, 2) for c in codes.values()])
    assert all(v.results == ["FAIL"] for v in verdicts)  # the verdicts cannot tell them apart
    fp = dict(zip(codes, (probe_fingerprint(r) for r in probes), strict=True))
    assert None not in fp.values()
    assert fp["plus_one"] == fp["one_plus"] != fp["plus_two"]


def test_stats_reports_rejections_of_a_built_pool(built, tmp_path: Path) -> None:
    src, _, _ = built
    out = tmp_path / "pool"
    res = run_cli("pool", "build", "--from", str(src), "--out", str(out), "--sandbox", "process", "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads((out / BUILD_REPORT_FILE).read_text())["rejects"]["duplicate_behaviour"] >= 1
    stats = run_cli("pool", "stats", str(out), "--json")
    rejected = json.loads(stats.stdout)["rejected_mutants"]
    assert rejected["duplicate_behaviour"] >= 1 and rejected["no_op"] >= 2
    table = run_cli("pool", "stats", str(out))
    assert "rejected mutants: duplicate_behaviour" in table.stdout


def identical_pairs(pool, run) -> list[tuple[str, str]]:
    """Distractor pairs of one query with the same behaviour on every assert. Only pairs failing the same
    asserts (``failing_tests`` in the metadata) can be identical; those are probed in the sandbox."""
    meta = pool.distractor_meta()
    groups: dict[tuple, list[str]] = defaultdict(list)
    for q in pool.queries:
        for cid in q.paired_distractor_corpus_ids:
            groups[(q.query_id, tuple(meta[cid].failing_tests))].append(cid)
    queries = {q.query_id: q for q in pool.queries}
    todo = [(qid, cid) for (qid, _), cids in groups.items() if len(cids) > 1 for cid in cids]
    jobs = [
        probe_job(queries[qid].test_suite, queries[qid].test_setup, pool.snippet(cid).code, 2.0)
        for qid, cid in todo
    ]
    fingerprints = {cid: probe_fingerprint(r) for (_, cid), r in zip(todo, run(jobs), strict=True)}
    pairs = []
    for (_, _), cids in groups.items():
        for a, b in itertools.combinations(cids, 2):
            if fingerprints[a] is None or fingerprints[a] == fingerprints[b]:
                pairs.append((a, b))
    return pairs


@pytest.mark.parametrize("name", ["humaneval", pytest.param("core", marks=pytest.mark.slow)])
def test_bundled_pools_have_no_behaviour_identical_distractors(name: str) -> None:
    pool = load_pool(name)
    cache = ExecCache()
    with make_executor("auto") as executor:
        assert identical_pairs(pool, lambda jobs: run_cached(executor, jobs, cache)) == []
