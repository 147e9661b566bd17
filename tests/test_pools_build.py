"""`pool build`: execution-verified single-edit distractors, determinism, summary, source errors."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest

from agentbench.errors import PoolError
from agentbench.execution import Job, ProcessExecutor
from agentbench.pools import build_pool, find_mutants, load_pool, read_sources, write_pool

from .conftest import run_cli

SOURCES = [
    {
        "id": "running_max",
        "domain": "collections",
        "query": "running maximum of a list of numbers",
        "code": (
            "def running_max(xs):\n"
            "    if not xs:\n"
            "        return []\n"
            "    out = [xs[0]]\n"
            "    for i in range(1, len(xs)):\n"
            "        out.append(max(out[i - 1], xs[i]))\n"
            "    return out\n"
        ),
        "tests": [
            "assert running_max([]) == []",
            "assert running_max([3]) == [3]",
            "assert running_max([1, 3, 2]) == [1, 3, 3]",
            "assert running_max([5, 4, 6, 1]) == [5, 5, 6, 6]",
            "assert running_max([-2, -5]) == [-2, -2]",
            "assert running_max([1, 2, 3]) == [1, 2, 3]",
        ],
    },
    {
        "id": "clamp_value",
        "query": "clamp a number into an inclusive range, returning None for an empty range",
        "code": (
            "def clamp_value(x, lo, hi):\n"
            "    if lo > hi:\n"
            "        return None\n"
            "    if x < lo:\n"
            "        return lo\n"
            "    if x > hi:\n"
            "        return hi\n"
            "    return x\n"
        ),
        "tests": [
            "assert clamp_value(5, 0, 10) == 5",
            "assert clamp_value(-1, 0, 10) == 0",
            "assert clamp_value(11, 0, 10) == 10",
            "assert clamp_value(0, 0, 10) == 0",
            "assert clamp_value(10, 0, 10) == 10",
            "assert clamp_value(3, 5, 4) is None",
            "assert clamp_value(4, 4, 4) == 4",
        ],
    },
    {
        "id": "broken",
        "query": "a task whose canonical is wrong",
        "code": "def broken(x):\n    return x\n",
        "tests": ["assert broken(1) == 2"],
    },
]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    src = tmp_path_factory.mktemp("src") / "tasks.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in SOURCES))
    with ProcessExecutor() as ex:
        pool, report = build_pool(read_sources(src), ex.run, seed=7)
    return src, pool, report


def test_build_keeps_passing_canonicals_and_drops_broken(built) -> None:
    _, pool, report = built
    assert [q.entry_id for q in pool.queries] == ["running_max", "clamp_value"]
    assert report.queries_in == 3 and report.queries_out == 2
    assert any(d.startswith("broken: canonical fails") for d in report.dropped_queries)
    assert pool.queries[1].metadata["domain"] == "general"
    assert pool.queries[0].metadata["domain"] == "collections"


def test_every_distractor_fails_an_assert_and_records_which(built) -> None:
    _, pool, _ = built
    metas = {d.corpus_id: d for d in pool.distractors}
    jobs, expected = [], []
    for q in pool.queries:
        assert len(q.paired_distractor_corpus_ids) == 4
        for cid in q.paired_distractor_corpus_ids:
            jobs.append(Job(pool.snippet(cid).code, tuple(q.test_suite)))
            expected.append(metas[cid].failing_tests)
    with ProcessExecutor() as ex:
        results = ex.run(jobs)
    for res, failing in zip(results, expected, strict=True):
        assert not res.passed
        assert failing and failing == [i for i, r in enumerate(res.results) if r != "pass"]


def test_distractors_are_single_edits_of_their_canonical(built) -> None:
    _, pool, _ = built
    for d in pool.distractors:
        canon = pool.snippet(d.canonical_corpus_id).code.splitlines()
        mutant = pool.snippet(d.corpus_id).code.splitlines()
        changes = [op for op in difflib.SequenceMatcher(a=canon, b=mutant).get_opcodes() if op[0] != "equal"]
        assert len(changes) == 1
        tag, i1, i2, _, _ = changes[0]
        assert i1 == d.line_number - 1
        if d.bug_type == "remove_edge_case_check":
            assert tag == "delete"
        else:
            assert tag == "replace" and i2 - i1 == 1
            assert mutant[i1] == d.line_after and canon[i1] == d.line_before


def test_distinct_bug_types_are_preferred(built) -> None:
    _, pool, _ = built
    for q in pool.queries:
        types = [pool.snippet(c).bug_type for c in q.paired_distractor_corpus_ids]
        available = {m.bug_type for m in find_mutants(pool.snippet(q.correct_corpus_ids[0]).code)}
        assert len(set(types)) == min(4, len(available)), (types, available)


def test_build_is_deterministic_for_a_seed(built) -> None:
    src, pool, _ = built
    with ProcessExecutor() as ex:
        again, _ = build_pool(read_sources(src), ex.run, seed=7)
        other, _ = build_pool(read_sources(src), ex.run, seed=8)
    assert again.model_dump() == pool.model_dump()
    assert [s.code for s in other.corpus] != [s.code for s in pool.corpus]


def test_built_pool_validates(built, tmp_path: Path) -> None:
    _, pool, _ = built
    write_pool(pool, tmp_path / "p")
    res = run_cli("pool", "validate", str(tmp_path / "p"), "--execute", "--sandbox", "process")
    assert res.returncode == 0, res.stderr
    assert len(load_pool(tmp_path / "p").corpus) == 10


def test_cli_build_prints_summary(built, tmp_path: Path) -> None:
    src, _, _ = built
    res = run_cli(
        "pool",
        "build",
        "--from",
        str(src),
        "--out",
        str(tmp_path / "out"),
        "--sandbox",
        "process",
        "--json",
        env={"AGENTBENCH_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["queries_in"] == 3 and summary["queries_out"] == 2
    assert summary["queries_by_distractor_count"]["4"] == 2
    assert sum(summary["bug_types"].values()) == 8
    assert summary["dropped_queries"][0].startswith("broken:")


def test_toml_sources_with_string_tests(tmp_path: Path) -> None:
    src = tmp_path / "geometry.toml"
    src.write_text(
        "domain = \"geometry\"\n[[task]]\nid = \"a\"\nquery = \"q\"\ncode = '''\ndef f():\n    return 1\n'''\n"
        "tests = '''\nassert f() == 1\n\nassert f() != 2\n'''\n"
    )
    (task,) = read_sources(src)
    assert task.tests == ["assert f() == 1", "assert f() != 2"]
    assert task.domain == "geometry"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json\n", "invalid JSON"),
        ('{"query": "q", "code": "x"}\n', "field 'tests'"),
        ('{"query": "q", "code": "x", "tests": []}\n', "field 'tests'"),
        ("[1]\n", "expected a JSON object"),
    ],
)
def test_bad_sources_are_one_line_errors(tmp_path: Path, content: str, message: str) -> None:
    src = tmp_path / "s.jsonl"
    src.write_text(content)
    with pytest.raises(PoolError, match=message):
        read_sources(src)
    res = run_cli("pool", "build", "--from", str(src), "--out", str(tmp_path / "o"), "--sandbox", "process")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists(), "nothing is written when the sources are bad"


def test_duplicate_task_ids_rejected(tmp_path: Path) -> None:
    src = tmp_path / "s.jsonl"
    row = json.dumps(
        {"id": "x", "query": "q", "code": "def f():\n    return 1\n", "tests": ["assert f() == 1"]}
    )
    src.write_text(row + "\n" + row + "\n")
    with ProcessExecutor() as ex, pytest.raises(PoolError, match="used more than once"):
        build_pool(read_sources(src), ex.run)


CRUDE_SOURCES = [
    {
        "id": "parity_of_bits",
        "query": "parity of the set bits of an integer",
        "code": (
            "def parity_of_bits(n):\n"
            "    if n < 0:\n"
            "        return -1\n"
            "    count = 0\n"
            "    while n:\n"
            "        count += n & 1\n"
            "        n = n >> 1\n"
            "    return count % 2\n"
        ),
        "tests": [
            "assert parity_of_bits(0) == 0",
            "assert parity_of_bits(1) == 1",
            "assert parity_of_bits(3) == 0",
            "assert parity_of_bits(7) == 1",
            "assert parity_of_bits(8) == 1",
            "assert parity_of_bits(255) == 0",
            "assert parity_of_bits(-1) == -1",
            "assert parity_of_bits(-8) == -1",
        ],
    },
    {
        "id": "signed_ratio",
        "query": "ratio of two numbers that is None for a zero divisor",
        "code": (
            "def signed_ratio(a, b):\n"
            "    if b == 0:\n"
            "        return None\n"
            "    if a < 0:\n"
            "        return -signed_ratio(-a, b)\n"
            "    return a / b\n"
        ),
        "tests": [
            "assert signed_ratio(1, 0) is None",
            "assert signed_ratio(0, 0) is None",
            "assert signed_ratio(6, 3) == 2",
            "assert signed_ratio(-6, 3) == -2",
            "assert signed_ratio(0, 5) == 0",
            "assert signed_ratio(1, 4) == 0.25",
            "assert signed_ratio(-1, 4) == -0.25",
            "assert signed_ratio(9, -3) == -3",
        ],
    },
]


@pytest.fixture(scope="module")
def crude_built(tmp_path_factory):
    src = tmp_path_factory.mktemp("crude") / "tasks.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in CRUDE_SOURCES))
    with ProcessExecutor() as ex:
        realistic = build_pool(read_sources(src), ex.run, seed=3, timeout=2, top_up=False)
        crude = build_pool(read_sources(src), ex.run, seed=3, timeout=2, realistic=False)
    return realistic, crude


def test_realistic_build_rejects_crude_edits_by_reason(crude_built) -> None:
    (pool, report), _ = crude_built
    assert report.rejects["literal_operand"] >= 2  # 1 >> n, 2 % count
    assert report.rejects["not_a_short_guard"] == 1  # the recursive `if a < 0: return -signed_ratio(...)`
    crude_codes = {
        m.code
        for q in pool.queries
        for m in find_mutants(pool.snippet(q.correct_corpus_ids[0]).code)
        if m.crude
    }
    assert crude_codes and not crude_codes & {s.code for s in pool.corpus}


def test_realistic_distractors_pass_some_asserts_and_fail_some(crude_built) -> None:
    (pool, report), (crude_pool, crude_report) = crude_built
    suites = {q.query_id: len(q.test_suite) for q in pool.queries}
    for d in pool.distractors:
        assert 0 < len(d.failing_tests) < suites[d.query_id], d
    assert report.rejects["fails_every_assert"] + report.rejects["raises_on_every_assert"] >= 1
    # --crude-distractors keeps what the default rejects
    assert "literal_operand" not in crude_report.rejects
    kept_crude = {s.code for s in crude_pool.corpus} - {s.code for s in pool.corpus}
    assert kept_crude


def _verdict(outcomes: str) -> object:
    from agentbench.execution import ExecResult

    return ExecResult(["pass" if c == "." else "FAIL" for c in outcomes])


def test_selection_prefers_the_subtlest_mutant_of_each_bug_type() -> None:
    from agentbench.pools.mutate import Mutant
    from agentbench.pools.selection import TaskPlan

    def mutant(bug_type: str, n: int) -> Mutant:
        return Mutant(bug_type, f"# {bug_type} {n}", 1, "", "", "")

    order = [mutant("a", 1), mutant("b", 1), mutant("a", 2), mutant("c", 1), mutant("b", 2), mutant("c", 2)]
    plan = TaskPlan(order, explore=6)
    plan.verdicts = [_verdict(v) for v in ("FF..", "F...", "F...", "FFFF", "FF..", "F.F.")]
    assert plan.choose(2) is None  # a1/b2 and b1/a2 agree on every verdict: they are probed first
    assert sorted(plan.want) == [0, 1, 2, 4]
    plan.probes = {i: (f"ERROR:Probe_{i}",) * 4 for i in plan.want}  # they return different values
    assert plan.choose(2) is not None
    chosen = [m.code for m, _ in plan.choose(3)]
    # per type the least-failing usable one (c1 fails every assert: rejected); types by that share
    assert chosen == ["# b 1", "# a 2", "# c 2"]
    # b1 and a2 returning the same values are one behaviour: only b1 (first evaluated) is kept
    plan.probes[2] = plan.probes[1]
    assert [m.code for m, _ in plan.choose(3)] == ["# b 1", "# a 1", "# c 2"]
    plan.verdicts = plan.verdicts[:5]
    assert plan.choose(3) is None  # not every candidate of the exploration budget has run yet


def test_a_short_task_is_topped_up_after_every_realistic_candidate() -> None:
    from agentbench.pools.mutate import Mutant
    from agentbench.pools.selection import TaskPlan

    def mutant(bug_type: str, n: int) -> Mutant:
        return Mutant(bug_type, f"# {bug_type} {n}", 1, "", "", "")

    order = [mutant("a", 1), mutant("b", 1)]
    reserve = [mutant("wrong_constant", 1), mutant("wrong_constant", 2)]
    plain = TaskPlan(list(order), explore=2, reserve=list(reserve))
    plain.verdicts = [_verdict("...."), _verdict("FFFF")]  # a1 survives, b1 fails every assert
    assert plain.choose(3) == []  # without top-up: no realistic candidate, and the reserve stays unused
    plan = TaskPlan(list(order), explore=2, top_up=True, reserve=list(reserve))
    plan.verdicts = list(plain.verdicts)
    assert plan.choose(3) is None  # short: the top-up operators' mutants are evaluated first
    assert len(plan.order) == 4 and not plan.reserve
    plan.verdicts += [_verdict("F..."), _verdict("FFFF")]
    # still short: b1 and the second top-up mutant fail every assert alike, so they are probed first
    assert plan.choose(3) is None and sorted(plan.want) == [1, 3]
    plan.probes = {1: ("x",) * 4, 3: ("y",) * 4}
    chosen = [m.code for m, _ in plan.choose(3)]
    # the realistic top-up edit first, then the distinct ones failing every assert
    assert chosen == ["# wrong_constant 1", "# b 1", "# wrong_constant 2"]
    assert plan.topped_up == {1, 2, 3}
    plan.probes[3] = plan.probes[1]  # the same values: one behaviour, only one of them tops up
    assert [m.code for m, _ in plan.choose(3)] == ["# wrong_constant 1", "# b 1"]


def test_top_up_operators_edit_constants_outside_the_six_bug_types() -> None:
    code = (
        "def f(words, flag=False):\n"
        '    """True when words hold stop; the join of words."""\n'
        "    while True:\n"
        "        break\n"
        "    for w in words:\n"
        "        if w == 'stop':\n"
        "            return True\n"
        "    return ''.join(words) + ' '.join(words[0].split()) + str(len(words) / 2.0)\n"
    )
    assert not [m for m in find_mutants(code) if m.bug_type == "wrong_constant"]
    extra = {m.description: m for m in find_mutants(code, top_up=True)}
    assert set(extra) == {
        "constant False -> True",  # the default argument
        "constant True -> False",  # the return; `while True` is left alone
        "join separator '' -> ' '",
        "join separator ' ' -> ''",
        "split() -> split(' ')",
        "constant 2.0 -> 3.0",
        "constant 2.0 -> 1.0",
    }
    assert (
        extra["constant 2.0 -> 1.0"].crude == "no_op"
        and extra["constant 2.0 -> 3.0"].bug_type == "off_by_one"
    )
    assert all(m.code.count("while True") == 1 and '"""True when words' in m.code for m in extra.values())


