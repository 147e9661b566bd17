"""Constrained decoding with the real local model (local/qwen2.5-coder-0.5b): llama.cpp's own grammar
engine admits exactly what agent/grammar.py's Python equivalent admits, every constrained reply of the
tool loop parses, the last reply may only submit or answer, and a rerun replays with zero LLM calls."""

from __future__ import annotations

import asyncio
import ctypes
import math
from pathlib import Path

import pytest

from agentbench.agent import Agent, Task
from agentbench.agent.grammar import reply_grammar
from agentbench.agent.tools import TOOL_SCHEMAS, Budget, SearchResult, TestOutcome, Tools, parse_text_calls
from agentbench.llm import LLMClient

from .test_agent_local import MODEL, model_ready  # noqa: F401 (fixture)
from .test_grammar import ADVERSARIAL, FN, VALID

pytestmark = pytest.mark.slow
MAX_TOKENS = 192


@pytest.fixture(scope="module")
def engine(model_ready: None):  # noqa: F811
    """``accepts(gbnf, text)`` by llama.cpp's grammar sampler over the model's vocabulary."""
    import llama_cpp
    from llama_cpp import Llama

    from agentbench.llm.weights import ensure_model

    llm = Llama(model_path=str(ensure_model(MODEL)), vocab_only=True, verbose=False)
    vocab = llm._model.vocab
    eos = llama_cpp.llama_vocab_eos(vocab)

    def accepts(gbnf: str, text: str) -> bool:
        sampler = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode(), b"root")
        assert sampler, "llama.cpp could not parse the grammar"
        data = (llama_cpp.llama_token_data * 1)()
        try:
            for token in [*llm.tokenize(text.encode(), add_bos=False, special=True), eos]:
                data[0].id, data[0].logit, data[0].p = token, 0.0, 0.0
                candidates = llama_cpp.llama_token_data_array(data, 1, -1, False)
                llama_cpp.llama_sampler_apply(sampler, ctypes.byref(candidates))
                if math.isinf(data[0].logit):  # the grammar masked the token out
                    return False
                if token != eos:
                    llama_cpp.llama_sampler_accept(sampler, token)
            return True  # every token allowed, and the end of the reply too
        finally:
            llama_cpp.llama_sampler_free(sampler)

    return accepts


def test_llama_cpp_agrees_with_the_python_equivalent(engine) -> None:
    grammar = reply_grammar(TOOL_SCHEMAS, FN)
    for reply in VALID:
        assert engine(grammar.gbnf, reply), reply
    for what, reply in ADVERSARIAL.items():
        assert not engine(grammar.gbnf, reply), what
    final = reply_grammar(TOOL_SCHEMAS, FN, ("submit",))
    assert engine(final.gbnf, VALID[1]) and not engine(final.gbnf, VALID[0])


TASKS = [
    (
        "q_add",
        "Return the sum of two integers.",
        "def add_numbers(a, b):\n    return a + b\n",
        "add_numbers(2, 3) == 5",
    ),
    (
        "q_even",
        "Return True when n is even.",
        "def is_even(n):\n    return n % 2 == 0\n",
        "is_even(4) is True",
    ),
]


def _task(task_id: str, text: str, canonical: str, check: str) -> Task:
    name = canonical.split("(")[0].removeprefix("def ")
    test = f"assert {check}"

    def run_tests(code: str) -> list[TestOutcome]:
        namespace: dict = {}
        try:
            exec(code, namespace)  # the tests' own trivial tasks, in-process
            exec(test, namespace)
            return [TestOutcome(test, "pass")]
        except AssertionError:
            return [TestOutcome(test, "FAIL")]
        except Exception as exc:
            return [TestOutcome(test, f"ERROR:{type(exc).__name__}")]

    tools = Tools(lambda q, k: [SearchResult("c_1", canonical, 1.0)], run_tests, visible_tests=(test,))
    task = Task.from_canonical(task_id, text, canonical, tests=[test])
    assert task.function_name == name
    return task.with_tools(tools)


def _uncached(trajectory: list[dict]) -> list[dict]:
    return [{k: v for k, v in step.items() if k != "cached"} for step in trajectory]


def test_constrained_replies_parse_every_time_and_replay_from_the_cache(
    model_ready: None,  # noqa: F811
    tmp_path: Path,
) -> None:
    budgets = [Budget(max_turns=1), Budget(max_turns=3)]  # the first task's only reply is its last

    def run() -> tuple[LLMClient, list]:
        client = LLMClient(MODEL, cache=tmp_path / "cache", max_tokens=MAX_TOKENS, concurrency=1)
        return client, [
            asyncio.run(Agent(client, budget=b).generate(_task(*t), "agent"))
            for t, b in zip(TASKS, budgets, strict=True)
        ]

    client, first = run()
    replies, seen = 0, set()
    for generation, budget in zip(first, budgets, strict=True):
        assert generation.error is None and generation.tool_stats["constrained"]
        i, tested = 0, False
        for step in generation.trajectory:
            if step["type"] == "tool":
                tested = tested or step["name"] == "run_tests"
            if step["type"] != "assistant":
                continue
            final, i = i == budget.max_turns - 1, i + 1
            label = "final" if final else ("reply" if tested else "test_first")  # no answer before a test
            assert step["grammar"] == label
            seen.add(label)
            if step["completion_tokens"] >= MAX_TOKENS:
                continue  # cut off by max_tokens: a prefix of the language, not a whole reply
            replies += 1
            offered = {"final": ("submit",), "test_first": ("search_code", "run_tests"), "reply": None}[label]
            grammar = reply_grammar(TOOL_SCHEMAS, generation.function_name, offered, label != "test_first")
            assert grammar.accepts(step["content"]), step["content"]
            calls = parse_text_calls(step["content"])
            if calls:  # exactly one call, to an offered tool, with arguments
                (call,) = calls
                assert call.name in grammar.tools and call.arguments is not None and not call.lenient
            else:
                assert generation.code, step["content"]  # a final answer: its code block is the submission
        stats = generation.tool_stats
        assert stats["invalid_tool_calls"] == 0 and stats["valid_tool_calls"] == stats["tool_calls"]
    assert replies >= 2 and "final" in seen and "test_first" in seen
    assert client.stats.calls == sum(g.tool_stats["turns"] for g in first)

    again_client, again = run()  # a resumed run: every reply from the cache
    assert again_client.stats.calls == 0 and again_client.stats.cache_hits == client.stats.calls
    assert [_uncached(g.trajectory) for g in again] == [_uncached(g.trajectory) for g in first]
    assert all(s["cached"] for g in again for s in g.trajectory if s["type"] == "assistant")
    assert [g.code for g in again] == [g.code for g in first]
