"""Pools in the released ExecRetrieval format load as they are: metadata rows with only the four
documented fields, execution-cache outcomes with messages, unknown fields anywhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentbench.pools import load_pool, scan_pool, structural_problems, structural_warnings, write_pool
from agentbench.pools.diff import edit_between

from .conftest import TINY_BUG, TINY_CODE, run_cli, tiny_rows, write_rows

GUARDLESS = "def add_one(x):\n    return x + 1\n"


def release_rows() -> dict[str, list]:
    rows = tiny_rows()
    rows["corpus.jsonl"].append(
        {
            "corpus_id": "c_0003",
            "code": GUARDLESS,
            "label": "incorrect",
            "bug_type": "remove_edge_case_check",
            "source_entry_id": "e1",
            "release_note": "kept",
        }
    )
    rows["queries.jsonl"][0]["paired_distractor_corpus_ids"] = ["c_0002", "c_0003"]
    rows["queries.jsonl"][0]["metadata"] = {"domain": "math_numerical", "generator": {"model": "x", "t": 0.2}}
    # exactly the four documented fields, as in the release
    rows["distractor_metadata.jsonl"] = [
        {
            "corpus_id": "c_0002",
            "query_id": "q_0001",
            "bug_type": "wrong_operator",
            "canonical_corpus_id": "c_0001",
        },
        {
            "corpus_id": "c_0003",
            "query_id": "q_0001",
            "bug_type": "remove_edge_case_check",
            "canonical_corpus_id": "c_0001",
        },
    ]
    rows["execution_cache.jsonl"] = [
        {"code_sha256": "a" * 64, "tests_sha256": "b" * 64, "results": ["pass", "FAIL:assert 0 == 1"]},
        {"code_sha256": "c" * 64, "tests_sha256": "b" * 64, "results": ["TIMEOUT", "ERROR:NameError: x"]},
        {"key": "some-other-shape", "value": ["pass"]},
    ]
    return rows


@pytest.fixture
def release_pool(tmp_path: Path) -> Path:
    return write_rows(tmp_path / "release", release_rows())


def test_four_field_metadata_loads_with_the_edit_derived(release_pool: Path) -> None:
    pool = load_pool(release_pool)
    meta = pool.distractor_meta()
    replaced, removed = meta["c_0002"], meta["c_0003"]
    assert (replaced.line_number, replaced.line_before, replaced.line_after) == (
        4,
        "    return x + 1",
        "    return x - 1",
    )
    assert (removed.line_number, removed.line_before, removed.line_after) == (
        2,
        "    if x is None:\n        return 0",
        "",
    )


def test_release_pool_is_valid_with_warnings_only(release_pool: Path) -> None:
    scan = scan_pool(release_pool)
    assert scan.problems + structural_problems(scan) == []
    warnings = [str(w) for w in structural_warnings(scan)]
    assert any("2 row(s) without line_number" in w and "derived" in w for w in warnings), warnings
    assert any("1 row(s) without code_sha256" in w for w in warnings), warnings

    cli = run_cli("pool", "validate", str(release_pool))
    assert cli.returncode == 0, cli.stderr
    assert "ok: 1 queries, 3 snippets" in cli.stdout
    assert all(line.split(": ", 2)[1] == "warning" for line in cli.stderr.splitlines()), cli.stderr


def test_release_pool_runs_through_stats_and_validate_execute(release_pool: Path) -> None:
    stats = run_cli("pool", "stats", str(release_pool), "--json")
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["distractors"] == 2
    executed = run_cli("pool", "validate", str(release_pool), "--execute", "--sandbox", "process")
    assert executed.returncode == 0, executed.stderr


def test_unknown_fields_survive_a_round_trip(release_pool: Path, tmp_path: Path) -> None:
    write_pool(load_pool(release_pool), tmp_path / "copy")
    corpus = [json.loads(x) for x in (tmp_path / "copy" / "corpus.jsonl").read_text().splitlines()]
    assert corpus[2]["release_note"] == "kept"
    query = json.loads((tmp_path / "copy" / "queries.jsonl").read_text())
    assert query["metadata"]["generator"] == {"model": "x", "t": 0.2} and query["extra_field"] == {
        "kept": True
    }
    cache = [json.loads(x) for x in (tmp_path / "copy" / "execution_cache.jsonl").read_text().splitlines()]
    assert cache[0]["results"][1] == "FAIL:assert 0 == 1"
    assert cache[2]["key"] == "some-other-shape" and cache[2]["value"] == ["pass"]


def test_metadata_as_a_string_and_a_top_level_domain_are_accepted(tmp_path: Path) -> None:
    rows = release_rows()
    rows["queries.jsonl"][0]["metadata"] = '{"generator": "x"}'
    rows["queries.jsonl"][0]["domain"] = "geometry"
    pool = load_pool(write_rows(tmp_path / "p", rows))
    assert pool.queries[0].domain == "geometry"


def test_rows_with_a_required_field_missing_are_still_problems(tmp_path: Path) -> None:
    rows = release_rows()
    del rows["distractor_metadata.jsonl"][0]["canonical_corpus_id"]
    scan = scan_pool(write_rows(tmp_path / "p", rows))
    assert [str(p) for p in scan.problems] == [
        "distractor_metadata.jsonl:1: missing required field 'canonical_corpus_id'"
    ]


def test_edit_between() -> None:
    assert edit_between(TINY_CODE, TINY_BUG) == (4, "    return x + 1", "    return x - 1")
    assert edit_between(TINY_CODE, TINY_CODE) == (None, "", "")
    inserted = TINY_CODE.replace("    return x + 1", "    x = -x\n    return x + 1")
    assert edit_between(TINY_CODE, inserted) == (4, "", "    x = -x")
