"""Wall time of a matrix run vs the same combinations as separate runs, one after another.

    python bench/matrix.py [--queries 20] [--sandbox auto] [--delay 0.05]

Two scripted LLMs (LiteLLM custom providers: one copies the context it is shown, the other does so for
half the prompts and answers a stub otherwise; ``--delay`` seconds per call stands in for an API) times
MiniLM and BM25, on the first ``--queries`` core queries with only their own snippets, all four conditions.

- ``separate``: four ``agentbench.evaluate_config`` runs in sequence, sharing one on-disk cache directory
  that starts empty (what running the combinations one by one does today);
- ``matrix``: ``agentbench.evaluate_matrix`` with all four, its own cache directory, also starting empty.

Both do the same work by content (the caches key by content), so the difference is what a matrix shares
beyond the caches: one sandbox executor instead of one per run, and one retrieval stage per embedder
(index, search, executing retrieved snippets, bootstrap intervals) instead of one per run, with MiniLM
loaded once. Heavy imports (LiteLLM, sentence-transformers) happen before either clock starts. Prints ``matrix_vs_separate=<matrix wall / separate wall>`` (lower is better; goal < 1) and
the load average, since a busy machine slows both.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from agentbench._env import prepare_environment

prepare_environment()

LLMS = ["copyall/a", "copyhalf/b"]
EMBEDDERS = ["minilm", "bm25"]


def _providers(delay: float) -> None:
    import asyncio

    from agentbench.llm._litellm import litellm_module, register_provider

    litellm = litellm_module()

    class Scripted(litellm.CustomLLM):
        def __init__(self, half: bool) -> None:
            super().__init__()
            self.half = half

        async def acompletion(self, model, messages, model_response, optional_params, **_):  # noqa: ANN001, ANN201
            if delay:
                await asyncio.sleep(delay)
            user = messages[-1]["content"]
            blocks = re.findall(r"```python\n(.*?)```", user, re.S)
            stub = blocks[-1].rstrip() + "\n    return None\n"
            copy = len(blocks) > 1 and not (self.half and hashlib.sha256(user.encode()).digest()[0] % 2)
            model_response.choices[0].message.content = "```python\n" + (blocks[0] if copy else stub) + "```"
            model_response.usage = litellm.Usage(prompt_tokens=11, completion_tokens=5, total_tokens=16)
            return model_response

    register_provider("copyall", Scripted(False))
    register_provider("copyhalf", Scripted(True))


def _subset(n: int, out: Path) -> Path:
    from agentbench.pools import load_pool, write_pool

    core = load_pool("core")
    write_pool(core.only(core.queries[:n]), out)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--sandbox", default="auto")
    ap.add_argument("--delay", type=float, default=0.05)
    args = ap.parse_args()

    import agentbench
    from agentbench.api import evaluate_config
    from agentbench.pipeline import RunConfig

    _providers(args.delay)
    import sentence_transformers  # noqa: F401 - imported before either clock starts: a one-off per process

    work = Path(tempfile.mkdtemp(prefix="agentbench-bench-matrix-"))
    pool = str(_subset(args.queries, work / "pool"))
    common = dict(pool=pool, sandbox=args.sandbox, concurrency=4, store_dir=str(work / "stores"))

    os.environ["AGENTBENCH_CACHE_DIR"] = str(work / "cache-separate")
    began = time.perf_counter()
    for llm in LLMS:
        for embedder in EMBEDDERS:
            run_dir = work / "separate" / f"{llm.replace('/', '-')}__{embedder}"
            evaluate_config(
                RunConfig(llm=llm, embedder=embedder, run_dir=str(run_dir), **common), show_progress=False
            )
    separate = time.perf_counter() - began

    os.environ["AGENTBENCH_CACHE_DIR"] = str(work / "cache-matrix")
    began = time.perf_counter()
    result = agentbench.evaluate_matrix(llms=LLMS, embedders=EMBEDDERS, run_dir=work / "matrix", **common)
    matrix = time.perf_counter() - began

    best = result.leaderboard.rows[0]
    print(
        f"queries={args.queries} sandbox={args.sandbox} delay={args.delay} load_average={os.getloadavg()[0]:.1f}"
    )
    print(f"separate_seconds={separate:.1f} matrix_seconds={matrix:.1f}")
    print(f"leaderboard_top={best.agent},{best.retriever} rag={best.conditions['rag']['pass_rate']}")
    print(f"matrix_vs_separate={matrix / separate:.3f}")
    return 0 if matrix < separate else 1


if __name__ == "__main__":
    sys.exit(main())