def test_top_up_fills_a_short_task_and_is_reported(tmp_path: Path) -> None:
    task = {
        "id": "padded_length",
        "query": "total length of the strings joined without a separator, plus two",
        "code": "def padded_length(parts):\n    return len(''.join(parts)) + 2\n",
        "tests": [
            "assert padded_length([]) == 2",
            "assert padded_length(['ab', 'c']) == 5",
            "assert padded_length(['abc']) == 5",
        ],
    }
    src = tmp_path / "t.jsonl"
    src.write_text(json.dumps(task) + "\n")
    with ProcessExecutor() as ex:
        short, short_report = build_pool(read_sources(src), ex.run, timeout=2, top_up=False)
        topped, report = build_pool(read_sources(src), ex.run, timeout=2)
    # every edit of the six types (+ 3, + 1, - 2) shifts every value: none is realistic
    assert short.queries[0].paired_distractor_corpus_ids == []
    assert short_report.to_json()["top_up"] is False and short_report.topped_up == 0
    ids = topped.queries[0].paired_distractor_corpus_ids
    meta = topped.distractor_meta()
    failing = {topped.snippet(c).code: len(meta[c].failing_tests) for c in ids}
    # the realistic top-up edit first (it fails one assert), then distinct ones failing every assert
    assert list(failing.items())[0] == ("def padded_length(parts):\n    return len(' '.join(parts)) + 2\n", 1)
    assert len(failing) == 4 and list(failing.values())[1:] == [3, 3, 3]
    assert report.topped_up == 4 and report.to_json()["top_up"] is True
    assert report.rejects["fails_every_assert"] == 0  # the ones used are not counted as rejected


