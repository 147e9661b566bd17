"""Tokens/s of raw llama-cpp-python vs the same model through agentbench's LiteLLM ``local`` provider.

    python bench/local_llm.py [--model local/qwen2.5-coder-0.5b] [--rounds 1] [--max-tokens 64]

Both paths share one loaded ``Llama``; the KV cache is reset before every timed call so neither side
benefits from prompt-prefix reuse, and the order alternates between rounds. Decoding is greedy, so both
produce the same tokens. Throughput = completion tokens / wall time of the call (prompt evaluation
included). Target: provider/raw >= 0.9. Exit code 1 when below.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from agentbench.agent import LLMClient
from agentbench.agent._litellm import litellm_module, register_provider
from agentbench.agent.local import llama_threads, load_local_model

TASKS = [
    "Write a Python function `is_palindrome(s)` that ignores case and non-alphanumeric characters.",
    "Write a Python function `popcount32(value)` counting the 1 bits of a 32-bit two's complement integer.",
    "Write a Python function `merge_intervals(intervals)` merging overlapping closed intervals.",
    "Write a Python function `rle_encode(s)` returning the run-length encoding like 'a3b1'.",
    "Write a Python function `days_in_month(year, month)` handling leap years.",
]
SYSTEM = "You are an expert Python programmer. Reply with one python code block."


def messages(task: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]


def provider_overhead_ms(litellm: Any, loop: asyncio.AbstractEventLoop, n: int = 20) -> float:
    """Milliseconds per call that LiteLLM and LLMClient add around a provider that returns instantly."""

    class Instant(litellm.CustomLLM):
        def completion(self, model: str, messages: list, model_response: Any, **_: Any) -> Any:
            model_response.choices[0].message.content = "def f():\n    return 1\n"
            model_response.usage = litellm.Usage(prompt_tokens=60, completion_tokens=64, total_tokens=124)
            return model_response

        async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(self.completion, *args, **kwargs)

    register_provider("instant", Instant())
    client = LLMClient("instant/x", cache=False)
    for _ in range(3):
        loop.run_until_complete(client.complete(messages(TASKS[0])))
    started = time.perf_counter()
    for i in range(n):
        loop.run_until_complete(client.complete(messages(TASKS[i % len(TASKS)])))
    return (time.perf_counter() - started) / n * 1000


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="local/qwen2.5-coder-0.5b")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()

    litellm = litellm_module()
    started = time.perf_counter()
    llama, lock = load_local_model(args.model)
    print(f"model {args.model}: loaded in {time.perf_counter() - started:.1f}s, {llama_threads()} threads")
    client = LLMClient(args.model, max_tokens=args.max_tokens, cache=False, concurrency=1)

    def raw(task: str) -> int:
        with lock:
            out = llama.create_chat_completion(
                messages=messages(task), temperature=0.0, max_tokens=args.max_tokens, seed=0
            )
        return int(out["usage"]["completion_tokens"])

    def via_litellm(task: str) -> int:
        resp = litellm.completion(
            model=args.model, messages=messages(task), temperature=0.0, max_tokens=args.max_tokens, seed=0
        )
        return int(resp.usage.completion_tokens)

    loop = asyncio.new_event_loop()  # one loop for the whole run, as in `agentbench run`

    def via_client(task: str) -> int:
        result = loop.run_until_complete(client.complete(messages(task)))
        if not result.ok:
            raise SystemExit(f"provider error: {result.error}")
        return result.completion_tokens

    paths = {"raw llama-cpp-python": raw, "litellm.completion": via_litellm, "LLMClient (async)": via_client}
    totals = {name: [0, 0.0] for name in paths}
    raw(TASKS[0])  # warm-up (first call pays for graph allocation)
    for r in range(args.rounds):
        order = list(paths) if r % 2 == 0 else list(reversed(paths))
        for task in TASKS:
            for name in order:
                llama.reset()  # no prompt-prefix reuse for anyone
                t = time.perf_counter()
                tokens = paths[name](task)
                totals[name][1] += time.perf_counter() - t
                totals[name][0] += tokens

    overhead_ms = provider_overhead_ms(litellm, loop)
    rate = {name: tokens / seconds for name, (tokens, seconds) in totals.items()}
    base = rate["raw llama-cpp-python"]
    print(f"{'path':<22} {'tokens':>7} {'seconds':>8} {'tok/s':>7} {'ratio':>6}")
    for name, (tokens, seconds) in totals.items():
        print(f"{name:<22} {tokens:>7} {seconds:>8.2f} {rate[name]:>7.1f} {rate[name] / base:>6.3f}")
    worst = min(rate[name] / base for name in paths if name != "raw llama-cpp-python")
    per_call = totals["raw llama-cpp-python"][1] / (len(TASKS) * args.rounds)
    print(
        f"harness overhead per call without a model (LiteLLM + LLMClient): {overhead_ms:.1f} ms "
        f"= {per_call / (per_call + overhead_ms / 1000):.3f} of raw throughput at {per_call:.1f} s/call"
    )
    print(f"provider/raw ratio: {worst:.3f} (target >= 0.9): {'PASS' if worst >= 0.9 else 'FAIL'}")
    return 0 if worst >= 0.9 else 1


if __name__ == "__main__":
    sys.exit(main())
