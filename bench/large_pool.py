"""Benchmark: retrieval-only scoring on large pools (10k, 30k, 100k snippets) with BM25 and MiniLM.

    .venv/bin/python bench/large_pool.py [--sizes 10000,30000,100000] [--embedder bm25 --embedder minilm]
        [--queries 1000] [--max-dense 100000] [--sandbox auto] [--json-out FILE]

Each size's pool is made by ``agentbench pool replicate core --snippets N`` (renamed replicas of the core
pool). Each (size, embedder) is scored in a fresh interpreter, as ``agentbench retrieve`` scores it, with a
fresh Chroma store and a fresh embedding cache (so every snippet is embedded and indexed: a cold index), on
a seeded sample of ``--queries`` queries. The execution cache is the shared one (executions are not what
is measured; they are printed apart). Per run it prints:

- index time: embedding (model loading included) and building the Chroma collection, or the BM25 index;
- query time per query: embedding the query and exact ranking over the whole corpus (both passes: the top
  hits, and the canonical/distractor scores for the diagnostics);
- peak RSS of the scoring process (``ru_maxrss``; the sandbox containers are not in it);

then growth ratios from the smallest to each larger size, e.g. ``bm25_index_time_100k_vs_10k=<r>``. A dense
embedder above ``--max-dense`` snippets is skipped (MiniLM embedded 5.3 snippets/s on two cores shared
with other work, so 100k takes hours): its measured encode rate gives an estimate, printed as such. ``--embedder hashed``
(a model-free token-hashing dense embedder defined here) measures the dense store's own scaling, Chroma
build and exact ranking, at sizes MiniLM cannot reach in the time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def label(n: int) -> str:
    return f"{n // 1000}k" if n % 1000 == 0 else str(n)


def hashed_tokens():
    """A model-free dense embedder (signed counts of code tokens hashed into 384 dimensions): measures how
    the Chroma store and the exact ranking scale when MiniLM is too slow to embed 100k snippets here. It
    is not a retrieval model; its exec@k numbers mean nothing."""
    import zlib

    import numpy as np

    from agentbench.retrieval.embedders import DenseEmbedder
    from agentbench.retrieval.tokens import tokenize_code

    class HashedTokens(DenseEmbedder):
        def config_key(self) -> str:
            return "bench:hashed-tokens-384-v1"

        def _encode(self, texts: list[str], kind: str) -> np.ndarray:
            out = np.zeros((len(texts), 384), dtype=np.float32)
            for i, text in enumerate(texts):
                for tok in tokenize_code(text):
                    h = zlib.crc32(tok.encode())
                    out[i, h % 384] += 1.0 if h & 0x80000000 else -1.0
            return out

    return HashedTokens("hashed")


def phase(args: argparse.Namespace) -> None:
    """One cold retrieval-only scoring in this process; prints a JSON line."""
    began = time.perf_counter()
    import chromadb  # noqa: F401 - imported before the clock
    import scipy.stats  # noqa: F401

    from agentbench._env import prepare_environment
    from agentbench.execution import make_executor
    from agentbench.execution.cache import ExecCache
    from agentbench.pools import load_pool
    from agentbench.retrieval import EmbeddingCache, evaluate_retrieval, parse_embedder
    from agentbench.retrieval.settings import RetrievalSettings

    prepare_environment()
    embedder = hashed_tokens() if args.embedder == "hashed" else parse_embedder(args.embedder)
    if not embedder.sparse:
        import sentence_transformers  # noqa: F401
    imports = time.perf_counter() - began
    rss_imports = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t = time.perf_counter()
    pool = load_pool(args.pool)
    load_s = time.perf_counter() - t
    settings = RetrievalSettings(store_dir=args.store_dir, sample=args.queries, seed=0)
    pool = pool.model_copy(update={"queries": settings.select(pool.queries)})
    with (
        make_executor(args.sandbox) as executor,
        ExecCache(args.exec_cache) as exec_cache,
        EmbeddingCache(args.embed_cache) as embed_cache,
    ):
        result = evaluate_retrieval(
            pool, embedder, executor, settings, exec_cache=exec_cache, embed_cache=embed_cache, progress=True
        )
    timing = result.run_info.timing
    out = {
        "imports_s": imports,
        "pool_load_s": load_s,
        "index_s": timing.index_s,
        "encode_s": timing.encode_s,
        "model_load_s": timing.load_s,
        "search_s": timing.search_s,
        "query_ms": 1000 * timing.search_s / result.n_queries,
        "execute_s": timing.execute_s,
        "store": result.run_info.store,
        "n_queries": result.n_queries,
        "n_corpus": result.n_corpus,
        "exec@1": result.metrics["exec@1"],
        "exec@10": result.metrics["exec@10"],
        "rss_after_imports_mb": rss_imports,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    print(json.dumps(out), flush=True)


def make_pool(n: int, out: Path) -> float:
    began = time.perf_counter()
    cmd = [sys.executable, "-m", "agentbench", "pool", "replicate", "core", "--snippets", str(n)]
    proc = subprocess.run([*cmd, "--out", str(out)], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        sys.exit(f"pool replicate failed:\n{proc.stderr[-2000:]}")
    return time.perf_counter() - began


def run_phase(args: argparse.Namespace, pool: Path, embedder: str, tmp: Path) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--phase",
        "--pool",
        str(pool),
        "--embedder",
        embedder,
        "--queries",
        str(args.queries),
        "--sandbox",
        args.sandbox,
        "--store-dir",
        str(tmp / "stores"),
        "--embed-cache",
        str(tmp / "embeddings"),
    ]
    if args.exec_cache:
        cmd += ["--exec-cache", args.exec_cache]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)  # progress bars go to the terminal
    if proc.returncode != 0:
        sys.exit(f"{embedder} on {pool} failed (exit {proc.returncode})")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,30000,100000", help="comma-separated snippet counts")
    parser.add_argument(
        "--embedder",
        action="append",
        help="repeatable (default: bm25 and minilm); `hashed` is a model-free dense stand-in for store scaling",
    )
    parser.add_argument("--queries", type=int, default=1000, help="queries scored per run (seeded sample)")
    parser.add_argument("--max-dense", type=int, default=None, help="skip dense embedders above this size")
    parser.add_argument("--sandbox", default="auto")
    parser.add_argument("--exec-cache", default=None, help="execution cache directory (default: shared)")
    parser.add_argument("--json-out", default=None, help="also write every measurement to this file")
    parser.add_argument("--work-dir", default=None, help="keep pools and stores here (default: a temp dir)")
    parser.add_argument("--phase", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--pool", help=argparse.SUPPRESS)
    parser.add_argument("--store-dir", help=argparse.SUPPRESS)
    parser.add_argument("--embed-cache", help=argparse.SUPPRESS)
    args = parser.parse_args()
    embedders = args.embedder or ["bm25", "minilm"]
    if args.phase:
        args.embedder = embedders[0]
        phase(args)
        return 0

    sizes = sorted(int(s) for s in args.sizes.split(","))
    load = os.getloadavg()
    print(
        f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True
    )
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="agentbench-large-") as scratch:
        work = Path(args.work_dir or scratch)
        for n in sizes:
            pool = work / f"pool-{label(n)}"
            made = make_pool(n, pool) if not (pool / "corpus.jsonl").exists() else 0.0
            print(f"pool {label(n)}: made in {made:.1f} s -> {pool}", flush=True)
            for emb in embedders:
                if emb not in ("bm25", "hashed") and args.max_dense is not None and n > args.max_dense:
                    print(f"{emb} {label(n)}: skipped (--max-dense {args.max_dense})", flush=True)
                    continue
                run_dir = work / f"run-{label(n)}-{emb.replace(':', '_').replace('/', '_')}"
                run_dir.mkdir(parents=True, exist_ok=True)
                r = run_phase(args, pool, emb, run_dir) | {"size": n, "embedder": emb}
                rows.append(r)
                print(
                    f"{emb} {label(n)}: {r['n_corpus']} snippets, {r['n_queries']} queries; index "
                    f"{r['index_s']:.1f} s (encode {r['encode_s']:.1f} s incl. model load {r['model_load_s']:.1f} s); "
                    f"query {r['query_ms']:.2f} ms/query; peak RSS {r['peak_rss_mb']:.0f} MB "
                    f"(after imports {r['rss_after_imports_mb']:.0f} MB); sandbox {r['execute_s']:.1f} s; "
                    f"exec@1 {r['exec@1']:.3f} exec@10 {r['exec@10']:.3f}",
                    flush=True,
                )
                if args.json_out:
                    Path(args.json_out).write_text(json.dumps(rows, indent=1))
    for emb in embedders:
        mine = {r["size"]: r for r in rows if r["embedder"] == emb}
        if not mine:
            continue
        base_n = min(mine)
        base = mine[base_n]
        for n in sorted(mine):
            if n == base_n:
                continue
            r, tag = mine[n], f"{emb}_{{}}_{label(n)}_vs_{label(base_n)}"
            print(f"{tag.format('index_time')}={r['index_s'] / base['index_s']:.3f}")
            print(f"{tag.format('query_time')}={r['query_ms'] / base['query_ms']:.3f}")
            print(f"{tag.format('peak_rss')}={r['peak_rss_mb'] / base['peak_rss_mb']:.3f}")
        encoded = base["encode_s"] - base["model_load_s"]
        if emb not in ("bm25", "hashed") and encoded > 0 and max(sizes) not in mine:
            rate = base["n_corpus"] / encoded
            print(f"{emb}_encode_rate_per_s={rate:.1f}")
            print(
                f"{emb}_encode_{label(max(sizes))}_estimate_s={max(sizes) / rate:.0f}  (estimate, not measured)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
