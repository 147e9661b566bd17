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
