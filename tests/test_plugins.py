"""Bring your own retriever and agent (issue 8): the plug-in shapes, per-query errors, fail-before-work
errors, resume and the CLI, with real BM25, Chroma-free plug-ins and the process sandbox.

Plug-ins here are oracles or copycats whose outcomes are known exactly: a retriever returning the query's
canonical scores exec@1 = 1, one returning its paired distractor scores 0; an agent copying its first
context snippet passes the oracle condition and inherits every distractor's bug.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import textwrap
import threading
from pathlib import Path

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.messages import AIMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda

import agentbench
from agentbench import AgentReply, ConfigError, CorpusDoc, Task
from agentbench.api import evaluate_config as run_pipeline
from agentbench.llm import LLMClient
from agentbench.llm._litellm import register_provider
from agentbench.pipeline import RunConfig
from agentbench.retrieval import open_searcher, parse_embedder

from .conftest import ROOT, run_cli

POOL = agentbench.load_pool("core")
CANONICAL = {q.query: q.correct_corpus_ids[0] for q in POOL.queries}
PAIRED = {q.query: q.paired_distractor_corpus_ids[0] for q in POOL.queries if q.paired_distractor_corpus_ids}


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(ROOT)  # module:attr specs such as examples.hybrid:x resolve from the checkout


def _retrieve(retriever, limit: int = 3, **kw) -> dict:
    """The results of ``retriever`` in their JSON form (as a results file holds them)."""
    result = agentbench.retrieve(pool="core", retriever=retriever, limit=limit, sandbox="process", **kw)
    return result.to_json_dict()


def _evaluate(tmp_path: Path, name: str = "run", **kw) -> agentbench.RunResult:
    base = dict(
        pool="core",
        embedder="bm25",
        conditions=["oracle", "distractor"],
        limit=3,
        sandbox="process",
        run_dir=tmp_path / name,
        store_dir=tmp_path / "stores",
    )
    base.update(kw)
    return agentbench.evaluate(**base)


def _canonical(query: str, k: int) -> list[tuple[str, float]]:
    return [(CANONICAL[query], 1.0)]


def copy_context(task: Task) -> str:
    """The copycat agent: its first context snippet, or a failing stub without context."""
    if task.context:
        return task.context[0]
    return f"{task.signature}\n    raise NotImplementedError\n"


def _stable(records) -> list[dict]:
    drop = {"cached", "llm_seconds", "exec_seconds", "seconds"}
    return [{k: v for k, v in r.model_dump().items() if k not in drop} for r in records]


# --- retriever plug-ins ------------------------------------------------------------------------------


def test_callable_returning_ids_or_code_is_scored_by_execution() -> None:
    good = _retrieve(_canonical)
    assert good["metrics"]["exec@1"] == 1.0 and good["errors"] == []
    assert good["n_queries"] == 3
    top = [q["top_results"][0] for q in good["per_query"]]
    assert [t["corpus_id"] for t in top] == [q.correct_corpus_ids[0] for q in POOL.queries[:3]]
    assert all(t["similarity"] == 1.0 and t["passes_all_tests"] for t in top)

    def distractor_code(query: str, k: int) -> list[str]:
        return [POOL.snippet(PAIRED[query]).code]

    bad = _retrieve(distractor_code)
    assert bad["metrics"]["exec@1"] == 0.0 and bad["errors"] == []
    assert [q["top_results"][0]["corpus_id"] for q in bad["per_query"]] == [
        q.paired_distractor_corpus_ids[0] for q in POOL.queries[:3]
    ]
    assert bad["model"].endswith("distractor_code")


def test_factory_gets_the_corpus_without_labels_once() -> None:
    calls: list[list] = []

    def factory(corpus):
        calls.append(corpus)

        def search(query: str, k: int):
            return [{"corpus_id": CANONICAL[query], "score": 0.5}]

        return search

    res = _retrieve(factory)
    assert len(calls) == 1
    corpus = calls[0]
    assert isinstance(corpus, list) and len(corpus) == len(POOL.corpus)
    assert all(isinstance(d, CorpusDoc) for d in corpus)
    assert [f.name for f in dataclasses.fields(CorpusDoc)] == ["corpus_id", "code"]
    assert not any(hasattr(d, "label") or hasattr(d, "bug_type") for d in corpus)
    assert corpus[0].code == POOL.snippet(corpus[0].corpus_id).code
    assert res["metrics"]["exec@1"] == 1.0
    assert res["per_query"][0]["top_results"][0]["similarity"] == 0.5


class _ByMetadata(BaseRetriever):
    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun):
        cid = CANONICAL[query]
        return [Document(page_content="ignored", metadata={"corpus_id": cid})]


class _ByContent(BaseRetriever):
    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun):
        return [
            Document(page_content=POOL.snippet(PAIRED[query]).code),
            Document(page_content=POOL.snippet(CANONICAL[query]).code),
        ]


def test_langchain_retrievers_by_metadata_and_by_content() -> None:
    by_meta = _retrieve(_ByMetadata())
    assert by_meta["metrics"]["exec@1"] == 1.0 and by_meta["errors"] == []
    by_content = _retrieve(_ByContent())
    assert by_content["errors"] == []
    assert by_content["metrics"]["exec@1"] == 0.0  # the distractor came first
    assert by_content["metrics"]["exec@3"] == 1.0
    ranks = [[t["corpus_id"] for t in q["top_results"]] for q in by_content["per_query"]]
    assert ranks[0] == [
        POOL.queries[0].paired_distractor_corpus_ids[0],
        POOL.queries[0].correct_corpus_ids[0],
    ]


def test_async_callable() -> None:
    async def search(query: str, k: int):
        await asyncio.sleep(0)
        return [CANONICAL[query]]

    res = _retrieve(search)
    assert res["metrics"]["exec@1"] == 1.0 and res["errors"] == []


def test_wrapping_builtin_bm25_gives_the_same_metrics(tmp_path: Path) -> None:
    limit = 8
    builtin = agentbench.retrieve(
        pool="core", embedder="bm25", limit=limit, sandbox="process", store_dir=tmp_path / "s"
    ).to_json_dict()
    searcher = open_searcher(POOL, parse_embedder("bm25"), store_dir=tmp_path / "s", progress=False)

    def wrapped(query: str, k: int):
        return searcher.search(query, k)  # Hit objects

    as_hits = _retrieve(wrapped, limit=limit)
    as_docs = _retrieve(searcher.as_langchain(k=10), limit=limit)
    keys = [k for k in builtin["metrics"] if k.startswith(("exec@", "ndcg@", "mrr"))]
    assert "exec@1" in keys and "exec@10" in keys
    for res in (as_hits, as_docs):
        assert res["errors"] == []
        assert {k: res["metrics"][k] for k in keys} == {k: builtin["metrics"][k] for k in keys}
        assert [[t["corpus_id"] for t in q["top_results"]] for q in res["per_query"]] == [
            [t["corpus_id"] for t in q["top_results"]] for q in builtin["per_query"]
        ]


def test_per_query_errors_are_recorded_and_others_scored() -> None:
    victim = POOL.queries[1]

    def flaky(query: str, k: int):
        if query == victim.query:
            raise ValueError("index offline")
        return [CANONICAL[query]]

    res = _retrieve(flaky)
    assert [e["query_id"] for e in res["errors"]] == [victim.query_id]
    assert "ValueError" in res["errors"][0]["error"] and "index offline" in res["errors"][0]["error"]
    assert res["metrics"]["exec@1"] == pytest.approx(2 / 3)
    tops = {q["query_id"]: q["top_results"] for q in res["per_query"]}
    assert tops[victim.query_id] == []
    assert all(tops[q.query_id][0]["passes_all_tests"] for q in POOL.queries[:3] if q is not victim)


@pytest.mark.parametrize(
    ("returned", "expected"),
    [
        (None, "returned NoneType"),
        ("a plain string", "returned str"),
        (["no_such_snippet"], "neither a corpus id nor the code"),
        ([42], "type int"),
        ([("c_0001", "high")], "not a number"),
    ],
)
def test_unusable_returns_are_per_query_errors(returned, expected: str) -> None:
    res = _retrieve(lambda query, k: returned, limit=2)
    assert [e["query_id"] for e in res["errors"]] == [q.query_id for q in POOL.queries[:2]]
    assert all(expected in e["error"] for e in res["errors"]), res["errors"]
    assert res["metrics"]["exec@1"] == 0.0


def _three(query, k, extra):
    return []


def _raising_factory(corpus):
    raise RuntimeError("cannot build the index")


@pytest.mark.parametrize(
    ("retriever", "expected"),
    [
        ("nosuch_mod:x", "no module named 'nosuch_mod'"),
        ("examples.hybrid:nope", "no attribute 'nope'"),
        ("no_colon", "expected module:attr"),
        (_three, "signature"),
        (42, "int is not"),
        (_raising_factory, "factory raised RuntimeError: cannot build the index"),
    ],
)
def test_bad_retrievers_fail_before_work(retriever, expected: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _retrieve(retriever)
    message = str(info.value)
    assert expected in message and "\n" not in message
    with pytest.raises(ConfigError, match="retriever"):
        _evaluate(tmp_path, retriever=retriever, agent=copy_context, conditions=["rag"])
    assert not (tmp_path / "run").exists(), "nothing is written before the check"


def test_cli_bad_retriever_is_one_line(tmp_path: Path) -> None:
    res = run_cli(
        "run",
        "--retriever",
        "nosuch_mod:x",
        "--agent",
        "examples.simple_agent:agent",
        "--limit",
        "1",
        "--sandbox",
        "process",
        "--run-dir",
        str(tmp_path / "r"),
        env={"AGENTBENCH_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert res.returncode == 2, res.stderr
    assert "nosuch_mod" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


# --- agent plug-ins ----------------------------------------------------------------------------------


def _check_copycat(result: agentbench.RunResult, n: int = 3) -> None:
    by = {c: [r for r in result.records if r.condition == c] for c in ("oracle", "distractor")}
    assert len(by["oracle"]) == n and len(by["distractor"]) == n
    assert all(r.status == "ok" and r.passed for r in by["oracle"])
    assert all(r.status == "ok" and not r.passed and r.inherited_outcomes for r in by["distractor"])
    assert result.summary.conditions["oracle"].pass_rate == 1.0
    assert result.summary.conditions["distractor"].pass_rate == 0.0
    assert result.summary.propagation.bug_inheritance_rate == 1.0


def test_sync_callable_agent(tmp_path: Path) -> None:
    result = _evaluate(tmp_path, agent=copy_context)
    _check_copycat(result)
    assert result.summary.run.agent == "tests.test_plugins:copy_context"
    assert result.summary.llm.calls == 6
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["agent"] == "tests.test_plugins:copy_context"


def test_async_agents(tmp_path: Path) -> None:
    async def agent(task: Task) -> str:
        await asyncio.sleep(0)
        return copy_context(task)

    _check_copycat(_evaluate(tmp_path, "fn", agent=agent))

    class Agent:
        def __init__(self) -> None:
            self.threads: set[int] = set()

        async def __call__(self, task: Task) -> str:
            self.threads.add(threading.get_ident())
            return "```python\n" + copy_context(task) + "```"

    instance = Agent()
    result = _evaluate(tmp_path, "obj", agent=instance)
    _check_copycat(result)
    assert instance.threads == {threading.get_ident()}  # awaited on the loop, not sent to a thread
    assert result.summary.run.agent.endswith(":test_async_agents.<locals>.Agent")


def test_runnable_agent_gets_template_variables_and_reports_usage(tmp_path: Path) -> None:
    seen: list[dict] = []

    def step(inputs: dict) -> AIMessage:
        seen.append(inputs)
        code = inputs["snippets"][0]
        return AIMessage(
            content=f"Here it is:\n```python\n{code}```",
            usage_metadata={"input_tokens": 7, "output_tokens": 3, "total_tokens": 10},
        )

    result = _evaluate(tmp_path, agent=RunnableLambda(step))
    _check_copycat(result)
    assert len(seen) == 6
    for inputs in seen:
        assert set(inputs) == {"task", "signature", "function_name", "context", "snippets"}
        assert "condition" not in inputs
        assert inputs["signature"].startswith("def ") and inputs["function_name"] in inputs["signature"]
        assert inputs["snippets"][0].strip() in inputs["context"]
    assert all(r.prompt_tokens == 7 and r.completion_tokens == 3 for r in result.records)
    assert result.summary.llm.prompt_tokens == 7 * 6
    assert result.summary.llm.completion_tokens == 3 * 6


def test_agent_reply_and_dict_returns(tmp_path: Path) -> None:
    def replying(task: Task) -> AgentReply:
        return AgentReply(copy_context(task), prompt_tokens=100, completion_tokens=20, cost_usd=0.25)

    result = _evaluate(tmp_path, "reply", agent=replying)
    _check_copycat(result)
    assert result.summary.llm.cost_usd == pytest.approx(1.5)
    assert result.summary.llm.prompt_tokens == 600
    assert result.summary.llm.completion_tokens == 120

    result = _evaluate(tmp_path, "dict", agent=lambda task: {"code": copy_context(task)})
    _check_copycat(result)


def test_agent_errors_per_query(tmp_path: Path) -> None:
    victim = POOL.queries[1].query_id

    def flaky(task: Task) -> str:
        if task.task_id == victim:
            raise KeyError("model overloaded")
        return copy_context(task)

    result = _evaluate(tmp_path, "flaky", agent=flaky, conditions=["oracle"])
    failed = [r for r in result.records if r.status == "agent_error"]
    assert [r.query_id for r in failed] == [victim]
    assert "KeyError" in failed[0].error and "model overloaded" in failed[0].error
    assert not failed[0].passed and failed[0].results == []
    oracle = result.summary.conditions["oracle"]
    assert oracle.agent_errors == 1 and oracle.n == 3 and oracle.passed == 2

    result = _evaluate(tmp_path, "int", agent=lambda task: 42, conditions=["oracle"], limit=2)
    assert [r.status for r in result.records] == ["agent_error", "agent_error"]
    assert "int" in result.records[0].error
    assert result.summary.conditions["oracle"].agent_errors == 2
    assert result.summary.conditions["oracle"].pass_rate == 0.0

    prose = _evaluate(tmp_path, "prose", agent=lambda task: "I cannot help.", conditions=["oracle"], limit=2)
    assert [r.status for r in prose.records] == ["no_code", "no_code"]
    assert prose.summary.conditions["oracle"].no_code == 2
    assert prose.summary.conditions["oracle"].agent_errors == 0


def test_bad_agents_fail_before_work(tmp_path: Path) -> None:
    def two(task, other):
        return ""

    cases = [
        (two, "one argument"),
        ("nosuch:x", "no module named 'nosuch'"),
        (42, "neither a LangChain Runnable nor a callable"),
    ]
    for agent, expected in cases:
        with pytest.raises(ConfigError) as info:
            _evaluate(tmp_path, agent=agent)
        assert expected in str(info.value) and "\n" not in str(info.value)
    prompt = tmp_path / "p.md"
    prompt.write_text("$task $context")
    for agent in ("examples.simple_agent:agent", copy_context):
        with pytest.raises(ConfigError, match="--prompt"):
            _evaluate(tmp_path, agent=agent, prompt=str(prompt))
    assert not (tmp_path / "run").exists(), "nothing is written before the checks"


def test_retriever_error_inside_evaluate(tmp_path: Path) -> None:
    victim = POOL.queries[0]

    def flaky(query: str, k: int):
        if query == victim.query:
            raise ConnectionError("vector db down")
        return [CANONICAL[query]]

    result = _evaluate(tmp_path, retriever=flaky, agent=copy_context, conditions=["rag"])
    status = {r.query_id: r.status for r in result.records}
    assert status == {q.query_id: ("retriever_error" if q is victim else "ok") for q in POOL.queries[:3]}
    bad = next(r for r in result.records if r.query_id == victim.query_id)
    assert "ConnectionError" in bad.error and not bad.passed
    rag = result.summary.conditions["rag"]
    assert rag.retriever_errors == 1 and rag.agent_errors == 0
    assert rag.n == 3 and rag.passed == 2
    assert result.summary.retrieval.errors == 1
    assert result.summary.llm.calls == 2, "no generation for the query the retriever failed on"
    assert (
        result.summary.run.retriever
        == "tests.test_plugins:test_retriever_error_inside_evaluate.<locals>.flaky"
    )


def test_resume_makes_no_new_agent_calls(tmp_path: Path) -> None:
    calls: list[str] = []

    def agent(task: Task) -> str:
        calls.append(task.task_id)
        return copy_context(task)

    first = _evaluate(tmp_path, agent=agent)
    assert len(calls) == 6
    again = _evaluate(tmp_path, agent=agent, resume=True)
    assert len(calls) == 6, "resumed records are not regenerated"
    assert _stable(again.records) == _stable(first.records)
    assert again.summary.conditions == first.summary.conditions
    assert len((tmp_path / "run" / "records.jsonl").read_text().splitlines()) == 6


MODULE = """
from agentbench import load_pool

