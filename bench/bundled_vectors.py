"""Benchmark: the first `agentbench retrieve --pool humaneval --embedder minilm` with the shipped vectors and
sandbox verdicts (issue 33 item 1), against a warm rerun in the same session (``--pool core``: core's
compact file, int16 with the rows ranking is sensitive to kept as float32).

    .venv/bin/python bench/bundled_vectors.py [--pool humaneval] [--sandbox process] [--without]
        [--without-verdicts] [--rankings] [--dtypes] [--no-timing]

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

``--rankings`` also checks, in this process, that exec@k, every other metric, interval and diagnostic, every
results-file row and every query's top 11 are identical with the shipped vectors and with vectors computed
now, on the whole pool (core: minutes; the tests check humaneval and a sample of core); for a float32 file
(humaneval) also every full ranking. It prints how many full rankings differ beyond that and the largest
similarity difference. ``--dtypes`` prints how many rankings float16, int8 and int16 copies of the float32
vectors would change, and the shipped file (what it is for: core's exact rows). ``--no-timing`` skips the
timed phases. Prints JSON lines, then the ratios; exit 1 if cold or empty > 3x warm or a ranking differs.
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
    """Shipped vs fresh vectors on the whole pool: results, each top 11 (float32 files: every full ranking)
    identical?"""
    from agentbench.execution import make_executor
    from agentbench.execution.cache import ExecCache
    from agentbench.pools import load_pool
    from agentbench.retrieval import EmbeddingCache, bundled, evaluate_retrieval, open_searcher
    from agentbench.retrieval.bundled.build import TOP
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
    same = {k: a[k] == b[k] for k in ("metrics", "ci95", "diagnostics")}
    same["per_query_rows"] = _bare(a["per_query"]) == _bare(b["per_query"])
    ids = [([c for c, _ in x], [c for c, _ in y]) for x, y in zip(fa, fb, strict=True)]
    top_differing = sum(x[:TOP] != y[:TOP] for x, y in ids)
    full_differing = sum(x != y for x, y in ids)
    gap = max(abs(s - t) for x, y in zip(fa, fb, strict=True) for (_, s), (_, t) in zip(x, y, strict=True))
    dtype = bundled.load(bundled.shipped_path(pool_name)).meta["dtype"]
    row = {"pool": pool_name, "dtype": dtype, "identical": same, f"top{TOP}_differing": top_differing}
    row |= {"full_rankings_differing": full_differing, "queries": len(fa), "max_similarity_diff": gap}
    print(json.dumps(row))
    return all(same.values()) and top_differing == 0 and (full_differing == 0 or dtype != "float32")


def _bare(rows: list[dict]) -> list[dict]:
    """Results-file rows without their similarities (a compact file moves them by about 1e-5)."""
    return [q | {"top_results": [r | {"similarity": None} for r in q["top_results"]]} for q in rows]


def dtypes(pool_name: str) -> None:
    """How many rankings float16, int8 and int16 copies of the float32 vectors change, and the shipped file.

    The float32 vectors are computed as the build computes them, through the embedding cache of
    ``AGENTBENCH_CACHE_DIR`` (minutes for core the first time)."""
    import numpy as np

    from agentbench.pools import load_pool
    from agentbench.retrieval import EmbeddingCache, bundled
    from agentbench.retrieval.bundled import hybrid
    from agentbench.retrieval.bundled.build import TOP, own_positions
    from agentbench.retrieval.embedders import minilm
    from agentbench.retrieval.hits import QUERY_BLOCK, tie_ranks_for

    pool = load_pool(pool_name)
    embedder = minilm().use_cache(EmbeddingCache())
    embedder.use_shipped(None)
    docs = embedder.embed_documents([s.code for s in pool.corpus])
    texts = [q.query for q in pool.queries]
    queries = np.concatenate(
        [embedder.embed_queries(texts[i : i + QUERY_BLOCK]) for i in range(0, len(texts), QUERY_BLOCK)]
    )
    shipped = bundled.load(bundled.shipped_path(pool_name))
    ties, own = tie_ranks_for([s.corpus_id for s in pool.corpus]), own_positions(pool)
    full = len(pool.corpus)
    base_top, base_own = hybrid.orders(docs, queries, ties, own, full)

    def int8(v: np.ndarray) -> np.ndarray:
        scale = np.abs(v).max(axis=1, keepdims=True) / 127
        return np.round(v / scale).astype(np.int8).astype(np.float32) * scale

    def shipped_copy(v: np.ndarray, kind: str) -> np.ndarray:
        texts = [s.code for s in pool.corpus] if kind == "document" else [q.query for q in pool.queries]
        got = shipped.get_many(kind, texts)
        return np.stack([got[i] for i in range(len(texts))])

    casts = {
        "float16": (lambda v, _: v.astype(np.float16).astype(np.float32), 2),
        "int8": (lambda v, _: int8(v), 1),
        "int16": (lambda v, _: hybrid.quantized(v), 2),
        f"shipped ({shipped.meta['dtype']})": (shipped_copy, None),
    }
    for name, (cast, width) in casts.items():
        top, own_order = hybrid.orders(cast(docs, "document"), cast(queries, "query"), ties, own, full)
        row = {"dtype": name, "pool": pool_name, "queries": len(top)}
        for k in (1, 10, TOP):
            row[f"top{k}_differs"] = int(
                sum((x[:k] != y[:k]).any() for x, y in zip(base_top, top, strict=True))
            )
        row["own_order_differs"] = int(sum((x != y).any() for x, y in zip(base_own, own_order, strict=True)))
        row["full_ranking_differs"] = int(sum((x != y).any() for x, y in zip(base_top, top, strict=True)))
        if width is not None:  # raw, before compression (int8 and int16 add one float32 scale per row)
            row["vector_bytes"] = (len(docs) + len(queries)) * (
                docs.shape[1] * width + 4 * (name != "float16")
            )
        else:
            row["file_bytes"] = bundled.shipped_path(pool_name).stat().st_size
            row["exact_rows"] = shipped.meta.get("selection", {}).get("exact_rows", len(shipped))
        print(json.dumps(row), flush=True)


def timed(args: argparse.Namespace) -> bool:
    """The timed phases; whether cold (and empty, with shipped verdicts) are within TARGET of warm."""
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
        return ratio <= TARGET and (empty_ratio <= TARGET or not shipped)


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
    parser.add_argument(
        "--dtypes",
        action="store_true",
        help="also measure float16, int8 and int16 copies and the shipped file",
    )
    parser.add_argument("--no-timing", action="store_true", help="skip the timed phases")
    args = parser.parse_args()
    from agentbench.retrieval import bundled

    path = bundled.shipped_path(args.pool)
    print(json.dumps({"file": str(path.relative_to(ROOT)), "bytes": path.stat().st_size}))
    from agentbench.execution import bundled as verdicts

    path = verdicts.shipped_path(args.pool)
    print(json.dumps({"verdicts_file": str(path.relative_to(ROOT)), "bytes": path.stat().st_size}))
    ok = True if args.no_timing else timed(args)
    if args.dtypes:
        dtypes(args.pool)
    if args.rankings:
        ok = rankings(args.pool, args.sandbox) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
