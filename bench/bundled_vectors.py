"""Benchmark: the first `agentbench retrieve --pool humaneval --embedder minilm` with the shipped vectors and
sandbox verdicts (issue 33 item 1), against a warm rerun in the same session. (Core's vectors no longer ship:
with ``--pool core`` the first run embeds its snippets.)

    .venv/bin/python bench/bundled_vectors.py [--pool humaneval] [--sandbox process] [--without]
        [--without-verdicts] [--rankings] [--dtypes]

Every phase runs the real command in a fresh process (``agentbench retrieve --out ... --store-dir ...``)
with its own ``AGENTBENCH_CACHE_DIR``, and is timed from the outside (interpreter start-up included):

- ``empty``: a fresh cache directory and store: nothing cached at all. The retrieved snippets' verdicts
  come from the package (:mod:`agentbench.execution.bundled`) on the default Docker executor; with
  ``--sandbox process`` (whose verdicts are not shipped) all 10,110 are executed. The target is
  empty <= 3x warm (not expected with ``--sandbox process``);
- ``cold``: a fresh cache directory holding only the execution verdicts ``empty`` left (copied), and a
  fresh Chroma store: the embedding cache is empty, the store is built. The target is cold <= 3x warm;
- ``warm``: ``cold`` again, with its caches and store;
- ``--without``: ``cold`` with the shipped vectors switched off (every snippet and query embedded, as
  before they were shipped);
- ``--without-verdicts``: ``empty`` with the shipped verdicts switched off (``AGENTBENCH_SHIPPED_VERDICTS=0``:
  every retrieved snippet executed, as before they were shipped).

``--rankings`` also checks, in this process, that exec@k, every results-file row and every query's full
ranking over the whole corpus are identical with the shipped vectors and with vectors computed now (the
full core: minutes; the tests check humaneval and a sample of core). ``--dtypes`` prints how many
rankings float16 and int8 copies of the vectors would change (why the files keep float32). Prints JSON
lines, then the ratios; exit 1 if cold or empty > 3x warm or a ranking differs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = 3.0
# runs the CLI with the shipped vectors looked up in an empty directory (so none is found)
WITHOUT = (
    "import sys, agentbench.retrieval.bundled as b; from pathlib import Path; "
    "b.BUNDLED_DIR = Path(sys.argv.pop(1)); from agentbench.cli import main; sys.argv[0] = 'agentbench'; main()"
)


def retrieve(
    args: argparse.Namespace, cache: Path, work: Path, label: str, shipped: bool = True, verdicts: bool = True
) -> dict:
    """One timed `agentbench retrieve` in a fresh process; its results file's headline numbers."""
    out = work / f"out-{label}"
    cmd = ["retrieve", "--pool", args.pool, "--embedder", "minilm", "--out", str(out)]
    cmd += ["--store-dir", str(work / f"stores-{cache.name}"), "--json"]
    if args.sandbox:
        cmd += ["--sandbox", args.sandbox]
    if shipped:
        argv = [sys.executable, "-m", "agentbench", *cmd]
    else:
        argv = [sys.executable, "-c", WITHOUT, str(work / "no-shipped-vectors"), *cmd]
    env = os.environ | {"AGENTBENCH_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"}
    if not verdicts:
        env["AGENTBENCH_SHIPPED_VERDICTS"] = "0"
    began = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env)
    seconds = time.perf_counter() - began
    if done.returncode:
        sys.exit(f"{label}: exit {done.returncode}: {done.stderr.strip()[-2000:]}")
    (result,) = json.loads(done.stdout)["results"]
    timing = json.loads(Path(result["file"]).read_text())["run_info"]["timing"]
    row = {"phase": label, "seconds": round(seconds, 2), "exec@1": result["metrics"]["exec@1"]}
    row |= {k: round(timing[k], 2) for k in ("index_s", "search_s", "execute_s", "encode_s", "total_s")}
    print(json.dumps(row), flush=True)
    return row


def rankings(pool_name: str, sandbox: str | None) -> bool:
    """Shipped vs fresh vectors on the whole pool: results and every full ranking identical?"""
    from agentbench.execution import make_executor
    from agentbench.execution.cache import ExecCache
    from agentbench.pools import load_pool
    from agentbench.retrieval import EmbeddingCache, evaluate_retrieval, open_searcher
    from agentbench.retrieval.embedders import minilm
    from agentbench.retrieval.settings import RetrievalSettings

    pool = load_pool(pool_name)
    got = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        make_executor(sandbox or "auto") as executor,
        ExecCache() as cache,
    ):
        for way, p in (("shipped", pool), ("fresh", pool.model_copy(update={"path": f"{tmp}/copy"}))):
            embedder = minilm().use_cache(EmbeddingCache(f"{tmp}/{way}-emb"))
            settings = RetrievalSettings(store_dir=f"{tmp}/{way}-stores")
            began = time.perf_counter()
            result = evaluate_retrieval(p, embedder, executor, settings, exec_cache=cache, progress=False)
            searcher = open_searcher(p, embedder, store_dir=settings.store_dir, progress=False)
            full = searcher.search_many([q.query for q in p.queries], len(p.corpus))
            got[way] = (result.to_json_dict(), [[(h.corpus_id, h.score) for h in q] for q in full])
            print(
                json.dumps(
                    {
                        "rankings": way,
                        "encoded": embedder.encoded_texts,
                        "seconds": round(time.perf_counter() - began, 1),
                    }
                )
            )
    (a, fa), (b, fb) = got["shipped"], got["fresh"]
    same = {k: a[k] == b[k] for k in ("metrics", "ci95", "diagnostics", "per_query")}
    differing = sum(x != y for x, y in zip(fa, fb, strict=True))
    print(
        json.dumps(
            {"pool": pool_name, "identical": same, "full_rankings_differing": differing, "queries": len(fa)}
        )
    )
    return all(same.values()) and differing == 0


