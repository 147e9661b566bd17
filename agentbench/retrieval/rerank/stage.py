"""The rerank stage: execution-aware reranking of the top-k retrieved snippets (``--rerank NAME``).

Rerankers (see :mod:`.registry`):

- ``exec-visible``: the agent knows some of the tests. Each candidate runs against the query's *visible*
  asserts in the sandbox; candidates passing all of them move first, vector order kept among ties
  (see :mod:`.visible`).
- ``exec-consensus``: no expected outputs known. Every candidate runs on inputs taken from the visible
  asserts' call arguments plus type-directed variations; the one agreeing most with the other candidates
  wins (see :mod:`.consensus`).
- ``ce:<model>``: a sentence-transformers cross-encoder scores (query, code) pairs; skipped with one line
  when the model is not available offline (see :mod:`.ce`).

Leak-freedom. Each query's asserts are split, deterministically by seed and query id, into visible and
held-out (:mod:`agentbench.pools.split`; at least one assert is always held out). A reranker only ever
receives :class:`~.base.RerankInput` values, which carry the visible asserts and never the held-out ones,
and with reranking on every metric, for the baseline and the reranked order alike, is computed on the
held-out asserts only. Candidate code only runs through the executor (the sandbox) and the execution
cache.
"""

from __future__ import annotations

import ast
import builtins
import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...errors import ConfigError
from ...execution.base import DEFAULT_TIMEOUT, Executor
from ...execution.cache import ExecCache
from ...pools.models import Pool, Query
from ...pools.split import DEFAULT_VISIBLE, HeldOutSplit, TestSplit, VisibleTests
from .._defaults import DEFAULT_RERANK_K
from ..hits import Hit
from ..ranking import Ranking
from .base import Candidate, Reranker, RerankerUnavailable, RerankInput, RerankOutcome, RerankStats, Sandbox
from .registry import parse_reranker

log = logging.getLogger(__name__)

__all__ = ["Reranking", "make_reranking", "entry_function", "rerank_stage"]

_BUILTINS = frozenset(dir(builtins))


def entry_function(query: Query, visible: Sequence[str]) -> str | None:
    """The function the asserts call: the pool's ``function_name`` metadata, else the non-builtin name
    called in most visible asserts (first seen wins a tie)."""
    named = query.metadata.get("function_name") if isinstance(query.metadata, dict) else None
    if isinstance(named, str) and named.isidentifier():
        return named
    counts: Counter[str] = Counter()
    for test in visible:
        try:
            tree = ast.parse(test)
        except SyntaxError:
            continue
        counts.update(
            {
                node.func.id
                for node in ast.walk(tree)
                if isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id not in _BUILTINS
            }
        )
    return counts.most_common(1)[0][0] if counts else None


# ---------------------------------------------------------------- applying a reranker to search results


