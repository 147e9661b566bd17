"""The typed records read back every file shape agentbench has written, and write it unchanged.

The pinned files in ``tests/golden`` (a plain and a ``--rerank`` run, and ``agentbench retrieve``'s
results file) are read into the models and dumped again: the JSON must come back equal, key for key, and
each section must be its typed model. Older shapes (summaries from before attribution or its
decomposition, a plug-in agent's shorter tool statistics) still load.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from agentbench.analysis.summary import (
    AgentStats,
    Attribution,
    CountEffect,
    Counterfactual,
    Decomposition,
    DifferenceEffect,
    Propagation,
    Proportion,
    RerankSummary,
    RunSummary,
    ShareOfGain,
    Unavailable,
)
from agentbench.pipeline.records import RunRecord, ToolStats
from agentbench.retrieval.results import RetrievalResult

GOLDEN = Path(__file__).parent / "golden"


def _denormalise(value: Any, key: str = "") -> Any:
    """The golden files hide timings and paths ("<t>", "<path>"); put plausible values back."""
    if isinstance(value, dict):
        return {k: _denormalise(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_denormalise(v, key) for v in value]
    if value == "<t>":
        return 1.5
    if value == "<path>":
        return "/some/path"
    return value


def _golden(name: str) -> Any:
    return _denormalise(json.loads((GOLDEN / f"{name}.json").read_text()))


@pytest.mark.parametrize("run", ["plain", "rerank"])
def test_pinned_summaries_round_trip_through_the_typed_sections(run: str) -> None:
    data = _golden(f"{run}_summary")
    summary = RunSummary.model_validate(data)
    assert summary.to_json_dict() == data
    assert isinstance(summary.propagation, Propagation)
    assert isinstance(summary.propagation.rag_pass_by_top1.own_distractor, Proportion)
    assert isinstance(summary.attribution, Attribution)
    assert isinstance(summary.attribution.retrieval_induced_failures, CountEffect)
    assert isinstance(summary.attribution.net_effect_of_retrieval, DifferenceEffect)
    assert isinstance(summary.attribution.retrieval_share_of_oracle_gain, ShareOfGain)
    assert isinstance(summary.attribution.decomposition, Decomposition)
    assert isinstance(summary.attribution.decomposition.counterfactual, Counterfactual)
    assert all(isinstance(p, Proportion) for d in summary.by_domain.values() for p in d.values())
    if run == "rerank":
        assert isinstance(summary.rerank, RerankSummary)
        assert summary.rerank.exec1_after == data["rerank"]["exec@1_after"]
    else:
        assert summary.rerank is None and "rerank" not in summary.to_json_dict()


@pytest.mark.parametrize("name", ["plain_retrieval", "rerank_retrieval", "retrieve"])
def test_pinned_retrieval_results_round_trip(name: str) -> None:
    data = _golden(name)
    result = RetrievalResult.model_validate(data)
    assert result.to_json_dict() == data
    assert (result.rerank is not None) == ("rerank" in data)


def test_json_keys_keep_their_order() -> None:
    """Files are written in the models' field order, which is the order the sections were always written in."""
    data = _golden("rerank_summary")
    dumped = RunSummary.model_validate(data).to_json_dict()
    assert list(dumped["rerank"])[:7] == [
        "name",
        "skipped",
        "k",
        "visible_tests",
        "seed",
        "scored_on",
        "top1_changed",
    ]
    assert list(dumped["attribution"])[:3] == ["n_queries", "resamples", "seed"]
    assert list(dumped["conditions"]["rag"])[:4] == ["n", "passed", "pass_rate", "ci95"]


def test_unavailable_effects_keep_their_short_shape() -> None:
    data = _golden("plain_summary")
    a = data["attribution"]
    a["retrieval_rescues"] = {"n": 0, "reason": "needs the closed_book condition in the run"}
    a["retrieval_share_of_oracle_gain"] = {
        "n": 4,
        "rag_gain": 0.0,
        "oracle_gain": 0.0,
        "share": None,
        "ci95": None,
        "reason": "oracle passes no more queries than closed_book: there is no gain to share",
    }
    a["decomposition"]["counterfactual"] = {"n": 0, "reason": "needs the oracle condition in the run"}
    summary = RunSummary.model_validate(data)
    assert isinstance(summary.attribution.retrieval_rescues, Unavailable)
    assert isinstance(summary.attribution.retrieval_share_of_oracle_gain, ShareOfGain)
    assert summary.attribution.retrieval_share_of_oracle_gain.reason.startswith("oracle passes")
    assert isinstance(summary.attribution.decomposition.counterfactual, Unavailable)
    assert summary.to_json_dict() == data


