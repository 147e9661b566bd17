"""`pool validate`: one line per problem (file, line, what), exit 2, for many kinds of malformed input."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import pytest

from agentbench.execution import ProcessExecutor
from agentbench.pools import execution_problems, scan_pool, structural_problems

from .conftest import TINY_CODE, run_cli, tiny_rows, write_rows


def _q(rows):
    return rows["queries.jsonl"][0]


def _c(rows, i=0):
    return rows["corpus.jsonl"][i]


Mutator = Callable[[dict], None]

CASES: list[tuple[str, Mutator, str, str]] = [
    ("invalid_json", lambda r: r["corpus.jsonl"].append("{not json"), "corpus.jsonl:3", "invalid JSON"),
    (
        "not_an_object",
        lambda r: r["queries.jsonl"].append("[1, 2]"),
        "queries.jsonl:2",
        "expected a JSON object",
    ),
    (
        "missing_field",
        lambda r: _q(r).pop("query_id"),
        "queries.jsonl:1",
        "missing required field 'query_id'",
    ),
    ("wrong_type", lambda r: _q(r).update(test_suite="assert 1"), "queries.jsonl:1", "test_suite"),
    ("bad_label", lambda r: _c(r).update(label="maybe"), "corpus.jsonl:1", "label"),
    (
        "duplicate_query",
        lambda r: r["queries.jsonl"].append(copy.deepcopy(_q(r))),
        "queries.jsonl:1",
        "appears 2 times",
    ),
    (
        "duplicate_corpus",
        lambda r: _c(r, 1).update(corpus_id="c_0001"),
        "corpus.jsonl:1",
        "corpus_id 'c_0001' appears 2 times",
    ),
    (
        "unknown_ref",
        lambda r: _q(r).update(correct_corpus_ids=["c_9999"]),
        "queries.jsonl:1",
        "unknown corpus_id",
    ),
    (
        "label_mismatch",
        lambda r: _c(r, 1).update(label="correct", bug_type=None),
        "corpus.jsonl:2",
        "labelled correct",
    ),
    ("canonical_syntax", lambda r: _c(r).update(code="def f(:\n"), "corpus.jsonl:1", "does not parse"),
    (
        "test_syntax",
        lambda r: _q(r).update(test_suite=["assert (("]),
        "queries.jsonl:1",
        "test 0 does not parse",
    ),
    (
        "identical_distractor",
        lambda r: _c(r, 1).update(code=TINY_CODE),
        "corpus.jsonl:2",
        "identical to its canonical",
    ),
    ("empty_tests", lambda r: _q(r).update(test_suite=[]), "queries.jsonl:1", "empty test_suite"),
    (
        "no_correct_ids",
        lambda r: _q(r).update(correct_corpus_ids=[]),
        "queries.jsonl:1",
        "no correct_corpus_ids",
    ),
    ("missing_corpus_file", lambda r: r.pop("corpus.jsonl"), "corpus.jsonl", "required file is missing"),
    (
        "meta_unknown_query",
        lambda r: r.update(
            {
                "distractor_metadata.jsonl": [
                    {
                        "corpus_id": "c_0002",
                        "query_id": "q_9",
                        "canonical_corpus_id": "c_0001",
                        "bug_type": "wrong_operator",
                        "line_number": 4,
                        "line_before": "    return x + 1",
                        "line_after": "    return x - 1",
                    }
                ]
            }
        ),
        "distractor_metadata.jsonl:1",
        "unknown query_id 'q_9'",
    ),
    (
        "bug_type_on_correct",
        lambda r: _c(r).update(bug_type="off_by_one"),
        "corpus.jsonl:1",
        "has a bug_type",
    ),
]


@pytest.mark.parametrize(("name", "mutate", "where", "message"), CASES, ids=[c[0] for c in CASES])
def test_malformed_pool_reports_file_line_and_problem(tmp_path: Path, name, mutate, where, message) -> None:
    rows = tiny_rows()
    mutate(rows)
    path = write_rows(tmp_path / name, rows)
    scan = scan_pool(path)
    problems = [str(p) for p in scan.problems + structural_problems(scan)]
    assert any(p.startswith(where) and message in p for p in problems), problems


def test_validate_cli_exit_code_and_one_line_per_problem(tmp_path: Path) -> None:
    rows = tiny_rows()
    _c(rows).update(code="def f(:\n")
    _q(rows).update(test_suite=["assert (("])
    path = write_rows(tmp_path / "two", rows)
    res = run_cli("pool", "validate", str(path))
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 3  # two problems and a count
    assert "corpus.jsonl:1" in lines[0] or "corpus.jsonl:1" in lines[1]


def test_valid_pool_passes_structure_and_execution(tiny_pool: Path) -> None:
    scan = scan_pool(tiny_pool)
    assert scan.problems == [] and structural_problems(scan) == []
    with ProcessExecutor() as ex:
        assert execution_problems(scan.pool, ex) == []


def test_execution_catches_failing_canonical_and_passing_distractor(tmp_path: Path) -> None:
    rows = tiny_rows()
    _c(rows).update(code=TINY_CODE.replace("x + 1", "x + 2"))  # canonical now wrong
    _c(rows, 1).update(code=TINY_CODE.replace("x + 1", "1 + x"))  # distractor now behaves correctly
    scan = scan_pool(write_rows(tmp_path / "exec", rows))
    with ProcessExecutor() as ex:
        problems = [str(p) for p in execution_problems(scan.pool, ex)]
    assert any("canonical c_0001 of q_0001 fails" in p for p in problems), problems
    assert any("distractor c_0002 of q_0001 passes every assert" in p for p in problems), problems


def test_execution_checks_the_canonical_on_augmented_tests_too(tmp_path: Path) -> None:
    rows = tiny_rows()
    _q(rows)["augmented_tests"] = ["assert add_one(-1) == 0", "assert add_one(2) == 4", "assert add_one(("]
    scan = scan_pool(write_rows(tmp_path / "aug", rows))
    structural = [str(p) for p in structural_problems(scan)]
    assert any("q_0001 augmented test 2 does not parse" in p for p in structural), structural
    _q(rows)["augmented_tests"] = _q(rows)["augmented_tests"][:2]
    scan = scan_pool(write_rows(tmp_path / "aug2", rows))
    with ProcessExecutor() as ex:
        problems = [str(p) for p in execution_problems(scan.pool, ex)]
    # the canonical fails the second added assert (a wrong expected value); the distractor is judged on
    # the original asserts, which it fails
    assert (
        problems == [problems[0]]
        and "canonical c_0001 of q_0001 fails asserts augmented 1:FAIL" in problems[0]
    )


def test_validate_execute_cli(tiny_pool: Path) -> None:
    res = run_cli("pool", "validate", str(tiny_pool), "--execute", "--sandbox", "process")
    assert res.returncode == 0, res.stderr
    assert "ok: 1 queries" in res.stdout
