"""Tokens/s of the local model: the portable llama-cpp-python build vs a native one, and decoding under the
tool grammar (``local/`` agents, :mod:`agentbench.agent.grammar`) vs unconstrained decoding.

    python bench/local_llm.py [--model local/qwen2.5-coder-1.5b] [--rounds 2] [--max-tokens 64]
                              [--only build|grammar]

**Build.** The installed llama-cpp-python is the portable build (``PORTABLE_CMAKE_ARGS``: AVX2, FMA, F16C,
BMI2, nothing the build host may have beyond that). The native build (``-DGGML_NATIVE=ON``: everything this
CPU advertises) of the same version is compiled once into ``$AGENTBENCH_CACHE_DIR/bench/`` (about six
minutes on two cores) and reused. Each build runs in its own process, raw llama-cpp-python, same GGUF,
same threads, greedy decoding of the same prompts with the KV cache reset before every call; the builds
alternate between rounds. Throughput = completion tokens / wall time of the calls (prompt evaluation
included). Prints ``portable_vs_native_tokens_per_s=<r>`` (goal >= 0.85). Where the native build cannot
run (it dies of SIGILL on a CPU that advertises AMX but cannot execute it), says so and prints
``portable_vs_native_tokens_per_s=nan``: the portable build is then the only one that works.

**Grammar.** The portable build answers the agent's first turn (the tool protocol in the system prompt,
one task per prompt) with and without the reply grammar, alternating per prompt; constrained decoding
is done as the local worker does it (:class:`agentbench.llm.local_worker.GrammarFirst`). Throughput is decode
speed: completion tokens after the first / seconds from the first token to the last (streamed), so
prompt evaluation, which the grammar does not touch, does not dilute the ratio. Prints
``constrained_vs_unconstrained_tokens_per_s=<r>`` (goal >= 0.85: the grammar costs at most 15%).

Exit code 1 when a measured ratio is below its goal.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

TASKS = [
    "Write a Python function `is_palindrome(s)` that ignores case and non-alphanumeric characters.",
    "Write a Python function `popcount32(value)` counting the 1 bits of a 32-bit two's complement integer.",
    "Write a Python function `merge_intervals(intervals)` merging overlapping closed intervals.",
    "Write a Python function `rle_encode(s)` returning the run-length encoding like 'a3b1'.",
    "Write a Python function `days_in_month(year, month)` handling leap years.",
]
SYSTEM = "You are an expert Python programmer. Reply with one python code block."
GOAL = 0.85
GRAMMAR_GOAL = 0.85


def messages(task: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]


def measure(model_path: str, max_tokens: int) -> dict:
    """One pass over the prompts with the llama_cpp importable here (run in a child process)."""
    import llama_cpp
    from llama_cpp import Llama

    from agentbench.llm.local import DEFAULT_CTX, llama_threads

    threads = llama_threads()
    llama = Llama(
        model_path=model_path,
        n_ctx=DEFAULT_CTX,
        n_threads=threads,
        n_threads_batch=threads,
        seed=0,
        verbose=False,
    )
    llama.create_chat_completion(
        messages=messages(TASKS[0]), temperature=0.0, max_tokens=8, seed=0
    )  # warm-up
    tokens, seconds = 0, 0.0
    for task in TASKS:
        llama.reset()
        started = time.perf_counter()
        out = llama.create_chat_completion(
            messages=messages(task), temperature=0.0, max_tokens=max_tokens, seed=0
        )
        seconds += time.perf_counter() - started
        tokens += int(out["usage"]["completion_tokens"])
    info = llama_cpp.llama_print_system_info().decode(errors="replace")
    llama.close()
    return {"tokens": tokens, "seconds": seconds, "library": llama_cpp.__file__, "system_info": info}


def agent_messages(task: str) -> tuple[list[dict[str, str]], str]:
    """The agent's first request for ``task`` (tools in the system prompt) and the function's name."""
    from agentbench.agent.tools import text_protocol

    name = task.split("`")[1].split("(")[0]
    system = "You are an expert Python programmer.\n\n" + text_protocol([f"assert {name} is not None"])
    user = task + " Run it against the visible tests, then submit it."
    return [{"role": "system", "content": system}, {"role": "user", "content": user}], name


def measure_grammar(model_path: str, max_tokens: int) -> dict:
    """Decode speed with and without the reply grammar over the agent prompts (in a child process)."""
    from llama_cpp import Llama

    from agentbench.agent.grammar import reply_grammar
    from agentbench.agent.tools import TOOL_SCHEMAS
    from agentbench.llm.local import DEFAULT_CTX, llama_threads
    from agentbench.llm.local_worker import GrammarFirst

    threads = llama_threads()
    llama = Llama(
        model_path=model_path,
        n_ctx=DEFAULT_CTX,
        n_threads=threads,
        n_threads_batch=threads,
        seed=0,
        verbose=False,
    )
    totals = {"constrained": [0, 0.0], "unconstrained": [0, 0.0]}
    for i, task in enumerate(TASKS):
        chat, name = agent_messages(task)
        modes = ["unconstrained", "constrained"]
        for mode in modes if i % 2 == 0 else modes[::-1]:
            extra: dict = {}
            if mode == "constrained":  # as the local worker decodes: the model's choice checked first
                extra["logits_processor"] = [GrammarFirst(llama, reply_grammar(TOOL_SCHEMAS, name).gbnf)]
            llama.reset()
            stamps = []
            for chunk in llama.create_chat_completion(
                messages=chat, temperature=0.0, max_tokens=max_tokens, seed=0, stream=True, **extra
            ):
                if chunk["choices"][0]["delta"].get("content"):
                    stamps.append(time.perf_counter())
            if len(stamps) > 1:  # a chunk per token; the first follows the prompt's evaluation
                totals[mode][0] += len(stamps) - 1
                totals[mode][1] += stamps[-1] - stamps[0]
    llama.close()
    return {mode: {"tokens": t, "seconds": s} for mode, (t, s) in totals.items()}


def grammar_ratio(model_path: str, rounds: int, max_tokens: int) -> float:
    totals = {"unconstrained": [0, 0.0], "constrained": [0, 0.0]}
    for _ in range(rounds):
        result = run_build("grammar", None, model_path, max_tokens, what="grammar")
        assert result is not None
        for mode, row in result.items():
            totals[mode][0] += row["tokens"]
            totals[mode][1] += row["seconds"]
    rate = {mode: tokens / seconds for mode, (tokens, seconds) in totals.items()}
    for mode, (tokens, seconds) in totals.items():
        print(f"{mode:<13} {tokens:>5} tokens {seconds:>7.1f} s decoding {rate[mode]:>7.2f} tok/s")
    return rate["constrained"] / rate["unconstrained"]


def native_build(version: str) -> Path:
    """A native build of llama-cpp-python ``version`` in the cache (built once)."""
    from agentbench.cache import cache_dir

    target = cache_dir() / "bench" / f"llama-cpp-python-{version}-native"
    if (target / "llama_cpp" / "__init__.py").is_file():
        return target
    print(f"building a native llama-cpp-python {version} into {target} (about 6 minutes on 2 cores)")
    env = {**os.environ, "CMAKE_ARGS": "-DGGML_NATIVE=ON"}
    partial = target.with_name(target.name + ".partial")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-cache-dir",
            "--target",
            str(partial),
            f"llama-cpp-python=={version}",
        ],
        check=True,
        env=env,
    )
    partial.rename(target)
    return target


def run_build(
    label: str, pythonpath: Path | None, model_path: str, max_tokens: int, what: str = "measure"
) -> dict | None:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath), env.get("PYTHONPATH")]))
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[3]); import local_llm; "
        "fn = local_llm.measure_grammar if sys.argv[4] == 'grammar' else local_llm.measure; "
        "print(json.dumps(fn(sys.argv[1], int(sys.argv[2]))))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, model_path, str(max_tokens), str(Path(__file__).parent), what],
        capture_output=True,
        text=True,
        env=env,
    )
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        print(f"{label}: died of {name}: this build cannot run on this CPU")
        return None
    if proc.returncode:
        raise SystemExit(f"{label} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="local/qwen2.5-coder-1.5b")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--only", choices=("build", "grammar"), help="measure one comparison only")
    args = parser.parse_args()

    from agentbench.llm.weights import ensure_model

    version = md.version("llama-cpp-python")
    model_path = str(ensure_model(args.model))
    ok = True
    if args.only != "build":
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
        print(
            f"llama-cpp-python {version}, {args.model}: {args.rounds} round(s) of {len(TASKS)} agent prompts"
        )
        ratio = grammar_ratio(model_path, args.rounds, args.max_tokens)
        ok = ratio >= GRAMMAR_GOAL
        print(
            f"constrained_vs_unconstrained_tokens_per_s={ratio:.3f} (goal >= {GRAMMAR_GOAL}): "
            f"{'PASS' if ok else 'FAIL'}"
        )
        if args.only == "grammar":
            return 0 if ok else 1
    native = native_build(version)
    builds: dict[str, Path | None] = {"portable": None, "native": native}
    totals = {name: [0, 0.0] for name in builds}
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    print(f"llama-cpp-python {version}, {args.model}, {args.rounds} round(s) of {len(TASKS)} prompts")
    for r in range(args.rounds):
        for name in list(builds) if r % 2 == 0 else list(reversed(builds)):
            result = run_build(name, builds[name], model_path, args.max_tokens)
            if result is None:
                print("portable_vs_native_tokens_per_s=nan (the native build does not run here)")
                return 0 if ok else 1
            if r == 0:
                print(f"{name}: {result['library']}\n  {result['system_info'].strip()}")
            totals[name][0] += result["tokens"]
            totals[name][1] += result["seconds"]
    rate = {name: tokens / seconds for name, (tokens, seconds) in totals.items()}
    for name, (tokens, seconds) in totals.items():
        print(f"{name:<9} {tokens:>5} tokens {seconds:>7.1f} s {rate[name]:>7.2f} tok/s")
    ratio = rate["portable"] / rate["native"]
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"portable_vs_native_tokens_per_s={ratio:.3f} (goal >= {GOAL}): {'PASS' if ratio >= GOAL else 'FAIL'}"
    )
    return 0 if ratio >= GOAL and ok else 1


if __name__ == "__main__":
    sys.exit(main())