def dtypes(pool_name: str) -> None:
    """How many rankings float16 or int8 copies of the shipped float32 vectors would change."""
    import numpy as np

    from agentbench.pools import load_pool
    from agentbench.retrieval import bundled
    from agentbench.retrieval.hits import normalized_rows, tie_ranks_for

    pool = load_pool(pool_name)
    shipped = bundled.load(bundled.shipped_path(pool_name))
    docs = np.stack(list(shipped.get_many("document", [s.code for s in pool.corpus]).values()))
    queries = np.stack(list(shipped.get_many("query", [q.query for q in pool.queries]).values()))
    ties = tie_ranks_for([s.corpus_id for s in pool.corpus])

    def ranked(q: np.ndarray, d: np.ndarray) -> np.ndarray:
        scores = normalized_rows(q) @ normalized_rows(d).T
        return np.stack([np.lexsort((ties, -row)) for row in scores])

    def int8(v: np.ndarray) -> np.ndarray:
        scale = np.abs(v).max(axis=1, keepdims=True) / 127
        return np.round(v / scale).astype(np.int8).astype(np.float32) * scale

    base = ranked(queries, docs)
    for name, cast in (("float16", lambda v: v.astype(np.float16).astype(np.float32)), ("int8", int8)):
        other = ranked(cast(queries), cast(docs))
        row = {"dtype": name, "pool": pool_name, "queries": len(base)}
        for k in (1, 10):
            row[f"top{k}_differs"] = int(
                sum((x[:k] != y[:k]).any() for x, y in zip(base, other, strict=True))
            )
        row["full_ranking_differs"] = int(sum((x != y).any() for x, y in zip(base, other, strict=True)))
        size = len(base) + len(docs)
        row["vector_bytes"] = size * docs.shape[1] * (2 if name == "float16" else 1) + (
            size * 4 if name == "int8" else 0
        )
        print(json.dumps(row), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", default="humaneval")
    parser.add_argument("--sandbox", default=None, help="default: the command's default")
    parser.add_argument("--without", action="store_true", help="also time a cold run without shipped vectors")
    parser.add_argument(
        "--without-verdicts",
        action="store_true",
        help="also time an empty run without shipped verdicts (every retrieved snippet executed)",
    )
    parser.add_argument(
        "--rankings", action="store_true", help="also check shipped vs fresh on the whole pool"
    )
    parser.add_argument("--dtypes", action="store_true", help="also measure float16 and int8 copies")
    args = parser.parse_args()
    from agentbench.retrieval import bundled

    path = bundled.shipped_path(args.pool)
    print(json.dumps({"file": str(path.relative_to(ROOT)), "bytes": path.stat().st_size}))
    from agentbench.execution import bundled as verdicts

    path = verdicts.shipped_path(args.pool)
    print(json.dumps({"verdicts_file": str(path.relative_to(ROOT)), "bytes": path.stat().st_size}))
    ok = True
    with tempfile.TemporaryDirectory(prefix="bundled-bench-") as tmp:
        work = Path(tmp)
        empty = retrieve(args, work / "empty", work, "empty")
        for name in ("cold", "without"):  # every cold cache starts with the verdicts only
            shutil.copytree(work / "empty" / "executions", work / name / "executions")
        cold = retrieve(args, work / "cold", work, "cold")
        warm = retrieve(args, work / "cold", work, "warm")
        if args.without:
            without = retrieve(args, work / "without", work, "without", shipped=False)
            print(f"cold_without_shipped_vs_warm = {without['seconds'] / warm['seconds']:.2f}")
        if args.without_verdicts:
            bare = retrieve(args, work / "no-verdicts", work, "empty_without_verdicts", verdicts=False)
            print(f"empty_without_shipped_verdicts_vs_warm = {bare['seconds'] / warm['seconds']:.2f}")
        empty_ratio = empty["seconds"] / warm["seconds"]
        shipped = args.sandbox != "process"  # the shipped verdicts are the Docker executor's
        target = f"target <= {TARGET:g}" if shipped else "no target: process verdicts are not shipped"
        print(f"empty_vs_warm = {empty_ratio:.2f} ({target}; sandbox executions included)")
        ratio = cold["seconds"] / warm["seconds"]
        print(f"cold_vs_warm = {ratio:.2f} (target <= {TARGET:g})")
        ok = ratio <= TARGET and (empty_ratio <= TARGET or not shipped)
    if args.dtypes:
        dtypes(args.pool)
    if args.rankings:
        ok = rankings(args.pool, args.sandbox) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
