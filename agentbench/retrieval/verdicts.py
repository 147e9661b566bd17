"""``python -m agentbench.retrieval.verdicts [--pool NAME] [--check] [--cache-dir DIR]``: regenerate (or
check) the sandbox verdicts shipped for the bundled pools (:mod:`agentbench.execution.bundled`).

Which pairs: per query, its own snippets (canonicals and distractors: the oracle and distractor conditions
of a run execute them) and the top :data:`DEPTH` of each retriever in :data:`RETRIEVERS` (minilm, the
default, and bm25, the offline alternative), each against that query's full test suite with the default
timeout: what ``agentbench retrieve`` and ``agentbench run`` execute on their defaults. Rankings come from
the same searcher a run opens, so the pairs are exactly the run's. The verdicts are made with the Docker
executor on its defaults (the one ``--sandbox auto`` picks) through :func:`run_cached`, so every verdict
already in the execution cache is reused and only the rest is executed.

This module sits in the retrieval layer because choosing the pairs needs the pools and the retrievers;
the execution layer only reads the files.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

from ..errors import SandboxError
from ..execution.base import DEFAULT_TIMEOUT, ExecResult, Job
from ..execution.bundled import FORMAT, REGENERATE, data_sha256, load, shipped_path
from ..execution.cache import ExecCache, job_config, run_cached
from ..execution.container import docker_config_key
from ..execution.engine import image_tag
from ..pools.io import BUNDLED_POOLS, load_pool
from ..pools.models import Pool
from ..progress import progress_bar
from ._defaults import DEFAULT_EMBEDDER, DEFAULT_KS
from .embedders import parse_embedder
from .evaluate import TOP_RESULTS
from .search import open_searcher

__all__ = ["RETRIEVERS", "DEPTH", "default_config", "required_jobs", "write", "build", "problems", "main"]

RETRIEVERS = (DEFAULT_EMBEDDER, "bm25")
DEPTH = max(TOP_RESULTS, DEFAULT_KS[-1])
"""How deep a default retrieval executes (``evaluate_retrieval``'s depth on the default cutoffs)."""

Pair = tuple[str, str]


def default_config(timeout: float = DEFAULT_TIMEOUT) -> str:
    """The job config of a default run on the Docker executor (no engine needed)."""
    return job_config(docker_config_key(image_tag()), timeout)


def _job(pool: Pool, code: str, query_index: int, timeout: float) -> Job:
    q = pool.queries[query_index]
    return Job(code, tuple(q.test_suite), timeout, q.test_setup or "")


def required_jobs(
    pool: Pool, retrievers: Sequence[str] = RETRIEVERS, timeout: float = DEFAULT_TIMEOUT
) -> dict[str, dict[Pair, Job]]:
    """The jobs a default run on ``pool`` executes, by source (``own``, then each retriever), each keyed by
    its (code sha256, tests sha256); one pair may appear under several sources."""
    out: dict[str, dict[Pair, Job]] = {"own": {}}
    for i, q in enumerate(pool.queries):
        for cid in q.correct_corpus_ids + q.paired_distractor_corpus_ids:
            job = _job(pool, pool.snippet(cid).code, i, timeout)
            out["own"][job.key] = job
    for name in retrievers:
        with tempfile.TemporaryDirectory(prefix="agentbench-verdicts-") as stores:
            searcher = open_searcher(pool, parse_embedder(name), store_dir=stores, progress=False)
            try:
                hits = searcher.search_many([q.query for q in pool.queries], DEPTH)
            finally:
                searcher.close()
        out[name] = {}
        for i, q_hits in enumerate(hits):
            for hit in q_hits:
                job = _job(pool, hit.code, i, timeout)
                out[name][job.key] = job
    return out


def write(
    path: Path,
    pool_name: str,
    executor_config: str,
    timeout: float,
    results: dict[Pair, ExecResult],
    covers: dict,
) -> Path:
    """Write ``results`` (by pair, none an infrastructure error) as the shipped file of ``pool_name``."""
    pairs = sorted(results)
    codes = sorted({c for c, _ in pairs})
    tests = sorted({t for _, t in pairs})
    names = sorted({o for r in results.values() for o in r.results})
    lengths = [len(results[p].results) for p in pairs]
    arrays = {
        "config": np.array(job_config(executor_config, timeout)),
        "codes": np.array([list(bytes.fromhex(c)) for c in codes], dtype=np.uint8).reshape(-1, 32),
        "tests": np.array([list(bytes.fromhex(t)) for t in tests], dtype=np.uint8).reshape(-1, 32),
        "code_row": np.searchsorted(np.array(codes), [c for c, _ in pairs]).astype(np.uint32),
        "tests_row": np.searchsorted(np.array(tests), [t for _, t in pairs]).astype(np.uint32),
        "outcome_names": np.array(names, dtype=str),
        "outcomes": np.array([names.index(o) for p in pairs for o in results[p].results], dtype=np.uint8),
        "offsets": np.concatenate([[0], np.cumsum(lengths)]).astype(np.uint32),
        "duration": np.array([results[p].duration for p in pairs], dtype=np.float32),
        "cpu": np.array(
            [np.nan if results[p].cpu_seconds is None else results[p].cpu_seconds for p in pairs],
            dtype=np.float32,
        ),
    }
    meta = {
        "format": FORMAT,
        "pool": pool_name,
        "executor_config": executor_config,
        "timeout": timeout,
        "n_pairs": len(pairs),
        "covers": covers,
        "agentbench": _version("agentbench"),
        "data_sha256": data_sha256(arrays),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(tmp, meta=np.array(json.dumps(meta, sort_keys=True)), **arrays)
    tmp.replace(path)
    return path


def build(pool_name: str, cache_dir: Path | None = None, retrievers: Sequence[str] = RETRIEVERS) -> Path:
    """Make (reusing cached verdicts) and write the shipped verdicts of bundled pool ``pool_name``."""
    from ..execution.container import DockerExecutor

    pool = load_pool(pool_name)
    wanted = required_jobs(pool, retrievers)
    jobs = {key: job for part in wanted.values() for key, job in part.items()}
    cache = ExecCache(cache_dir / "executions" if cache_dir else None)
    with cache, DockerExecutor() as executor:
        label = f"{pool_name}: {len(jobs)} verdicts ({executor.describe()})"
        with progress_bar(label, len(jobs)) as advance:
            got = run_cached(executor, list(jobs.values()), cache, progress=advance)
        config = executor.config_key()
    broken = [r for r in got if r.infra_error]
    if broken:
        raise SandboxError(
            f"{len(broken)} of {len(got)} executions hit sandbox infrastructure errors (first: "
            f"{broken[0].infra_error}); run `{REGENERATE}` again, the verdicts obtained are cached"
        )
    covers = {"own": True, "retrievers": {name: DEPTH for name in retrievers}}
    results = dict(zip(jobs, got, strict=True))
    return write(shipped_path(pool_name), pool_name, config, DEFAULT_TIMEOUT, results, covers)


def problems(
    pool_name: str, pool: Pool | None = None, retrievers: Sequence[str] = (DEFAULT_EMBEDDER,)
) -> list[str]:
    """Why the shipped file of bundled pool ``pool_name`` does not serve every verdict a default run on the
    current pool (or ``pool``) needs with ``retrievers`` (empty when it does)."""
    path = shipped_path(pool_name)
    shipped = load(path)
    if shipped is None:
        return [f"{path} is missing or corrupt: run `{REGENERATE}`"]
    expected = default_config()
    if shipped.config != expected:
        return [
            f"{path} holds verdicts for {shipped.config}, a default run uses {expected}: run `{REGENERATE}`"
        ]
    out = []
    for source, jobs in required_jobs(pool or load_pool(pool_name), retrievers).items():
        missing = [key for key in jobs if shipped.get(*key) is None]
        if missing:
            what = "own snippets" if source == "own" else f"{source} top-{DEPTH} hits"
            out.append(
                f"{len(missing)} of {len(jobs)} pairs ({what}) of pool {pool_name} are not in {path.name}"
            )
    return [f"{p}: run `{REGENERATE}`" for p in out]


def _version(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=REGENERATE, description=__doc__)
    parser.add_argument(
        "--pool", action="append", choices=sorted(BUNDLED_POOLS), help="default: every bundled pool"
    )
    parser.add_argument(
        "--check", action="store_true", help="only check that the files cover a default run (exit 1 if not)"
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="agentbench cache directory whose execution verdicts to reuse (default: the usual one)",
    )
    args = parser.parse_args(argv)
    failed = False
    for name in args.pool or list(BUNDLED_POOLS):
        if args.check:
            found = problems(name, retrievers=RETRIEVERS)
            failed |= bool(found)
            print("\n".join(found) or f"{name}: ok")
        else:
            path = build(name, args.cache_dir)
            print(f"{name}: wrote {path} ({path.stat().st_size:,} bytes)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