SLOW_SOURCE = {
    "id": "cpu_paced_increment",
    "query": "add one after a fixed amount of CPU work",
    "code": (
        "import time\n"
        "def cpu_paced_increment(n):\n"
        "    start = time.process_time()\n"
        "    while time.process_time() - start < 0.04:\n"
        "        pass\n"
        "    if n < 0:\n"
        "        return 0\n"
        "    return n + 1\n"
    ),
    "tests": [
        "assert cpu_paced_increment(0) == 1",
        "assert cpu_paced_increment(1) == 2",
        "assert cpu_paced_increment(2) == 3",
        "assert cpu_paced_increment(5) == 6",
        "assert cpu_paced_increment(10) == 11",
        "assert cpu_paced_increment(-1) == 0",
        "assert cpu_paced_increment(-5) == 0",
        "assert cpu_paced_increment(100) == 101",
    ],
}


@pytest.mark.slow
def test_the_same_sources_build_the_same_pool_on_a_loaded_machine(tmp_path: Path) -> None:
    """Ten CPU hogs per core beside the build: each mutant of the paced task needs ~0.3 s of CPU, which
    takes a starved job longer than the wall-clock limit that used to time it out."""
    import os
    import subprocess
    import sys

    src = tmp_path / "tasks.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in [*SOURCES, SLOW_SOURCE]))

    def build() -> tuple[dict, dict]:
        with ProcessExecutor(workers=2) as ex:
            pool, report = build_pool(read_sources(src), ex.run, seed=5, timeout=3)
        return pool.model_dump(), report.to_json()

    idle = build()
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
        for _ in range((os.cpu_count() or 1) * 10)
    ]
    try:
        loaded = build()
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert loaded == idle
    paced = [q for q in idle[0]["queries"] if q["entry_id"] == "cpu_paced_increment"]
    assert paced and len(paced[0]["paired_distractor_corpus_ids"]) == 4
