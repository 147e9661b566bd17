"""Typed stage boundaries (issue 16): settings declared once and immutable, conditions as registered
objects the pipeline never names, one run-directory type, typed results that still read as 0.1 dicts."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import ValidationError

from agentbench.api import evaluate_config, retrieval_settings, run_config
from agentbench.errors import ConfigError
from agentbench.llm import LLMClient
from agentbench.llm._litellm import register_provider
from agentbench.pipeline import Condition, Context, PlanInputs, RunConfig, RunDirectory, RunRecord, register
from agentbench.pipeline import conditions as registry
from agentbench.pools.models import Query
from agentbench.retrieval.settings import RetrievalSettings

from .conftest import run_cli
from .test_pipeline import Copycat


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "cache"))


# ---------------------------------------------------------------- settings


def test_configs_are_immutable_once_validated() -> None:
    config = run_config(limit=3, rerank="exec-visible")
    with pytest.raises(ValidationError):
        config.limit = 5  # type: ignore[misc]
    # --rerank adds rag_reranked after rag when the config is made, not later by the pipeline
    assert config.conditions == ("closed_book", "rag", "rag_reranked", "oracle", "distractor")
    assert config.retrieval_settings().reranker is config.reranker  # parsed once, passed on
    with pytest.raises(ValidationError):
        RetrievalSettings().timeout = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"timeout": 0}, "--timeout must be at least 0.1"),
        ({"limit": 0}, "--limit must be at least 1"),
        ({"rerank_k": 0}, "--rerank-k must be at least 1"),
        ({"sandbox": "vm"}, "unknown sandbox 'vm'"),
        ({"rerank": "magic"}, "unknown reranker 'magic'"),
        ({"chroma_url": "ftp://x"}, "--chroma-url"),
        ({"timeout": "soon"}, "--timeout:"),
        ({"colour": "red"}, "unknown option 'colour'"),
    ],
)
def test_retrieval_settings_errors_are_the_same_for_run_and_retrieve(fields: dict, message: str) -> None:
    """One declaration, one validation: the run's config and retrieve's settings fail alike."""
    for make in (run_config, retrieval_settings):
        with pytest.raises(ConfigError, match=message) as info:
            make(**fields)
        assert "\n" not in str(info.value)


def test_cli_options_of_retrieve_and_run_share_their_declaration() -> None:
    run_help = run_cli("run", "--help", env={"COLUMNS": "200", "TERM": "dumb"}).stdout
    retrieve_help = run_cli("retrieve", "--help", env={"COLUMNS": "200", "TERM": "dumb"}).stdout
    for name, field in RetrievalSettings.model_fields.items():
        if name == "ks":
            continue
        words = " ".join(field.description.split()[:4])
        assert words in " ".join(run_help.split()), (name, "run")
        assert words in " ".join(retrieve_help.split()), (name, "retrieve")
    for cmd in ("run", "retrieve"):
        proc = run_cli(cmd, "--timeout", "0", "--limit", "1")
        assert proc.returncode == 2 and "--timeout must be at least 0.1" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------- conditions


@dataclass(frozen=True)
class LastRanked(Condition):
    """A condition defined outside the pipeline: the lowest-ranked retrieved snippet as context."""

    def plan(self, query: Query, inputs: PlanInputs) -> Context | None:
        ids = list(inputs.ranked.get(query.query_id, []))[-1:]
        return Context(ids, registry.kind_of(query, ids[0]) if ids else "none")


def test_a_registered_condition_runs_without_touching_the_pipeline(tmp_path: Path) -> None:
    register(LastRanked("last_ranked", template="rag", description="the lowest-ranked snippet"), replace=True)
    try:
        register_provider("copycat", Copycat())
        config = RunConfig(
            llm="copycat/m",
            embedder="bm25",
            limit=4,
            sandbox="process",
            conditions=["rag", "last_ranked"],
            run_dir=str(tmp_path / "run"),
            store_dir=str(tmp_path / "stores"),
        )
        result = evaluate_config(config, client=LLMClient("copycat/m"), show_progress=False)
    finally:
        registry._REGISTRY.pop("last_ranked", None)
    last = [r for r in result.records if r.condition == "last_ranked"]
    ranking = result.retrieval.ranking()
    assert len(last) == 4
    for rec in last:
        assert rec.context_ids == ranking[rec.query_id][-1:]
        # the scripted model copies its context, so the record passes exactly when that snippet does
        assert rec.passed == bool(rec.context_passes)
    assert result.summary.conditions["last_ranked"].n == 4
    assert "last_ranked" in json.loads((tmp_path / "run" / "summary.json").read_text())["conditions"]


def test_unknown_and_unavailable_conditions_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown condition 'nope'"):
        run_config(conditions=["nope"])
    with pytest.raises(ConfigError, match="unknown condition 'rag_reranked'"):
        run_config(conditions=["rag_reranked"])  # needs --rerank
    with pytest.raises(ConfigError, match="already registered"):
        register(LastRanked("rag", template="rag"))


# ---------------------------------------------------------------- run directory


def test_run_directory_refuses_to_mix_configurations(tmp_path: Path) -> None:
    first = RunDirectory.create(run_config(run_dir=str(tmp_path / "r"), limit=2))
    assert json.loads((first.path / "config.json").read_text())["run_dir"] == str(tmp_path / "r")
    assert RunDirectory.open(first.path).config == first.config
    with pytest.raises(ConfigError, match=f"being written by another agentbench run \\(pid {os.getpid()}\\)"):
        RunDirectory.create(run_config(run_dir=str(tmp_path / "r"), limit=2, resume=True))
    first.records.append_many([RunRecord(query_id="q1", condition="oracle")])
    first.close()
    with pytest.raises(ConfigError, match="already holds a run"):
        RunDirectory.create(run_config(run_dir=str(tmp_path / "r"), limit=2))
    with pytest.raises(ConfigError, match="different settings \\(limit: 2 -> 3\\)"):
        RunDirectory.create(run_config(run_dir=str(tmp_path / "r"), limit=3, resume=True))
    # settings that cannot change a record may differ on --resume
    again = RunDirectory.create(run_config(run_dir=str(tmp_path / "r"), limit=2, resume=True, concurrency=9))
    assert again.config.concurrency == 9
    again.close()
    (first.path / "retrieval.json").write_text('{"model": 3}')
    with pytest.raises(ConfigError, match="not a valid RetrievalResult"):
        RunDirectory.open(first.path).read_retrieval()
    assert oct((first.path / "config.json").stat().st_mode & 0o777) != "0o600"
