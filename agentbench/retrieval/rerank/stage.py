"""Execution-aware reranking of the top-k retrieved snippets (``--rerank NAME``).

Rerankers (:data:`RERANKER_FORMS`):

- ``exec-visible``: the agent knows some of the tests. Each candidate runs against the query's *visible*
  asserts in the sandbox; candidates passing all of them move first, vector order kept among ties.
- ``exec-consensus``: no expected outputs known. Every candidate runs on inputs taken from the visible
  asserts' call arguments plus type-directed variations; the one agreeing most with the other candidates
  wins (see :mod:`.rerank_consensus`).
- ``ce:<model>``: a sentence-transformers cross-encoder scores (query, code) pairs; skipped with one line
  when the model is not available offline (see :mod:`.rerank_ce`).

Leak-freedom. Each query's asserts are split, deterministically by seed and query id, into visible and
held-out (:func:`split_tests`; at least one assert is always held out). A reranker only ever receives
:class:`RerankInput` values, which carry the visible asserts and never the held-out ones, and with
reranking on every metric, for the baseline and the reranked order alike, is computed on the held-out
asserts only. Candidate code only runs through the executor (the sandbox) and the execution cache.
"""

from __future__ import annotations

import ast
import builtins
import logging
import math
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..execution.base import DEFAULT_TIMEOUT, Executor, Job
from ..execution.cache import ExecCache
from ..pools.models import Pool, Query
from .hits import Hit
from .ranking import Ranking
from .rerank_base import (
    Candidate,
    Reranker,
    RerankerUnavailable,
    RerankInput,
    RerankOutcome,
    Sandbox,
    stable_order,
)

if TYPE_CHECKING:
    from .settings import RetrievalSettings

log = logging.getLogger(__name__)

__all__ = [
    "RERANKER_FORMS",
    "DEFAULT_RERANK_K",
    "DEFAULT_VISIBLE",
    "VisibleTests",
    "TestSplit",
    "split_tests",
    "Candidate",
    "RerankInput",
    "RerankOutcome",
    "Reranker",
    "RerankerUnavailable",
    "Sandbox",
    "VisibleTestsReranker",
    "Reranking",
    "parse_reranker",
    "make_reranking",
    "entry_function",
    "stable_order",
    "HeldOutSplit",
    "reranking_for",
    "rerank_stage",
]

RERANKER_FORMS = "exec-visible, exec-consensus, ce:<model-name-or-path>"
DEFAULT_RERANK_K = 10
DEFAULT_VISIBLE = "0.5"


# ---------------------------------------------------------------- the visible/held-out split


@dataclass(frozen=True)
class VisibleTests:
    """How many asserts per query are visible: a count (``3``) or a fraction in (0, 1) (``0.5``)."""

    count: int | None = None
    fraction: float | None = None

    @classmethod
    def parse(cls, spec: str | int | float | VisibleTests) -> VisibleTests:
        if isinstance(spec, VisibleTests):
            return spec
        text = str(spec).strip()
        try:
            if text.isdigit():
                return cls(count=int(text))
            value = float(text)
        except ValueError:
            value = math.nan
        if not 0 < value < 1:
            raise ConfigError(
                f"--visible-tests must be a count (0, 1, 2, ...) or a fraction between 0 and 1, not {text!r}"
            )
        return cls(fraction=value)

    def n_visible(self, n_tests: int) -> int:
        """Visible asserts out of ``n_tests``: never all of them (one at least stays held out); a fraction
        rounds down but gives at least one visible assert when there are two or more."""
        if n_tests <= 1:
            return 0
        wanted = self.count if self.count is not None else max(1, math.floor(self.fraction * n_tests))
        return min(wanted, n_tests - 1)

    def __str__(self) -> str:
        return str(self.count) if self.count is not None else f"{self.fraction:g}"


@dataclass(frozen=True)
class TestSplit:
    """One query's asserts, split; ``visible_idx`` are positions in the original suite."""

    __test__ = False  # not a pytest class

    visible: tuple[str, ...]
    held_out: tuple[str, ...]
    visible_idx: tuple[int, ...]


