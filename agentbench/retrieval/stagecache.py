"""The retrieval stage's results, cached for runs, so a warm `agentbench run` starts generating at once.

Why: before its first LLM call, a warm run on core spent seconds recomputing a result it had computed
before: importing and opening Chroma, reading 10,110 verdicts, scoring exec@k with bootstrap intervals
(scipy). The result is a function of the pool's content, the retriever, the scoring settings, the
sandbox's configuration and agentbench's code, so a run keeps it under a key made of exactly those, in the
``retrievals`` store of :mod:`agentbench.cache`, and reads it back instead when the key matches.

The key holds: the sha256 of the pool as the run scores it (its JSON form after ``--tests``, ``--limit`` and
``--sample``), the embedder's :meth:`~.embedders.Embedder.config_key` (what the embedding cache keys on),
the cutoffs, seed, time limit and visible-test split, the bootstrap's resamples, the executor's
:meth:`~agentbench.execution.Executor.config_key`, and the sha256 of agentbench's own source files (any
code change recomputes). The store keeps one result per configuration: a new pool content or agentbench
version replaces it (:class:`StageKey`). A plug-in retriever (its code is not ours to hash), ``--rerank`` and a Chroma
server (``--chroma-url``: its contents can change under the same name) are never cached.

A result served from here says so: ``run_info.store`` is ``"cached"`` and its timings are those of the
lookup. ``agentbench retrieve`` never reads this store: it is the command that measures retrieval.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import NamedTuple

from ..cache import RETRIEVALS, JSONCache, store_dir
from ..execution import Executor
from ..pools.models import Pool
from ..pools.split import HeldOutSplit
from .embedders import Embedder
from .results import RetrievalResult, Timing
from .settings import RetrievalSettings

__all__ = ["RETRIEVALS", "StageKey", "cached_retrieval", "code_sha256", "stage_key"]

_PACKAGE = Path(__file__).resolve().parents[1]


@cache
def code_sha256() -> str:
    """sha256 over agentbench's ``.py`` files (relative path and bytes, in path order), once per process."""
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        digest.update(path.relative_to(_PACKAGE).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


class StageKey(NamedTuple):
    """Where a result is kept (``slot``) and what it must have been computed from (``digest``).

    The slot leaves out agentbench's code and the pool's contents, so a new version of either replaces
    the slot's result instead of adding one: the store holds one result per configuration, not one per
    commit of agentbench or edit of a pool."""

    slot: str
    digest: str


def stage_key(
    pool: Pool,
    embedder: Embedder,
    executor: Executor,
    settings: RetrievalSettings,
    split: HeldOutSplit | None,
    n_resamples: int,
) -> StageKey:
    """Everything that can change the retrieval stage's result."""
    where = [
        "retrieval-stage/1",
        pool.name,
        hashlib.sha256("\n".join(q.query_id for q in pool.queries).encode()).hexdigest(),
        embedder.config_key(),
        executor.config_key(),
        settings.model_dump_json(include={"ks", "timeout", "seed"}),
        "split=none" if split is None else f"split={split.visible!r}:{split.seed}",
        f"resamples={n_resamples}",
    ]
    slot = _sha("\n".join(where))
    content = _sha(pool.model_dump_json())
    return StageKey(slot, _sha(f"{slot}\n{code_sha256()}\n{content}"))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def cached_retrieval(
    key: StageKey | None, compute: Callable[[], RetrievalResult], *, store: Path | None = None
) -> RetrievalResult:
    """The result kept for ``key``, else ``compute()``'s (then kept in its slot). ``key=None`` only
    computes. A kept value for another digest, or one that no longer validates, is a miss; a store that
    cannot be written is reported once by :class:`~agentbench.cache.JSONCache` and the run goes on."""
    if key is None:
        return compute()
    start = time.perf_counter()
    with JSONCache(store or store_dir(RETRIEVALS), label="retrieval") as results:
        found = results.get(key.slot)
        if isinstance(found, dict) and found.get("digest") == key.digest:
            try:
                hit = RetrievalResult.model_validate(found.get("result"))
            except ValueError:
                hit = None
            if hit is not None and hit.run_info is not None:
                return _as_served(hit, time.perf_counter() - start)
        result = compute()
        results.set(key.slot, {"digest": key.digest, "result": result.to_json_dict()})
        return result


def _as_served(result: RetrievalResult, seconds: float) -> RetrievalResult:
    """``result`` marked as read from the cache, with the lookup's time as its only timing."""
    timing = Timing(
        index_s=0.0,
        search_s=0.0,
        execute_s=0.0,
        rerank_s=0.0,
        metrics_s=0.0,
        total_s=round(seconds, 3),
        encode_s=0.0,
        load_s=0.0,
    )
    info = result.run_info.model_copy(update={"store": "cached", "timing": timing})
    return result.model_copy(update={"run_info": info})
