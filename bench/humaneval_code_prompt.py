"""closed_book on HumanEval with the prompt the Qwen2.5-Coder report scored, beside agentbench's prompt.

    python bench/humaneval_code_prompt.py RUN_DIR [--llm local/qwen2.5-coder-1.5b] [--sandbox docker]

RUN_DIR is a run of ``agentbench run --pool humaneval --conditions closed_book`` with the same model. The
report scores instruct models with EvalPlus, whose prompt is the problem's code prompt (the module's
imports and helpers, the signature and the docstring) inside one instruction: "Please provide a
self-contained Python script that solves the following problem in a markdown code block:". agentbench's
prompt shows the docstring as the task's spec, the signature and the lines the code starts with. This
script asks the same model the report's question for every task the run has (same decoding: greedy,
seed 0, 1,024 tokens; same extraction; no system message, so the model's chat template adds its default,
as EvalPlus's chat prompt does). EvalPlus also pre-fills the reply with a sentence and an open code
block, which a chat API cannot do, so that part is left out. Both sets of code are scored by HumanEval's
own ``check()`` in the same sandbox (as bench/humaneval_official.py does), and paired per task: the
difference in pass count is what the prompt accounts for; the rest of a gap to the published score is the
model build. Prints ``code_prompt_vs_spec_prompt`` (the ratio of the two pass counts) and the exact
McNemar p-value of the paired difference.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from humaneval_official import official_job, official_problems  # noqa: E402

from agentbench._env import prepare_environment  # noqa: E402
from agentbench.agent.extract import extract_code  # noqa: E402
from agentbench.analysis.attribution import _mcnemar  # noqa: E402
from agentbench.execution import make_executor  # noqa: E402
from agentbench.llm.client import LLMClient  # noqa: E402

INSTRUCTION = (
    "Please provide a self-contained Python script that solves the following problem in a markdown code "
    "block:"
)


def code_prompt(problem_prompt: str) -> list[dict[str, str]]:
    """EvalPlus's instruct prompt for one problem (``make_raw_chat_prompt``), without the pre-filled reply."""
    return [{"role": "user", "content": f"{INSTRUCTION}\n```\n{problem_prompt.strip()}\n```\n"}]


async def generate(client: LLMClient, prompts: list[list[dict[str, str]]]) -> list[str]:
    from tqdm import tqdm

    bar = tqdm(total=len(prompts), desc="code-prompt replies", unit="reply")

    async def one(messages: list[dict[str, str]]) -> str:
        result = await client.complete(messages)
        bar.update()
        if not result.ok:
            raise SystemExit(f"the model failed: {result.error}")
        return result.text or ""

    try:
        return await asyncio.gather(*(one(m) for m in prompts))
    finally:
        bar.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--llm", default="local/qwen2.5-coder-1.5b")
    ap.add_argument("--sandbox", default="docker")
    args = ap.parse_args()
    prepare_environment()
    pool = ROOT / "agentbench" / "pools" / "humaneval" / "pool" / "queries.jsonl"
    problems = official_problems([json.loads(line) for line in pool.read_text().splitlines() if line])
    records = [json.loads(line) for line in (args.run_dir / "records.jsonl").read_text().splitlines() if line]
    # every scored record: a reply without code (status no_code) is a failure, as in the run
    scored = [r for r in records if r.get("status") not in ("llm_error", "infra_error")]
    records = [r for r in scored if r["condition"] == "closed_book"]
    tasks = [problems[r["query_id"]] for r in records]

    client = LLMClient(args.llm, concurrency=1)
    try:
        client.check()
        replies = asyncio.run(generate(client, [code_prompt(t["prompt"]) for t in tasks]))
    finally:
        client.close()

    theirs = [extract_code(reply, t["entry_point"]) for reply, t in zip(replies, tasks, strict=True)]
    with make_executor(args.sandbox) as executor:
        results = executor.run(
            [official_job(t, r["code"] or "") for t, r in zip(tasks, records, strict=True)]
            + [official_job(t, code) for t, code in zip(tasks, theirs, strict=True)]
        )
    passed = [res.infra_error is None and res.results == ["pass"] for res in results]
    spec, code = passed[: len(tasks)], passed[len(tasks) :]
    only_code = [t["task_id"] for t, a, b in zip(tasks, spec, code, strict=True) if b and not a]
    only_spec = [t["task_id"] for t, a, b in zip(tasks, spec, code, strict=True) if a and not b]
    print(f"tasks: {len(tasks)} (the closed_book records of {args.run_dir})")
    print(f"agentbench's spec prompt (the run's code), HumanEval check(): {sum(spec)} passed")
    print(f"the report's code prompt, HumanEval check(): {sum(code)} passed")
    print(f"passed with the code prompt only: {len(only_code)} {only_code}")
    print(f"passed with the spec prompt only: {len(only_spec)} {only_spec}")
    print(f"mcnemar_exact_p={_mcnemar(np.array(code), np.array(spec)):.4f}")
    print(f"code_prompt_vs_spec_prompt={sum(code) / sum(spec) if sum(spec) else float('nan'):.3f}")


if __name__ == "__main__":
    main()
