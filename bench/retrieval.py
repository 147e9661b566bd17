"""Benchmark: embed, index and score a pool cold and warm (issue 4's performance budget).

    .venv/bin/python bench/retrieval.py [--pool core] [--embedder minilm] [--sandbox process]

Each phase runs in a fresh interpreter that imports the libraries *before* the clock starts (import time
is printed separately: it is interpreter start-up, not retrieval work):

- cold: empty Chroma store and empty embedding cache (fresh temporary directories) -> every snippet and
  query is encoded and indexed;
- warm: the same store and embedding cache, and the execution cache the cold phase filled.

The executor is started before the clock too (with a warm execution cache it runs nothing).

Budgets: warm total <= 5 s; cold overhead, i.e. cold time minus the embedder's own ``encode`` time (model
loading counts as overhead) minus sandbox execution, at most 20% of that encode time. Sandbox execution is
excluded from the cold overhead because it is the execution layer's cost (it is zero when the shared
execution cache already holds the verdicts) and is printed on its own line. Exit code 1 if a budget fails.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WARM_BUDGET_S = 5.0
COLD_OVERHEAD_BUDGET = 0.20


def phase(args: argparse.Namespace) -> None:
    """One timed evaluation in this process; prints a JSON line."""
    began = time.perf_counter()
    import chromadb  # noqa: F401 - imported before the clock, see the module docstring
    import scipy.stats  # noqa: F401

    from agentbench._env import prepare_environment
    from agentbench.execution import make_executor
    from agentbench.execution.cache import ExecCache
    from agentbench.pools import load_pool
    from agentbench.retrieval import EmbeddingCache, evaluate_retrieval, parse_embedder
    from agentbench.retrieval.settings import RetrievalSettings

    prepare_environment()
    embedder = parse_embedder(args.embedder)
    if not embedder.sparse:
        import sentence_transformers  # noqa: F401

    pool = load_pool(args.pool)
    imports = time.perf_counter() - began
    with (
        make_executor(args.sandbox) as executor,
        ExecCache(args.exec_cache) as exec_cache,
        EmbeddingCache(args.embed_cache) as embed_cache,
    ):
        start = time.perf_counter()
        result = evaluate_retrieval(
            pool,
            embedder,
            executor,
            RetrievalSettings(store_dir=args.store_dir),
            exec_cache=exec_cache,
            embed_cache=embed_cache,
            progress=False,
        )
        total = time.perf_counter() - start
    timing = result.run_info.timing
    out = {
        "imports_s": imports,
        "total_s": total,
        "encode_s": timing.encode_s - timing.load_s,
        "load_s": timing.load_s,
        "execute_s": timing.execute_s,
        "store": result.run_info.store,
        "n_queries": result.n_queries,
        "n_corpus": result.n_corpus,
        "exec@1": result.metrics["exec@1"],
    }
    print(json.dumps(out), flush=True)


def run_phase(name: str, args: argparse.Namespace, store: Path, vectors: Path) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--phase",
        name,
        "--pool",
        args.pool,
        "--embedder",
        args.embedder,
        "--sandbox",
        args.sandbox,
        "--store-dir",
        str(store),
        "--embed-cache",
        str(vectors),
    ]
    if args.exec_cache:
        cmd += ["--exec-cache", args.exec_cache]
    print(f"{name} phase ...", file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{name} phase failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pool", default="core")
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--sandbox", default="process")
    parser.add_argument(
        "--exec-cache", default=None, help="execution cache directory (default: the shared one)"
    )
    parser.add_argument("--phase", choices=["cold", "warm"], help=argparse.SUPPRESS)
    parser.add_argument("--store-dir", help=argparse.SUPPRESS)
    parser.add_argument("--embed-cache", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        phase(args)
        return 0

    with tempfile.TemporaryDirectory(prefix="agentbench-bench-") as tmp:
        store, vectors = Path(tmp) / "stores", Path(tmp) / "embeddings"
        cold = run_phase("cold", args, store, vectors)
        warm = run_phase("warm", args, store, vectors)

    encode = cold["encode_s"]
    overhead = cold["total_s"] - cold["execute_s"] - encode
    ratio = overhead / encode if encode > 0 else float("inf")
    warm_ok = warm["total_s"] <= WARM_BUDGET_S and warm["store"] == "reused"
    cold_ok = ratio <= COLD_OVERHEAD_BUDGET
    print(
        f"pool {args.pool}: {cold['n_queries']} queries, {cold['n_corpus']} snippets; "
        f"embedder {args.embedder}; exec@1 {cold['exec@1']:.3f}"
    )
    print(f"imports (excluded)      cold {cold['imports_s']:.2f} s, warm {warm['imports_s']:.2f} s")
    print(
        f"cold total              {cold['total_s']:.2f} s = encode {encode:.2f} s + model load "
        f"{cold['load_s']:.2f} s + sandbox {cold['execute_s']:.2f} s + other "
        f"{overhead - cold['load_s']:.2f} s"
    )
    print(
        f"cold overhead / encode  {ratio:.3f}  (budget {COLD_OVERHEAD_BUDGET:.2f})  "
        f"{'ok' if cold_ok else 'OVER BUDGET'}"
    )
    print(
        f"warm total              {warm['total_s']:.2f} s  = {warm['total_s'] / WARM_BUDGET_S:.3f} of the "
        f"{WARM_BUDGET_S:.0f} s budget (store {warm['store']}, sandbox {warm['execute_s']:.2f} s, "
        f"model load {warm['load_s']:.2f} s)  {'ok' if warm_ok else 'OVER BUDGET'}"
    )
    print(f"warm / cold             {warm['total_s'] / cold['total_s']:.4f}")
    return 0 if warm_ok and cold_ok else 1


if __name__ == "__main__":
    sys.exit(main())
