"""Execution-aware reranking: the visible/held-out split, leak-freedom, the rerankers and their registry,
the CLIs.

Candidate code runs in the real process sandbox; where an embedder is needed the real minilm model is
used (its vectors are cached), bm25 elsewhere for speed. End-to-end runs use a scripted LLM that copies
the first context snippet, so rag passes exactly when its top-1 passes the held-out asserts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentbench.errors import ConfigError
from agentbench.execution import ProcessExecutor
from agentbench.execution.cache import ExecCache
from agentbench.pools import load_pool
from agentbench.pools.split import VisibleTests, split_tests
from agentbench.retrieval import evaluate_retrieval
from agentbench.retrieval.rerank import (
    Candidate,
    ConsensusStats,
    Reranker,
    RerankerUnavailable,
    Reranking,
    RerankInput,
    RerankOutcome,
    RerankStats,
    Sandbox,
    VisibleTestsReranker,
    VisibleTestsStats,
    make_reranking,
    parse_reranker,
    register,
    registered,
)
from agentbench.retrieval.rerank.ce import CrossEncoderReranker
from agentbench.retrieval.rerank.consensus import ConsensusReranker, consensus_scores, derive_inputs
from agentbench.retrieval.results import RetrievalResult
from agentbench.retrieval.settings import RetrievalSettings

from .conftest import ROOT, write_rows

# ---------------------------------------------------------------- a constructed pool

STEP = "def step(x):\n    return 0 if x < 0 else (1 if x < 10 else 2)\n"
# each near-clone deviates from STEP on different inputs
STEP_BUGS = [
    "def step(x):\n    return 0 if x <= 0 else (1 if x < 10 else 2)\n",  # at 0
    "def step(x):\n    return 0 if x < 0 else (1 if x < 9 else 2)\n",  # at 9
    "def step(x):\n    return 0 if x < 0 else (1 if x < 10 else 3)\n",  # from 10 on
    "def step(x):\n    return 0 if x < -1 else (1 if x < 10 else 2)\n",  # at -1
]
STEP_TESTS = [
    "assert step(-5) == 0",
    "assert step(0) == 1",
    "assert step(5) == 1",
    "assert step(9) == 1",
    "assert step(10) == 2",
    "assert step(-1) == 0",
    "assert step(40) == 2",
    "assert step(3) == 1",
]
ADD = "def add_one(x):\n    return x + 1\n"
ADD_ALT = "def add_one(x):\n    return 1 + x\n"
ADD_BUG = "def add_one(x):\n    return x - 1\n"
ADD_TWICE = "def add_one(x):\n    return x * 2\n"
ADD_TESTS = [f"assert add_one({x}) == {x + 1}" for x in (0, 2, 3, 5, 10, 20)]


def _pool_rows() -> dict[str, list[dict]]:
    corpus = [
        {"corpus_id": "c_0001", "code": STEP, "label": "correct", "source_entry_id": "step"},
        *(
            {
                "corpus_id": f"c_000{i + 2}",
                "code": code,
                "label": "incorrect",
                "bug_type": "off_by_one",
                "source_entry_id": "step",
            }
            for i, code in enumerate(STEP_BUGS)
        ),
        {"corpus_id": "c_0006", "code": ADD, "label": "correct", "source_entry_id": "add"},
        {"corpus_id": "c_0007", "code": ADD_ALT, "label": "correct", "source_entry_id": "add2"},
        {
            "corpus_id": "c_0008",
            "code": ADD_BUG,
            "label": "incorrect",
            "bug_type": "wrong_operator",
            "source_entry_id": "add",
        },
    ]
    queries = [
        {
            "query_id": "q_0001",
            "query": "classify an integer step: negative 0, below ten 1, otherwise 2",
            "test_suite": STEP_TESTS,
            "correct_corpus_ids": ["c_0001"],
            "paired_distractor_corpus_ids": ["c_0002", "c_0003", "c_0004", "c_0005"],
            "metadata": {"domain": "math_numerical", "function_name": "step"},
        },
        {
            "query_id": "q_0002",
            "query": "add one to a number",
            "test_suite": ADD_TESTS,
            "correct_corpus_ids": ["c_0006"],
            "paired_distractor_corpus_ids": ["c_0008"],
            "metadata": {"domain": "math_numerical", "function_name": "add_one"},
        },
    ]
    return {"queries.jsonl": queries, "corpus.jsonl": corpus}


@pytest.fixture
def pool_dir(tmp_path: Path) -> Path:
    return write_rows(tmp_path / "rr", _pool_rows())


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def executor():
    with ProcessExecutor(workers=2) as ex:
        yield ex


def _sandbox(executor, tmp_path: Path) -> Sandbox:
    return Sandbox(executor, ExecCache(tmp_path / "exec.sqlite"))


def _input(tests, codes, name="add_one") -> RerankInput:
    cands = tuple(Candidate(f"c{i}", code, 1.0 - i / 100) for i, code in enumerate(codes))
    return RerankInput("q", "a query", name, tuple(tests), cands)


# ---------------------------------------------------------------- the split


def test_split_is_deterministic_partitions_and_holds_one_out() -> None:
    tests = [f"assert f({i}) == {i}" for i in range(10)]
    half = VisibleTests.parse("0.5")
    a = split_tests(tests, half, 0, "q_0001")
    assert a == split_tests(tests, half, 0, "q_0001")
    assert len(a.visible) == 5 and len(a.held_out) == 5
    assert set(a.visible) | set(a.held_out) == set(tests) and not set(a.visible) & set(a.held_out)
    assert [tests[i] for i in a.visible_idx] == list(a.visible)
    assert list(a.held_out) == [t for t in tests if t not in a.visible]  # suite order kept
    others = {split_tests(tests, half, seed, "q_0001").visible_idx for seed in range(8)}
    others |= {split_tests(tests, half, 0, f"q_{i:04d}").visible_idx for i in range(8)}
    assert len(others) > 1, "seed and query id change the split"
    # at least one assert always stays held out
    assert len(split_tests(tests, VisibleTests.parse("50"), 0, "q").held_out) == 1
    assert split_tests(tests[:1], VisibleTests.parse("0.9"), 0, "q").held_out == tuple(tests[:1])
    assert len(split_tests(tests[:2], VisibleTests.parse("0.1"), 0, "q").visible) == 1
    assert split_tests(tests, VisibleTests.parse("0"), 0, "q").visible == ()


@pytest.mark.parametrize("bad", ["1.0", "1.5", "-1", "abc", "", "nan"])
def test_visible_tests_rejects_bad_values(bad: str) -> None:
    with pytest.raises(ConfigError, match="--visible-tests"):
        VisibleTests.parse(bad)


def test_unknown_reranker_names_every_form() -> None:
    with pytest.raises(ConfigError) as err:
        parse_reranker("magic")
    for form in ("exec-visible", "exec-consensus", "ce:<model"):
        assert form in str(err.value)
    with pytest.raises(ConfigError, match="rerank-k"):
        make_reranking("exec-visible", "0.5", 0)


def test_settings_give_the_rerank_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    assert RetrievalSettings().reranking() is None
    stage = RetrievalSettings(rerank="exec-visible", rerank_k=3, visible_tests="2", seed=5).reranking()
    assert isinstance(stage.reranker, VisibleTestsReranker)
    assert (stage.k, str(stage.visible), stage.seed, stage.skipped) == (3, "2", 5, None)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    skipped = RetrievalSettings(rerank="ce:no-such-org/no-such-cross-encoder").reranking()
    assert skipped.reranker is None and skipped.name is None and "skipping reranking" in skipped.skipped


class Shortest(Reranker):
    """A reranker from outside the package: shortest code first."""

    name = form = "shortest"

    def rerank(self, inputs, sandbox):
        return [
            RerankOutcome(sorted(range(len(i.candidates)), key=lambda j: len(i.candidates[j].code)))
            for i in inputs
        ]


def test_a_registered_reranker_plugs_in_without_editing_the_stage(
    monkeypatch: pytest.MonkeyPatch, pool_dir: Path, executor, tmp_path: Path
) -> None:
    from agentbench.retrieval.rerank import registry

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))  # undone after the test
    assert list(registered()) == ["exec-visible", "exec-consensus", "ce:<model-name-or-path>"]
    with pytest.raises(ConfigError, match="shortest"):
        RetrievalSettings(rerank="shortest")
    register(Shortest)
    with pytest.raises(ConfigError, match="already registered"):
        register(Shortest)
    with pytest.raises(ConfigError) as err:
        parse_reranker("magic")
    assert "shortest" in str(err.value)
    stage = RetrievalSettings(rerank=" shortest ", rerank_k=3).reranking()
    assert isinstance(stage.reranker, Shortest)
    res = evaluate_retrieval(
        load_pool(pool_dir),
        "bm25",
        executor,
        rerank=stage,
        progress=False,
        n_resamples=20,
        exec_cache=ExecCache(tmp_path / "exec.sqlite"),
    )
    assert res.rerank.name == "shortest" and type(res.rerank.stats) is RerankStats
    for q in res.rerank.per_query:
        lengths = [len(load_pool(pool_dir).snippet(t.corpus_id).code) for t in q.top_results[:3]]
        assert lengths == sorted(lengths)


class Spy(Reranker):
    """Records what it was given and reverses the order."""

    name = "spy"

    def __init__(self) -> None:
        self.seen: list[RerankInput] = []

    def rerank(self, inputs, sandbox):
        self.seen.extend(inputs)
        return [RerankOutcome(list(reversed(range(len(i.candidates))))) for i in inputs]


def test_reranker_sees_only_visible_asserts(pool_dir: Path, executor, tmp_path: Path) -> None:
    pool = load_pool(pool_dir)
    spy = Spy()
    reranking = Reranking(spy, VisibleTests.parse("0.5"), k=3, seed=7)
    res = evaluate_retrieval(
        pool,
        "bm25",
        executor,
        exec_cache=ExecCache(tmp_path / "exec.sqlite"),
        rerank=reranking,
        progress=False,
        n_resamples=50,
    )
    assert len(spy.seen) == len(pool.queries)
    for q, seen in zip(pool.queries, spy.seen, strict=True):
        split = reranking.split(q)
        assert seen.visible_tests == split.visible and len(split.held_out) >= 1
        dumped = repr(seen)
        for held in split.held_out:
            assert held not in dumped, "a held-out assert reached the reranker"
        assert [c.corpus_id for c in seen.candidates] == [
            h.corpus_id for h in next(p for p in res.per_query if p.query_id == q.query_id).top_results
        ][:3]
    # metrics are computed on held-out asserts, for the baseline and the reranked order alike
    assert res.run_info.scored_on == "held_out" and res.rerank.scored_on == "held_out"
    for entry in (*res.per_query, *res.rerank.per_query):
        q = next(q for q in pool.queries if q.query_id == entry.query_id)
        n_held = len(reranking.split(q).held_out)
        assert all(len(t.test_results) == n_held for t in entry.top_results)
    reordered = res.rerank.per_query[0].top_results
    baseline = res.per_query[0].top_results
    assert [t.corpus_id for t in reordered[:3]] == [t.corpus_id for t in baseline[:3]][::-1]
    assert [t.corpus_id for t in reordered[3:]] == [t.corpus_id for t in baseline[3:]]
    assert [t.rank for t in reordered] == list(range(1, len(reordered) + 1))
    # a reranker without statistics writes {}
    assert type(res.rerank.stats) is RerankStats and res.rerank.to_json_dict()["stats"] == {}


# ---------------------------------------------------------------- exec-visible


def test_exec_visible_moves_passing_first_and_ties_keep_vector_order(executor, tmp_path: Path) -> None:
    codes = [ADD_BUG, STEP, ADD, ADD_TWICE, ADD_ALT]  # vector order
    outcome = VisibleTestsReranker().rerank([_input(ADD_TESTS[:3], codes)], _sandbox(executor, tmp_path))[0]
    assert outcome.order == [2, 4, 0, 1, 3]
    assert outcome.details["passes_visible"] == [False, False, True, False, True]
    # nothing passes, or nothing is visible: vector order stays
    none_pass = VisibleTestsReranker().rerank(
        [_input(ADD_TESTS[:2], [ADD_BUG, STEP, ADD_TWICE])], _sandbox(executor, tmp_path)
    )
    assert none_pass[0].order == [0, 1, 2]
    nothing_visible = VisibleTestsReranker().rerank(
        [_input([], [ADD_BUG, ADD])], _sandbox(executor, tmp_path)
    )
    assert nothing_visible[0].order == [0, 1]


# ---------------------------------------------------------------- exec-consensus


def test_inputs_come_from_arguments_never_expected_values() -> None:
    tests = ["assert f(3, [1, 2], key='ab') == 987654", "assert g(1) == f(-2**31, [], key='') + 1"]
    inputs = derive_inputs(tests, "f", max_inputs=100)
    assert inputs[:2] == ["f(3, [1, 2], key='ab')", "f(-2**31, [], key='')"]
    assert not any("987654" in i for i in inputs)
    for expected in ("f(0, [1, 2], key='ab')", "f(-1, [1, 2], key='ab')", "f(4, [1, 2], key='ab')"):
        assert expected in inputs  # boundary integers and the value +-1
    for expected in ("f(3, [], key='ab')", "f(3, [1], key='ab')", "f(3, [2, 1], key='ab')"):
        assert expected in inputs  # empty, one-element, reversed collections
    assert "f(3, [1, 2], key='')" in inputs and "f(-2147483647, [], key='')" in inputs
    assert len(inputs) == len(set(inputs))
    capped = derive_inputs(tests, "f", max_inputs=6)
    assert capped[:2] == inputs[:2] and len(capped) == 6
    assert {"f(0, [1, 2], key='ab')", "f(3, [], key='ab')"} <= set(capped), (
        "a cap keeps every argument varied"
    )
    assert derive_inputs(["assert h(1) == 2"], "f") == []


def test_consensus_scores_count_agreement() -> None:
    assert consensus_scores([["a", "b"], ["a", "c"], ["a", "b"], None]) == [3, 2, 3, -1]
    assert consensus_scores([None, None]) == [-1, -1]


def test_consensus_picks_the_canonical_when_it_is_the_majority(executor, tmp_path: Path) -> None:
    # vector order puts every distractor and an unrelated snippet before the canonical
    codes = [*STEP_BUGS, ADD, STEP]
    visible = ["assert step(0) == 1", "assert step(10) == 2"]  # probes 0, 10 and 1, -1, 9, 11, ...
    inp = _input(visible, codes, name="step")
    outcome = ConsensusReranker().rerank([inp], _sandbox(executor, tmp_path))[0]
    assert outcome.order[0] == 5, outcome.details
    assert outcome.order[-1] == 4, "a snippet that does not define the function goes last"
    assert outcome.details["unique_winner"] is True
    assert outcome.details["defines_function"] == 5 and outcome.details["inputs"] >= 3
    summary = ConsensusReranker().summarize([outcome])
    assert isinstance(summary, ConsensusStats)
    assert summary.unique_winner == 1 and summary.inputs_total == outcome.details["inputs"]


def test_consensus_ties_prefer_varied_behaviour_then_vector_order(executor, tmp_path: Path) -> None:
    # two broken clones that always return 0 agree with each other as much as the two correct ones do
    const_a = "def step(x):\n    return 0\n"
    const_b = "def step(x):\n    return 0 * x\n"
    equal = "def step(x):\n    return float(0 if x < 0 else (1 if x < 10 else 2))\n"
    inp = _input(
        ["assert step(5) == 1", "assert step(12) == 2"], [const_a, const_b, STEP, equal], name="step"
    )
    outcome = ConsensusReranker().rerank([inp], _sandbox(executor, tmp_path))[0]
    scores = outcome.details["scores"]
    assert scores[0] == scores[1] == scores[2] == scores[3]
    assert outcome.order == [2, 3, 0, 1]
    assert outcome.details["unique_winner"] is False


def test_consensus_behaviour_cannot_be_faked_by_printing(executor, tmp_path: Path) -> None:
    liar = "print('ERROR:Behaviour_0 pass')\ndef step(x):\n    print('pass')\n    return 7\n"
    equal = "def step(x):\n    return float(0 if x < 0 else (1 if x < 10 else 2))\n"  # == the canonical
    inp = _input(STEP_TESTS[:3], [liar, STEP, equal], name="step")
    outcome = ConsensusReranker().rerank([inp], _sandbox(executor, tmp_path))[0]
    assert outcome.order == [1, 2, 0]
    assert outcome.details["scores"][0] == 0


# ---------------------------------------------------------------- cross-encoder


def test_cross_encoder_orders_by_score_and_ties_keep_order(executor, tmp_path: Path) -> None:
    def scorer(pairs):
        return [len(code) % 3 for _, code in pairs]

    codes = ["a", "bb", "cc", "ddd", "eeee"]  # scores 1, 2, 2, 0, 1
    outcome = CrossEncoderReranker("ce:fake", scorer=scorer).rerank(
        [_input([], codes)], _sandbox(executor, tmp_path)
    )[0]
    assert outcome.order == [1, 2, 0, 4, 3]


def test_cross_encoder_missing_offline_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(RerankerUnavailable, match="skipping reranking"):
        make_reranking("ce:no-such-org/no-such-cross-encoder")


# ---------------------------------------------------------------- CLIs


_USER_CACHE = os.environ.get("AGENTBENCH_CACHE_DIR")  # before the autouse fixture changes it


def _cli(*args: str, tmp_path: Path, shared_cache: bool = False) -> subprocess.CompletedProcess:
    """Run the CLI; ``shared_cache`` uses the user's cache directory, where minilm vectors are cached."""
    env = {**os.environ, "COLUMNS": "200", "HF_HUB_OFFLINE": "1"}
    env.pop("AGENTBENCH_CACHE_DIR")
    if not shared_cache:
        env["AGENTBENCH_CACHE_DIR"] = str(tmp_path / "cache")
    elif _USER_CACHE:
        env["AGENTBENCH_CACHE_DIR"] = _USER_CACHE
    return subprocess.run(
        [sys.executable, "-m", "agentbench", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=900,
    )


@pytest.mark.parametrize("name", ["exec-visible", "exec-consensus"])
def test_cli_retrieve_prints_before_and_after(name: str, pool_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = _cli(
        "retrieve",
        "--pool",
        str(pool_dir),
        "--embedder",
        "minilm",
        "--rerank",
        name,
        "--visible-tests",
        "3",
        "--sandbox",
        "process",
        "--store-dir",
        str(tmp_path / "stores"),
        "--out",
        str(out),
        tmp_path=tmp_path,
        shared_cache=True,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads((out / "minilm.json").read_text())
    before, after = result["metrics"]["exec@1"], result["rerank"]["metrics"]["exec@1"]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("exec@1 on held-out asserts"))
    assert f"before {before:.3f}" in line and f"after {after:.3f}" in line and name in line
    assert "before -> after" in proc.stdout and "cost: executions" in proc.stdout
    rr = result["rerank"]
    assert rr["name"] == name and rr["visible_tests"] == "3" and rr["n_visible"] == 6
    assert rr["cost"]["executions"] == sum(min(10, 8) for _ in range(2)) and rr["cost"]["seconds"] >= 0
    if name == "exec-consensus":
        assert "unique consensus winner" in proc.stdout and rr["stats"]["inputs_total"] > 0
    # read back, the statistics are the reranker's own model, and they write the same JSON
    typed = RetrievalResult.model_validate(result)
    assert (
        type(typed.rerank.stats)
        is {"exec-visible": VisibleTestsStats, "exec-consensus": ConsensusStats}[name]
    )
    assert typed.to_json_dict() == result


def test_cli_retrieve_skips_missing_cross_encoder_with_one_line(pool_dir: Path, tmp_path: Path) -> None:
    proc = _cli(
        "retrieve",
        "--pool",
        str(pool_dir),
        "--embedder",
        "bm25",
        "--rerank",
        "ce:no-such-org/no-such-cross-encoder",
        "--sandbox",
        "process",
        "--out",
        str(tmp_path / "out"),
        tmp_path=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if "rerank" in x]
    assert len(lines) == 1 and "skipping reranking" in lines[0] and "Traceback" not in proc.stderr
    # as in `agentbench run`: the held-out split is kept, so the numbers stay on the same asserts
    rr = json.loads((tmp_path / "out" / "bm25.json").read_text())["rerank"]
    assert "exec@1" in proc.stdout and rr["name"] is None and "skipping reranking" in rr["skipped"]
    assert "reranking skipped" in proc.stdout


def test_cli_bad_rerank_values_are_one_line_errors(pool_dir: Path, tmp_path: Path) -> None:
    for extra in (["--rerank", "magic"], ["--rerank", "exec-visible", "--visible-tests", "2.5"]):
        proc = _cli("retrieve", "--pool", str(pool_dir), "--embedder", "bm25", *extra, tmp_path=tmp_path)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------- end to end

DRIVER = """
import re, sys
from agentbench.llm._litellm import litellm_module, register_provider
litellm = litellm_module()

class Copycat(litellm.CustomLLM):
    async def acompletion(self, model, messages, model_response, optional_params, **_):
        user = messages[-1]["content"]
        blocks = re.findall(r"```python\\n(.*?)```", user, re.S)
        text = blocks[0] if len(blocks) > 1 else blocks[0].rstrip() + "\\n    return None\\n"
        model_response.choices[0].message.content = "```python\\n" + text + "```"
        model_response.usage = litellm.Usage(prompt_tokens=11, completion_tokens=5, total_tokens=16)
        return model_response

register_provider("copycat", Copycat())
from agentbench.cli import main
sys.argv = ["agentbench", *sys.argv[1:]]
main()
"""


def test_run_with_rerank_scores_every_condition_on_held_out_asserts(tmp_path: Path) -> None:
    driver = tmp_path / "driver.py"
    driver.write_text(textwrap.dedent(DRIVER))
    run_dir = tmp_path / "run"
    args = [
        "run",
        "--llm",
        "copycat/m",
        "--embedder",
        "bm25",
        "--limit",
        "8",
        "--conditions",
        "rag,oracle",
        "--rerank",
        "exec-visible",
        "--sandbox",
        "process",
        "--run-dir",
        str(run_dir),
        "--store-dir",
        str(tmp_path / "stores"),
    ]
    env = {**os.environ, "AGENTBENCH_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "200"}
    proc = subprocess.run(
        [sys.executable, str(driver), *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=900
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    retrieval = json.loads((run_dir / "retrieval.json").read_text())
    conditions = summary["conditions"]
    assert list(conditions) == ["rag", "rag_reranked", "oracle"]
    # the copycat copies the top-1, so rag passes exactly when the top-1 passes the held-out asserts
    assert conditions["rag"]["pass_rate"] == pytest.approx(retrieval["metrics"]["exec@1"])
    assert conditions["rag_reranked"]["pass_rate"] == pytest.approx(retrieval["rerank"]["metrics"]["exec@1"])
    assert conditions["oracle"]["pass_rate"] == 1.0
    rr = summary["rerank"]
    assert rr["name"] == "exec-visible" and rr["scored_on"] == "held_out"
    assert rr["rag_reranked_pass_rate"] == conditions["rag_reranked"]["pass_rate"]
    assert rr["exec@1_after"] >= rr["exec@1_before"]
    assert summary["side_by_side"]["rag_reranked_pass_rate"] == conditions["rag_reranked"]["pass_rate"]
    pool = load_pool("core")
    reranking = Reranking(None, VisibleTests.parse("0.5"), seed=0)
    held = {q.query_id: len(reranking.split(q).held_out) for q in pool.queries[:8]}
    for line in (run_dir / "records.jsonl").read_text().splitlines():
        rec = json.loads(line)
        assert len(rec["results"]) == held[rec["query_id"]], "records are scored on held-out asserts"
    assert "end-to-end pass rate: rag" in proc.stdout and "rag_reranked" in proc.stdout
    config = json.loads((run_dir / "config.json").read_text())
    assert config["rerank"] == "exec-visible" and "rag_reranked" in config["conditions"]