_POOL = load_pool("core")
_CANONICAL = {q.query: q.correct_corpus_ids[0] for q in _POOL.queries}


def retriever(query, k):
    return [(_CANONICAL[query], 1.0)]


def agent(task):
    return task.context[0]
"""


def test_cli_with_module_plugins(tmp_path: Path) -> None:
    (tmp_path / "mymod.py").write_text(MODULE)
    env = {"PYTHONPATH": str(tmp_path), "AGENTBENCH_CACHE_DIR": str(tmp_path / "cache")}
    run_dir = tmp_path / "run"
    res = run_cli(
        "run",
        "--retriever",
        "mymod:retriever",
        "--agent",
        "mymod:agent",
        "--pool",
        "core",
        "--limit",
        "2",
        "--conditions",
        "rag,oracle",
        "--sandbox",
        "process",
        "--run-dir",
        str(run_dir),
        "--store-dir",
        str(tmp_path / "stores"),
        env=env,
    )
    assert res.returncode == 0, res.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["run"]["agent"] == "mymod:agent"
    assert summary["run"]["retriever"] == "mymod:retriever"
    assert summary["retrieval"]["metrics"]["exec@1"] == 1.0
    assert summary["conditions"]["rag"]["pass_rate"] == 1.0 and summary["conditions"]["rag"]["n"] == 2
    assert summary["conditions"]["oracle"]["pass_rate"] == 1.0

    out = tmp_path / "scores"
    res = run_cli(
        "retrieve",
        "--retriever",
        "mymod:retriever",
        "--limit",
        "3",
        "--sandbox",
        "process",
        "--out",
        str(out),
        env=env,
    )
    assert res.returncode == 0, res.stderr
    files = list(out.glob("*.json"))
    assert len(files) == 1
    data = json.loads(files[0].read_text())
    assert data["model"] == "mymod:retriever" and data["n_queries"] == 3
    assert data["metrics"]["exec@1"] == 1.0 and data["errors"] == []


def test_custom_prompt_file_with_builtin_agent(tmp_path: Path) -> None:
    from .test_pipeline import Copycat  # the scripted provider: replies with the first context snippet

    handler = Copycat()
    register_provider("promptcat", handler)
    prompt = tmp_path / "prompt.md"
    prompt.write_text(
        textwrap.dedent(
            """\
            <!-- system -->
            You are terse.
            <!-- user -->
            PLATYPUS-MARKER: $task

            $context

            ```python
            $signature
            ```
            """
        )
    )
    config = RunConfig(
        llm="promptcat/m",
        embedder="bm25",
        conditions=["oracle", "distractor"],
        limit=2,
        sandbox="process",
        prompt=str(prompt),
        run_dir=str(tmp_path / "run"),
        store_dir=str(tmp_path / "stores"),
    )
    result = run_pipeline(config, client=LLMClient("promptcat/m", concurrency=2), show_progress=False)
    assert len(result.records) == 4 and handler.calls == 4
    for r in result.records:
        assert [m["role"] for m in r.messages] == ["system", "user"]
        assert r.messages[0]["content"] == "You are terse."
        assert r.messages[1]["content"].startswith("PLATYPUS-MARKER: ")
        assert "Write a Python function" not in r.messages[1]["content"]  # not the default template
    assert result.summary.conditions["oracle"].pass_rate == 1.0
    assert result.summary.conditions["distractor"].pass_rate == 0.0


def test_cli_retrieve_reports_per_query_failures(tmp_path: Path) -> None:
    (tmp_path / "flaky.py").write_text(
        textwrap.dedent(
            """
            def retriever(query, k):
                if query.startswith("Reverse the byte order"):
                    raise ValueError("index offline")
                return []
            """
        )
    )
    pool = agentbench.load_pool("core")
    failing = [q.query_id for q in pool.queries[:40] if q.query.startswith("Reverse the byte order")]
    env = {"PYTHONPATH": str(tmp_path), "AGENTBENCH_CACHE_DIR": str(tmp_path / "cache")}
    args = ["retrieve", "--retriever", "flaky:retriever", "--limit", "40", "--sandbox", "process"]
    res = run_cli(*args, "--out", str(tmp_path / "out"), env=env)
    assert res.returncode == 0, res.stderr
    assert failing, "the core pool's first 40 queries include the byte-order task"
    assert f"failed on {len(failing)} of 40 queries" in res.stdout
    assert "ValueError: index offline" in res.stdout
    res = run_cli(*args, "--out", str(tmp_path / "out2"), "--json", env=env)
    assert json.loads(res.stdout)["results"][0]["errors"] == len(failing)