def split_tests(tests: Sequence[str], visible: VisibleTests, seed: int, key: str) -> TestSplit:
    """Deterministic split of ``tests`` by ``seed`` and ``key`` (the query id); both parts keep suite order."""
    n = len(tests)
    rng = random.Random(f"{seed}:{key}:visible-tests")
    chosen = tuple(sorted(rng.sample(range(n), visible.n_visible(n))))
    picked = set(chosen)
    return TestSplit(
        visible=tuple(tests[i] for i in chosen),
        held_out=tuple(t for i, t in enumerate(tests) if i not in picked),
        visible_idx=chosen,
    )


@dataclass(frozen=True)
class HeldOutSplit:
    """The visible/held-out split without a reranker: what the tool-using conditions run (visible asserts
    in ``run_tests``) and are scored on (held-out ones), the same split as ``--rerank`` would make."""

    visible: VisibleTests
    seed: int = 0

    def split(self, query: Query) -> TestSplit:
        return split_tests(query.test_suite, self.visible, self.seed, query.query_id)


# ---------------------------------------------------------------- what a reranker sees and returns


class VisibleTestsReranker(Reranker):
    """``exec-visible``: candidates passing every visible assert first, vector order among ties."""

    name = "exec-visible"

    def rerank(self, inputs: Sequence[RerankInput], sandbox: Sandbox) -> list[RerankOutcome]:
        jobs = [
            Job(c.code, inp.visible_tests, sandbox.timeout, inp.test_setup)
            for inp in inputs
            if inp.visible_tests
            for c in inp.candidates
        ]
        results = iter(sandbox.run(jobs, "reranking on visible asserts"))
        outcomes = []
        for inp in inputs:
            if inp.visible_tests:
                passes = [next(results).passed for _ in inp.candidates]
            else:  # nothing visible: every candidate ties, vector order stays
                passes = [True] * len(inp.candidates)
            outcomes.append(RerankOutcome(stable_order([not p for p in passes]), {"passes_visible": passes}))
        return outcomes

    def summarize(self, outcomes: Sequence[RerankOutcome]) -> dict:
        passes = [o.details["passes_visible"] for o in outcomes]
        return {
            "queries_with_a_visible_pass": sum(any(p) for p in passes),
            "queries_where_all_pass_visible": sum(all(p) for p in passes if p),
            "candidates_passing_visible": sum(sum(p) for p in passes),
            "candidates": sum(len(p) for p in passes),
        }


def parse_reranker(spec: str) -> Reranker:
    """A ``--rerank`` value as a reranker (no model loaded yet); ConfigError naming every form if unknown."""
    text = spec.strip()
    if text == "exec-visible":
        return VisibleTestsReranker()
    if text == "exec-consensus":
        from .rerank_consensus import ConsensusReranker

        return ConsensusReranker()
    if text.startswith("ce:") and text[3:]:
        from .rerank_ce import CrossEncoderReranker

        return CrossEncoderReranker(text)
    raise ConfigError(f"unknown reranker {spec!r}: use one of {RERANKER_FORMS}")


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
    """A reranker plus the split it runs under; passed to :func:`~.evaluate.evaluate_retrieval`.

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

    def split(self, query: Query) -> TestSplit:
        return split_tests(query.test_suite, self.visible, self.seed, query.query_id)

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
            "stats": self.reranker.summarize(outcomes) if self.reranker is not None else {},
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


def reranking_for(settings: RetrievalSettings) -> Reranking | None:
    """The rerank stage of a run or a ``retrieve``: None without ``--rerank``.

    A reranker that cannot run here (a cross-encoder missing offline) is skipped with one logged line;
    the held-out split is kept, so every number stays on the same asserts as a run where it did run.
    """
    if settings.reranker is None or settings.visible is None:
        return None
    reranking = Reranking(settings.reranker, settings.visible, settings.rerank_k, settings.seed)
    try:
        settings.reranker.check()
    except RerankerUnavailable as exc:
        log.warning("rerank: %s", exc)
        return Reranking(None, settings.visible, settings.rerank_k, settings.seed, skipped=str(exc))
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
