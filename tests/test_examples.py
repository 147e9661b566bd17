"""The example plug-ins in examples/ as the README runs them: the hybrid (BM25 + MiniLM, RRF) retriever, the
copy-the-context agent and the LCEL agent on the offline local model.

These use the default cache directory on purpose: the hybrid retriever's MiniLM embeddings of the pool and
the local model's weights live there (a cold cache only makes the tests slower). Run and store
directories are under tmp_path.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

import agentbench
from agentbench.errors import ConfigError
from agentbench.llm import LLMClient

from .conftest import ROOT, run_cli

LOCAL_MODEL = "local/qwen2.5-coder-0.5b"


@pytest.fixture(autouse=True)
def _cwd(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # examples.* resolve from the checkout, as documented


def test_hybrid_retriever_with_simple_agent(tmp_path: Path) -> None:
    result = agentbench.evaluate(
        pool="core",
        retriever="examples.hybrid:retriever",
        agent="examples.simple_agent:agent",
        limit=4,
        conditions=["rag", "oracle"],
        run_dir=tmp_path / "run",
        store_dir=tmp_path / "stores",
    )
    s = result.summary.to_json_dict()
    assert s["run"]["retriever"] == "examples.hybrid:retriever"
    assert s["run"]["agent"] == "examples.simple_agent:agent"
    assert s["retrieval"]["errors"] == 0
    assert s["conditions"]["oracle"]["pass_rate"] == 1.0 and s["conditions"]["oracle"]["n"] == 4
    rag = [r for r in result.records if r.condition == "rag"]
    assert len(rag) == 4
    for r in rag:
        assert r.status == "ok" and r.context_passes is not None
        assert r.passed == r.context_passes, r.query_id  # the agent copies its context
    # hence rag pass rate == retrieval exec@1
    assert s["conditions"]["rag"]["pass_rate"] == pytest.approx(s["retrieval"]["metrics"]["exec@1"], abs=1e-4)


def test_hybrid_retriever_scores(tmp_path: Path) -> None:
    res = agentbench.retrieve(
        pool="core", retriever="examples.hybrid:retriever", limit=10, store_dir=tmp_path / "stores"
    )
    assert res.errors == [] and res.n_queries == 10 and res.model == "examples.hybrid:retriever"
    m = res.metrics
    assert m["exec@1"] <= m["exec@3"] <= m["exec@5"] <= m["exec@10"]
    assert m["exec@10"] >= 0.7  # 0.8 on the first 10 queries; a little slack across machines
    with_canonical = sum(
        any(t.corpus_id in q.correct_corpus_ids for t in q.top_results) for q in res.per_query
    )
    assert with_canonical >= 7
    assert all(len(q.top_results) == 10 for q in res.per_query)
    # RRF scores: positive and non-increasing down the ranking
    sims = [t.similarity for t in res.per_query[0].top_results]
    assert all(s > 0 for s in sims) and sims == sorted(sims, reverse=True)


def _local_model_reason() -> str | None:
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed"
    try:
        LLMClient(LOCAL_MODEL, cache=False).check()
    except ConfigError as exc:
        return str(exc)
    return None


@pytest.fixture
def local_model() -> None:
    reason = _local_model_reason()
    if reason and os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"the local model is required in CI: {reason}")
    if reason:
        pytest.skip(reason)


def _check_lcel_records(records: list[dict]) -> None:
    for r in records:
        assert r["status"] in ("ok", "no_code"), (r["status"], r["error"])
        assert r["prompt_tokens"] > 0 and r["completion_tokens"] > 0
        sent = json.loads(r["messages"][0]["content"])  # the input dict given to the Runnable
        assert set(sent) == {"task", "signature", "function_name", "context", "snippets"}


@pytest.mark.slow
def test_cli_lcel_agent_with_hybrid_retriever(tmp_path: Path, local_model: None) -> None:
    run_dir = tmp_path / "run"
    res = run_cli(
        "run",
        "--retriever",
        "examples.hybrid:retriever",
        "--agent",
        "examples.lcel_agent:agent",
        "--pool",
        "core",
        "--limit",
        "2",
        "--conditions",
        "rag,oracle",
        "--run-dir",
        str(run_dir),
        "--store-dir",
        str(tmp_path / "stores"),
        env={"AGENTBENCH_EXAMPLE_LLM": LOCAL_MODEL},
        timeout=1200,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    assert len(records) == 4
    assert sorted(r["condition"] for r in records) == ["oracle", "oracle", "rag", "rag"]
    _check_lcel_records(records)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["run"]["agent"] == "examples.lcel_agent:agent"
    assert summary["run"]["retriever"] == "examples.hybrid:retriever"
    assert summary["llm"]["prompt_tokens"] == sum(r["prompt_tokens"] for r in records)
    assert summary["conditions"]["rag"]["agent_errors"] == 0


@pytest.mark.slow
def test_api_lcel_agent_object(tmp_path: Path, local_model: None) -> None:
    from examples.lcel_agent import agent

    result = agentbench.evaluate(
        pool="core",
        embedder="bm25",
        agent=agent,
        limit=1,
        conditions=["oracle"],
        run_dir=tmp_path / "run",
        store_dir=tmp_path / "stores",
    )
    assert len(result.records) == 1
    _check_lcel_records([r.model_dump() for r in result.records])
    assert result.summary.run.agent.endswith(":RunnableSequence")
    assert result.summary.conditions["oracle"].agent_errors == 0
