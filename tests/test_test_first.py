"""The test-first rule as a run setting: on by default, off for run directories made before it existed,
and invisible (so resumable) for runs without a tool-using condition."""

from __future__ import annotations

import json
from pathlib import Path

from agentbench.pipeline import RunConfig
from agentbench.pipeline.rundir import RunDirectory


def _stored(tmp_path: Path, **settings) -> RunConfig:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(settings))
    return RunDirectory.open(tmp_path).config


def test_the_rule_is_on_by_default_and_reaches_the_budget() -> None:
    config = RunConfig(conditions=["rag", "agent_rag"])
    assert config.test_first and config.budget().test_first
    assert not RunConfig(conditions=["agent"], test_first=False).budget().test_first
    assert json.loads(config.model_dump_json())["test_first"] is True


def test_an_agent_run_directory_from_before_the_rule_resumes_without_it(tmp_path: Path) -> None:
    old = _stored(tmp_path, conditions=["rag", "agent_rag"])
    assert old.test_first is False  # its agents answered freely: a resume must not change that
    assert old.fingerprint() != RunConfig(conditions=["rag", "agent_rag"]).fingerprint()
    assert old.fingerprint() == RunConfig(conditions=["rag", "agent_rag"], test_first=False).fingerprint()
    assert _stored(tmp_path, conditions=["agent"], test_first=True).test_first


def test_a_run_without_agents_is_unchanged_by_the_setting(tmp_path: Path) -> None:
    plain = RunConfig(conditions=["closed_book", "rag"])
    assert "test_first" not in json.loads(plain.model_dump_json())
    old = _stored(tmp_path, conditions=["closed_book", "rag"])
    assert (
        old.fingerprint()
        == plain.fingerprint()
        == RunConfig(conditions=["closed_book", "rag"], test_first=False).fingerprint()
    )


def test_a_stored_run_without_agents_reads_back_equal(tmp_path: Path) -> None:
    config = RunConfig(conditions=["rag"], run_dir=str(tmp_path / "r"))
    (tmp_path / "config.json").write_text(config.model_dump_json())
    assert RunDirectory.open(tmp_path).config == config  # no agent: the missing field is the default
