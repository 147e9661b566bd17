"""The retrieval stage's cache for runs (issue 33, warm set-up): a second run with the same pool, retriever,
settings and sandbox reads the stage's result instead of recomputing it (no store opened, no verdict
read), the result is the same, and anything that can change it recomputes.

Real parts: core tasks, BM25, the process sandbox, the on-disk cache; a copycat agent (no LLM) whose
outcomes follow from the retrieval result.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import agentbench
from agentbench import Task
from agentbench.cache import RETRIEVALS, JSONCache
from agentbench.pools import load_pool, write_pool
from agentbench.retrieval import stagecache
from agentbench.retrieval.results import RetrievalResult

from .conftest import core_subset


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def pool(tmp_path: Path) -> Path:
    return core_subset(6, tmp_path / "pool", step=97)


def copy_context(task: Task) -> str:
    return task.context[0] if task.context else f"{task.signature}\n    raise NotImplementedError\n"


def _run(tmp_path: Path, name: str, pool: Path, **kw) -> agentbench.RunResult:
    options = dict(
        pool=str(pool),
        embedder="bm25",
        agent=copy_context,
        conditions=["rag", "oracle"],
        sandbox="process",
        run_dir=tmp_path / name,
        store_dir=tmp_path / "stores",
    )
    return agentbench.evaluate(**(options | kw))


def _store(result: agentbench.RunResult) -> str:
    return result.retrieval.run_info.store


def _without_run_info(run_dir: Path) -> dict:
    data = json.loads((run_dir / "retrieval.json").read_text())
    data.pop("run_info")
    return data


def _outcomes(result: agentbench.RunResult) -> list[tuple]:
    return [(r.query_id, r.condition, r.context_ids, r.passed) for r in result.records]


def test_second_run_reads_the_stage_without_opening_a_store(
    tmp_path: Path, pool: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _run(tmp_path, "first", pool)
    assert _store(first) != "cached"

    def no_store(*args, **kwargs):
        raise AssertionError("a cached retrieval stage opened a store")

    monkeypatch.setattr("agentbench.retrieval.evaluate.open_searcher", no_store)
    second = _run(tmp_path, "second", pool)
    assert _store(second) == "cached"
    assert second.retrieval.run_info.timing.search_s == 0.0
    assert _without_run_info(tmp_path / "second") == _without_run_info(tmp_path / "first")
    assert _outcomes(second) == _outcomes(first)


@pytest.mark.parametrize(
    "change",
    [
        {"seed": 1},
        {"timeout": 5.0},
        {"embedder": "bm25?k1=1.2"},
        {"limit": 4},
        {"conditions": ["rag", "agent_rag"]},
    ],
    ids=["seed", "timeout", "embedder", "limit", "split"],
)
def test_anything_that_can_change_the_result_recomputes(tmp_path: Path, pool: Path, change: dict) -> None:
    _run(tmp_path, "first", pool)
    other = _run(tmp_path, "other", pool, **change)
    assert _store(other) != "cached"
    again = _run(tmp_path, "again", pool, **change)  # and that result is then cached under its own key
    assert _store(again) == "cached"


def test_an_edited_snippet_recomputes_with_the_new_verdict(tmp_path: Path, pool: Path) -> None:
    first = _run(tmp_path, "first", pool, conditions=["oracle"])
    assert all(r.context_passes for r in first.records)
    edited = load_pool(str(pool))
    query = edited.queries[0]
    canonical = query.correct_corpus_ids[0]
    corpus = [
        s.model_copy(update={"code": s.code + "\n\nraise RuntimeError('edited')\n"})
        if s.corpus_id == canonical
        else s
        for s in edited.corpus
    ]
    write_pool(edited.model_copy(update={"corpus": corpus}), tmp_path / "edited")
    second = _run(tmp_path, "second", tmp_path / "edited", conditions=["oracle"])
    assert _store(second) != "cached"
    row = {q.query_id: q for q in second.retrieval.per_query}[query.query_id]
    verdicts = {r.corpus_id: r.passes_all_tests for r in row.top_results}
    assert verdicts[canonical] is False  # the edited canonical now fails, and the result says so


def test_plugin_retrievers_and_reranking_are_never_cached(tmp_path: Path, pool: Path) -> None:
    canonical = {q.query: q.correct_corpus_ids[0] for q in load_pool(str(pool)).queries}

    def retriever(query: str, k: int) -> list[tuple[str, float]]:
        return [(canonical[query], 1.0)]

    for name in ("a", "b"):
        assert _store(_run(tmp_path, f"plugin-{name}", pool, retriever=retriever)) != "cached"
    for name in ("a", "b"):
        result = _run(tmp_path, f"rerank-{name}", pool, rerank="exec-visible", conditions=["rag"])
        assert _store(result) != "cached"


def test_a_kept_value_for_another_digest_or_that_does_not_validate_is_a_miss(tmp_path: Path) -> None:
    store = tmp_path / "store"
    result = RetrievalResult(model="m", run_info=None)
    calls = []

    def compute() -> RetrievalResult:
        calls.append(1)
        return result

    key = stagecache.StageKey("slot", "digest")
    with JSONCache(store) as cache:
        cache.set("slot", {"digest": "digest", "result": {"per_query": "not a list"}})
    assert stagecache.cached_retrieval(key, compute, store=store) is result
    with JSONCache(store) as cache:
        kept = cache.get("slot")
    assert kept["digest"] == "digest" and kept["result"]["model"] == "m"  # the slot now holds the new one
    other = stagecache.StageKey("slot", "another digest")
    assert stagecache.cached_retrieval(other, compute, store=store) is result
    assert stagecache.cached_retrieval(None, compute, store=store) is result  # no key: always computed
    assert calls == [1, 1, 1]


def test_an_edited_pool_replaces_its_configurations_result(tmp_path: Path, pool: Path) -> None:
    """One result per configuration: a new pool content takes the old one's slot, it does not add one."""
    _run(tmp_path, "first", pool)
    edited = load_pool(str(pool))
    queries = [edited.queries[0].model_copy(update={"query": edited.queries[0].query + " (edited)"})]
    write_pool(edited.model_copy(update={"queries": queries + edited.queries[1:]}), pool)
    second = _run(tmp_path, "second", pool)
    assert _store(second) != "cached"
    with JSONCache(tmp_path / "cache" / RETRIEVALS) as cache:
        assert len(cache) == 1