def test_summaries_of_older_versions_still_load() -> None:
    """Before schema_version 2 there was no attribution or per_query; early version 2 summaries had no
    decomposition or transitions."""
    v1 = _golden("plain_summary")
    for key in ("attribution", "per_query"):
        del v1[key]
    v1["schema_version"] = 1
    old = RunSummary.model_validate(v1)
    assert old.attribution is None and "attribution" not in old.to_json_dict()
    early = _golden("plain_summary")
    del early["attribution"]["decomposition"], early["attribution"]["transitions"]
    summary = RunSummary.model_validate(early)
    assert isinstance(summary.attribution.decomposition, Unavailable)
    assert summary.attribution.transitions == {}


def test_agent_section_and_tool_stats_keep_both_writers_shapes() -> None:
    """The built-in loop writes every tool statistic; a plug-in agent's record has the tools' own counts
    only, and reads back without the loop's fields."""
    loop = {
        "turns": 3,
        "tool_calls": 2,
        "valid_tool_calls": 2,
        "invalid_tool_calls": 0,
        "lenient_tool_calls": 1,
        "replies_without_call": 1,
        "searches": 1,
        "test_runs": 1,
        "searches_after_failing_tests": 0,
        "submitted": True,
        "budget_exhausted": None,
        "protocol": "text",
        "visible_tests": [0, 2],
    }
    plugin = {
        "tool_calls": 4,
        "searches": 3,
        "test_runs": 1,
        "searches_after_failing_tests": 2,
        "budget_exhausted": "tool_calls",
        "visible_tests": [1],
    }
    for stats in (loop, plugin):
        rec = RunRecord(query_id="q", condition="agent", tool_stats=stats)
        assert isinstance(rec.tool_stats, ToolStats)
        line = json.dumps(rec.model_dump())
        assert json.dumps(json.loads(line)["tool_stats"]) == json.dumps(stats)  # same keys, same order
    assert ToolStats.model_validate(plugin).turns is None
    section = {
        "n": 2,
        "tool_calls_per_task": 3.0,
        "turns_per_task": None,
        "searches_per_task": 2.0,
        "test_runs_per_task": 1.0,
        "searches_after_failing_tests": 2,
        "tasks_searching_after_failing_tests": 1,
        "valid_tool_call_rate": None,
        "tagged_tool_call_rate": None,
        "replies_without_call_rate": None,
        "submitted": 0,
        "budget_exhausted": 1,
        "tokens_per_task": 120.0,
        "cost_usd_per_task": 0.0,
        "repair": {"n": 0, "passed": 0, "pass_rate": None, "ci95": None},
        "bug_inheritance": {"n": 0, "passed": 0, "pass_rate": None, "ci95": None},
    }
    data = _golden("plain_summary") | {"agent": {"agent_rag": copy.deepcopy(section)}}
    summary = RunSummary.model_validate(data)
    assert isinstance(summary.agent["agent_rag"], AgentStats)
    assert summary.to_json_dict() == data


def test_records_are_read_by_attribute_not_as_dicts() -> None:
    """The 0.1 dict-access layer is gone: item access is an error, attributes and to_json_dict work."""
    summary = RunSummary.model_validate(_golden("plain_summary"))
    with pytest.raises(TypeError):
        summary["conditions"]  # noqa: B018
    assert summary.conditions["rag"].pass_rate == summary.to_json_dict()["conditions"]["rag"]["pass_rate"]


def test_written_files_validate_against_the_exported_json_schemas() -> None:
    """What CI consumers check files with: docs/schema accepts every shape, a short unavailable effect
    and a share of gain with a reason among them."""
    jsonschema = pytest.importorskip("jsonschema")
    from agentbench.schemas import schema_text

    summary_schema = json.loads(schema_text("summary"))
    no_gain = _golden("plain_summary")
    no_gain["attribution"]["retrieval_rescues"] = {"n": 0, "reason": "needs the closed_book condition"}
    no_gain["attribution"]["retrieval_share_of_oracle_gain"] |= {
        "share": None,
        "ci95": None,
        "reason": "no gain",
    }
    for data in (_golden("plain_summary"), _golden("rerank_summary"), no_gain):
        jsonschema.validate(data, summary_schema)
    broken = _golden("plain_summary")
    broken["attribution"]["retrieval_rescues"] = {"n": 3}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, summary_schema)
    retrieval_schema = json.loads(schema_text("retrieval"))
    for name in ("plain_retrieval", "rerank_retrieval", "retrieve"):
        jsonschema.validate(_golden(name), retrieval_schema)
