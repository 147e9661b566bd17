"""The end-to-end run with the real offline model: local/qwen2.5-coder-0.5b through evaluate().

Three queries of the core pool with only their own snippets (so minilm embeds a handful of texts, not the
whole corpus), all four conditions, the sandbox as ``--sandbox auto`` would pick it (Docker when it is
reachable, and always in CI). Every cache is isolated in tmp except the model weights, which are
assembled once in the usual cache and linked in.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from agentbench.agent import CONDITIONS
from agentbench.api import evaluate_config as evaluate
from agentbench.errors import ConfigError
from agentbench.llm import LLMClient
from agentbench.llm.weights import cache_dir, ensure_model, local_model_spec
from agentbench.pipeline import RunConfig
from agentbench.pools import load_pool

from .conftest import core_subset

MODEL = "local/qwen2.5-coder-0.5b"
N_QUERIES = 3

pytestmark = pytest.mark.slow


def _sandbox() -> str:
    """``auto`` semantics, decided here so the test says which sandbox it used; CI must have Docker."""
    from agentbench.execution.select import docker_status

    reason = docker_status()
    if reason is None:
        return "docker"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"Docker is required in CI: {reason}")
    return "process"


@pytest.fixture(scope="module")
def weights() -> Path:
    """The verified GGUF in the real cache (assembled there once if needed), before any isolation."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed")
    try:
        LLMClient(MODEL, cache=False).check()
        return ensure_model(MODEL)
    except ConfigError as exc:
        pytest.skip(str(exc))


@pytest.fixture
def small_pool(tmp_path: Path) -> Path:
    return core_subset(N_QUERIES, tmp_path / "pool")


def test_local_model_end_to_end(
    weights: Path, small_pool: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # isolate the LLM, execution and embedding caches; link the already-verified weights in
    cache = tmp_path / "cache"
    (cache / "models").mkdir(parents=True)
    spec = local_model_spec(MODEL)
    for name in (spec.filename, spec.filename + ".verified"):
        (cache / "models" / name).symlink_to(weights.parent / name)
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(cache))
    assert cache_dir() == cache

    def config(name: str) -> RunConfig:
        return RunConfig(
            pool=str(small_pool),
            llm=MODEL,
            embedder="minilm",
            sandbox=_sandbox(),
            max_tokens=256,
            concurrency=2,
            run_dir=str(tmp_path / name),
            store_dir=str(tmp_path / "stores"),
        )

    first = evaluate(config("first"), show_progress=False)

    queries = {q.query_id: q for q in load_pool(small_pool).queries}
    assert len(queries) == N_QUERIES
    assert {r.condition for r in first.records} == set(CONDITIONS)
    assert len(first.records) == 4 * N_QUERIES  # every core query has paired distractors
    assert sorted({(r.query_id, r.condition) for r in first.records}) == sorted(
        (q, c) for q in queries for c in CONDITIONS
    )
    assert not [r for r in first.records if r.status in ("llm_error", "infra_error")]
    with_code = [r for r in first.records if r.code.strip()]
    assert len(with_code) >= 0.75 * len(first.records), [r.response for r in first.records if not r.code]
    for rec in first.records:
        n_tests = len(queries[rec.query_id].test_suite)
        assert rec.response and rec.messages
        if rec.status == "ok":
            assert len(rec.results) == n_tests, rec
            assert rec.passed == all(v == "pass" for v in rec.results)
        else:  # no_code: nothing to run
            assert rec.status == "no_code" and rec.results == [] and not rec.passed
        if rec.condition == "closed_book":
            assert rec.context_ids == [] and rec.context_kind == "none"
        else:
            assert len(rec.context_ids) == 1 and len(rec.context_results) == n_tests
        if rec.condition == "oracle":
            assert rec.context_kind == "canonical" and rec.context_passes is True
        if rec.condition == "distractor":
            assert rec.context_kind == "own_distractor" and rec.context_passes is False
        assert rec.prompt_tokens > 0 and rec.cost_usd == 0.0

    for name in ("config.json", "retrieval.json", "records.jsonl", "summary.json", "report.md"):
        assert (first.run_dir / name).is_file(), name
    assert len((first.run_dir / "records.jsonl").read_text().splitlines()) == 4 * N_QUERIES
    s = json.loads((first.run_dir / "summary.json").read_text())
    exec1 = s["retrieval"]["metrics"]["exec@1"]
    assert 0.0 <= exec1 <= 1.0
    for cond in CONDITIONS:
        c = s["conditions"][cond]
        assert c["n"] == N_QUERIES and 0 <= c["passed"] <= c["n"]
        assert c["pass_rate"] == pytest.approx(c["passed"] / c["n"], abs=1e-4)  # rounded to 4 places
        lo, hi = c["ci95"]
        assert 0.0 <= lo <= c["pass_rate"] <= hi <= 1.0
    assert "bug_inheritance_rate" in s["propagation"] and "repair_rate" in s["propagation"]
    assert set(s["propagation"]["rag_pass_by_top1"]) >= {"canonical", "own_distractor", "other_snippet"}
    llm = s["llm"]
    assert llm["calls"] > 0 and llm["calls"] + llm["cache_hits"] == 4 * N_QUERIES
    assert llm["prompt_tokens"] > 0 and llm["completion_tokens"] > 0 and llm["cost_usd"] == 0.0

    # the same configuration in another run directory is answered entirely from the response cache
    second = evaluate(config("second"), show_progress=False)
    assert second.summary.llm.calls == 0
    assert second.summary.llm.cache_hits == 4 * N_QUERIES
    assert [r.response for r in second.records] == [r.response for r in first.records]
    assert [r.results for r in second.records] == [r.results for r in first.records]
    # the paired attribution agrees with the records of this real run
    a = s["attribution"]
    by = {(r.query_id, r.condition): r for r in first.records}
    induced = sum(
        by[(q, "closed_book")].passed and not by[(q, "rag")].passed and by[(q, "rag")].context_passes is False
        for q in queries
    )
    assert (
        a["retrieval_induced_failures"]["count"] == induced
        and a["retrieval_induced_failures"]["n"] == N_QUERIES
    )
    dec = a["decomposition"]
    assert dec["rag_pass_rate"] == s["conditions"]["rag"]["pass_rate"]
    assert sum(k["contribution"] for k in dec["by_top1_kind"].values()) == pytest.approx(
        dec["rag_pass_rate"], abs=1e-3
    )
    net = a["net_effect_of_retrieval"]
    assert net["difference"] == pytest.approx(
        s["conditions"]["rag"]["pass_rate"] - s["conditions"]["closed_book"]["pass_rate"], abs=1e-3
    )