@dataclass
class Reranking:
    """A reranker plus the split it runs under; passed to :func:`~agentbench.retrieval.evaluate.evaluate_retrieval`.

    ``reranker=None`` keeps the split (metrics on held-out asserts) without reordering anything: that is
    what a skipped reranker (a cross-encoder missing offline) falls back to.
    """

    reranker: Reranker | None
    visible: VisibleTests = field(default_factory=lambda: VisibleTests.parse(DEFAULT_VISIBLE))
    k: int = DEFAULT_RERANK_K
    seed: int = 0
    skipped: str | None = None

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ConfigError(f"--rerank-k must be at least 1, got {self.k}")

    @property
    def name(self) -> str | None:
        return self.reranker.name if self.reranker is not None else None

    @classmethod
    def prepare(
        cls, reranker: Reranker, visible: VisibleTests, k: int = DEFAULT_RERANK_K, seed: int = 0
    ) -> Reranking:
        """The rerank stage of a run or a ``retrieve`` (see
        :meth:`~agentbench.retrieval.settings.RetrievalSettings.reranking`).

        A reranker that cannot run here (a cross-encoder missing offline) is skipped with one logged line;
        the held-out split is kept, so every number stays on the same asserts as a run where it did run.
        """
        try:
            reranker.check()
        except RerankerUnavailable as exc:
            log.warning("rerank: %s", exc)
            return cls(None, visible, k, seed, skipped=str(exc))
        return cls(reranker, visible, k, seed)

    def split(self, query: Query) -> TestSplit:
        return HeldOutSplit(self.visible, self.seed).split(query)

    def inputs(self, pool: Pool, hits: Sequence[Sequence[Hit]]) -> list[RerankInput]:
        """What the reranker receives: visible asserts and the top ``k`` candidates, nothing else."""
        out = []
        for q, q_hits in zip(pool.queries, hits, strict=True):
            visible = self.split(q).visible
            candidates = tuple(Candidate(h.corpus_id, h.code, h.score) for h in q_hits[: self.k])
            function = entry_function(q, visible)
            out.append(RerankInput(q.query_id, q.query, function, visible, candidates, q.test_setup or ""))
        return out

    def apply(
        self,
        pool: Pool,
        hits: Sequence[Sequence[Hit]],
        executor: Executor,
        cache: ExecCache | None,
        timeout: float = DEFAULT_TIMEOUT,
        progress: bool = False,
    ) -> tuple[list[list[Hit]], dict, list[dict]]:
        """Reordered hits (top ``k`` reranked, the rest after them), the run's info, per-query details."""
        began = time.perf_counter()
        sandbox = Sandbox(executor, cache, timeout, progress)
        inputs = self.inputs(pool, hits)
        if self.reranker is None:
            outcomes = [RerankOutcome(list(range(len(inp.candidates)))) for inp in inputs]
        else:
            outcomes = self.reranker.rerank(inputs, sandbox)
        if len(outcomes) != len(inputs):
            raise ConfigError(
                f"reranker {self.name} returned {len(outcomes)} outcomes for {len(inputs)} queries"
            )
        reordered: list[list[Hit]] = []
        details: list[dict] = []
        moved = 0
        for q, q_hits, inp, outcome in zip(pool.queries, hits, inputs, outcomes, strict=True):
            if sorted(outcome.order) != list(range(len(inp.candidates))):
                raise ConfigError(f"reranker {self.name} returned no permutation for {inp.query_id}")
            top = [q_hits[i] for i in outcome.order] + list(q_hits[self.k :])
            moved += bool(top) and top[0].corpus_id != q_hits[0].corpus_id
            reordered.append([Hit(r, h.corpus_id, h.score, h.code) for r, h in enumerate(top, start=1)])
            details.append({"visible_tests": list(self.split(q).visible_idx), **outcome.details})
        seconds = time.perf_counter() - began
        info = {
            "name": self.name,
            "skipped": self.skipped,
            "k": self.k,
            "visible_tests": str(self.visible),
            "seed": self.seed,
            "scored_on": "held_out",
            "n_visible": sum(len(inp.visible_tests) for inp in inputs),
            "n_held_out": sum(len(self.split(q).held_out) for q in pool.queries),
            "top1_changed": moved,
            "cost": {
                "executions": sandbox.executions,
                "executed_now": sandbox.executed,
                "seconds": round(seconds, 3),
                "sandbox_seconds": round(sandbox.sandbox_seconds, 3),
            },
            "stats": self.reranker.summarize(outcomes) if self.reranker is not None else RerankStats(),
        }
        return reordered, info, details


def make_reranking(
    spec: str, visible: str | int | float = DEFAULT_VISIBLE, k: int = DEFAULT_RERANK_K, seed: int = 0
) -> Reranking:
    """``--rerank``, ``--visible-tests`` and ``--rerank-k`` as a :class:`Reranking`, checked before any work.

    Raises ConfigError for bad values and :class:`RerankerUnavailable` (a ConfigError) when the reranker
    cannot run here; callers that want to skip cleanly catch the latter.
    """
    reranking = Reranking(parse_reranker(spec), VisibleTests.parse(visible), k, seed)
    reranking.reranker.check()
    return reranking


def rerank_stage(
    reranking: Reranking,
    pool: Pool,
    ranking: Ranking,
    executor: Executor,
    cache: ExecCache | None,
    timeout: float = DEFAULT_TIMEOUT,
    progress: bool = False,
) -> tuple[Ranking, dict, list[dict]]:
    """The rerank stage, between retrieval and generation: the reordered ranking (every hit keeps its
    verdict), what the reranking was and cost, and per-query details for the results file."""
    hits, info, details = reranking.apply(pool, ranking.hits, executor, cache, timeout, progress)
    return ranking.reordered(hits), info, details
