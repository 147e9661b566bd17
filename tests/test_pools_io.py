"""Loading and writing pools in the ExecRetrieval format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentbench.errors import PoolError
from agentbench.pools import load_pool, pool_stats, write_pool
from agentbench.pools.io import CORE_POOL_DIR, resolve_pool_path

from .conftest import run_cli, tiny_rows, write_rows


def test_load_tiny_pool_keeps_unknown_fields(tiny_pool: Path) -> None:
    pool = load_pool(tiny_pool)
    assert [q.query_id for q in pool.queries] == ["q_0001"]
    assert pool.snippet("c_0002").bug_type == "wrong_operator"
    assert pool.queries[0].domain == "math_numerical"
    assert pool.queries[0].model_dump()["extra_field"] == {"kept": True}


def test_write_then_load_round_trips(tiny_pool: Path, tmp_path: Path) -> None:
    pool = load_pool(tiny_pool)
    out = tmp_path / "copy"
    write_pool(pool, out)
    again = load_pool(out)
    assert again.queries == pool.queries
    assert again.corpus == pool.corpus
    row = json.loads((out / "queries.jsonl").read_text().splitlines()[0])
    assert row["extra_field"] == {"kept": True}
    assert not list(out.glob(".*.tmp")), "temporary files must not be left behind"


def test_canonical_has_no_bug_type_key_on_disk(tiny_pool: Path, tmp_path: Path) -> None:
    write_pool(load_pool(tiny_pool), tmp_path / "p")
    first = json.loads((tmp_path / "p" / "corpus.jsonl").read_text().splitlines()[0])
    assert "bug_type" not in first  # ExecRetrieval: present only on distractors


def test_resolve_core_and_errors(tmp_path: Path) -> None:
    assert resolve_pool_path("core") == CORE_POOL_DIR
    with pytest.raises(PoolError, match="not found"):
        resolve_pool_path(tmp_path / "nope")
    (tmp_path / "file.jsonl").write_text("{}")
    with pytest.raises(PoolError, match="is a file"):
        resolve_pool_path(tmp_path / "file.jsonl")


def test_load_refuses_malformed_pool_with_pointer_to_validate(tmp_path: Path) -> None:
    rows = tiny_rows()
    rows["corpus.jsonl"][0]["corpus_id"] = "c_0002"  # duplicate id
    path = write_rows(tmp_path / "bad", rows)
    with pytest.raises(PoolError, match="agentbench pool validate"):
        load_pool(path)


def test_stats_counts(tiny_pool: Path) -> None:
    s = pool_stats(load_pool(tiny_pool))
    assert s["queries"] == 1 and s["snippets"] == 2
    assert s["distractors_per_query"] == {"1": 1}
    assert s["bug_types"] == {"wrong_operator": 1}
    assert s["domains"] == {"math_numerical": 1}


def test_stats_cli_json(tiny_pool: Path) -> None:
    res = run_cli("pool", "stats", str(tiny_pool), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["queries"] == 1


def test_missing_pool_is_one_line_exit_2(tmp_path: Path) -> None:
    res = run_cli("pool", "stats", str(tmp_path / "missing"))
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert "not found" in res.stderr


def test_bad_flag_is_usage_error_exit_2() -> None:
    res = run_cli("pool", "stats", "core", "--no-such-flag")
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