def test_local_model_with_tools(weights: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """agent_rag with the real 0.5B model: the text tool protocol, a trajectory per task, held-out scoring,
    a rerun replayed from the cache, and --resume after the records file lost its last task."""
    cache = tmp_path / "cache"
    (cache / "models").mkdir(parents=True)
    spec = local_model_spec(MODEL)
    for name in (spec.filename, spec.filename + ".verified"):
        (cache / "models" / name).symlink_to(weights.parent / name)
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(cache))
    pool = core_subset(2, tmp_path / "pool")

    def config(name: str, **kw) -> RunConfig:
        return RunConfig(
            pool=str(pool),
            llm=MODEL,
            embedder="bm25",
            sandbox=_sandbox(),
            conditions=["rag", "agent_rag"],
            max_tokens=384,
            max_turns=3,
            concurrency=2,
            run_dir=str(tmp_path / name),
            store_dir=str(tmp_path / "stores"),
            **kw,
        )

    first = evaluate(config("first"), show_progress=False)
    tooled = [r for r in first.records if r.condition == "agent_rag"]
    assert len(tooled) == 2 and not [r for r in first.records if r.status in ("llm_error", "infra_error")]
    for rec in tooled:
        stats = rec.tool_stats
        assert stats.protocol == "text" and 1 <= stats.turns <= 3
        assert stats.valid_tool_calls + stats.invalid_tool_calls == stats.tool_calls
        replies = [s for s in rec.trajectory if s["type"] == "assistant"]
        assert len(replies) == stats.turns and all(s["prompt_tokens"] > 0 for s in replies)
        assert rec.prompt_tokens == sum(s["prompt_tokens"] for s in replies)
        assert "<tools>" in rec.messages[0]["content"]  # the protocol was in the system prompt
    # every condition is scored on the held-out asserts
    queries = {q.query_id: q for q in load_pool(pool).queries}
    for rec in first.records:
        if rec.results:
            assert len(rec.results) < len(queries[rec.query_id].test_suite)
    agent = first.summary.agent["agent_rag"]
    assert agent.n == 2 and agent.valid_tool_call_rate is None or 0 <= agent.valid_tool_call_rate <= 1
    calls = first.summary.llm.calls
    assert calls >= 3  # two rag replies (or cache hits) and at least one agent turn per task

    # a rerun replays every step from the response cache: zero LLM calls, same trajectories
    def steps(result) -> list:  # a replayed step differs only in being marked cached
        return [[{k: v for k, v in s.items() if k != "cached"} for s in r.trajectory] for r in result.records]

    second = evaluate(config("second"), show_progress=False)
    assert second.summary.llm.calls == 0
    assert steps(second) == steps(first)

    # --resume after the last record was lost redoes only that task (from the cache)
    lines = (first.run_dir / "records.jsonl").read_text().splitlines()
    (first.run_dir / "records.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    resumed = evaluate(config("first", resume=True), show_progress=False)
    assert steps(resumed) == steps(first)
    assert resumed.summary.llm.calls == 0
