"""What a reranker is given and returns, and the sandbox it runs candidates through.

A leaf of the rerank stage: the rerankers (:mod:`.visible`, :mod:`.consensus`, :mod:`.ce`), their
registry (:mod:`.registry`) and the stage itself (:mod:`.stage`) import these types; nothing here imports
a reranker.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from pydantic import ConfigDict

from ...errors import ConfigError, SandboxError
from ...execution.base import DEFAULT_TIMEOUT, ExecResult, Executor, Job
from ...execution.cache import ExecCache, run_cached
from ...models import Record
from ...progress import progress_bar

__all__ = [
    "Candidate",
    "RerankInput",
    "RerankOutcome",
    "Reranker",
    "RerankerUnavailable",
    "RerankStats",
    "Sandbox",
    "stable_order",
]


class RerankerUnavailable(ConfigError):
    """The reranker cannot run here (a model missing offline); callers skip reranking with one line."""


@dataclass(frozen=True)
class Candidate:
    """One retrieved snippet in vector order."""

    corpus_id: str
    code: str
    score: float


@dataclass(frozen=True)
class RerankInput:
    """Everything a reranker may use for one query: by construction, no held-out assert."""

    query_id: str
    query: str
    function_name: str | None
    visible_tests: tuple[str, ...]
    candidates: tuple[Candidate, ...]
    test_setup: str = ""
    """The query's test setup (imports the asserts use); run before the visible asserts."""


class RerankStats(Record):
    """A reranker's statistics over all queries (``rerank.stats`` in a results file).

    Rerankers with something to report subclass it; this empty model is what a reranker without
    statistics (a cross-encoder) or a skipped reranking writes: ``{}``."""

    model_config = ConfigDict(use_attribute_docstrings=True)  # the field docs go into docs/schema


@dataclass
class RerankOutcome:
    """``order``: a permutation of candidate positions, best first; ``details`` go to the results file."""

    order: list[int]
    details: dict = field(default_factory=dict)


@dataclass
class Sandbox:
    """The executor and cache a reranker runs candidates through, with a count of what it cost."""

    executor: Executor
    cache: ExecCache | None
    timeout: float = DEFAULT_TIMEOUT
    progress: bool = False
    executions: int = 0
    executed: int = 0
    sandbox_seconds: float = 0.0

    def run(self, jobs: Sequence[Job], label: str) -> list[ExecResult]:
        """Run through the execution cache; an infrastructure error fails the reranking."""
        if not jobs:
            return []
        with progress_bar(f"{label}: {len(jobs)} executions", len(jobs), enabled=self.progress) as adv:
            results = run_cached(self.executor, jobs, self.cache, progress=adv)
        broken = [r for r in results if r.infra_error]
        if broken:
            raise SandboxError(
                f"{len(broken)} of {len(results)} reranking executions hit sandbox infrastructure errors "
                f"(first: {broken[0].infra_error}); rerun to retry them, verdicts already obtained are cached"
            )
        self.executions += len(jobs)
        self.executed += len(
            {job.key for job, r in zip(jobs, results, strict=True) if not r.extra.get("cached")}
        )
        self.sandbox_seconds += sum(r.duration for r in results)
        return results


class Reranker(ABC):
    """Reorders each query's candidates; sees only :class:`RerankInput` (never held-out asserts).

    A subclass names the ``--rerank`` value it answers to (:attr:`form`, or :meth:`accepts` for a family
    of values such as ``ce:<model>``) and is added to the stage with :func:`~.registry.register`."""

    name: str = "base"
    form: ClassVar[str] = "base"
    """The ``--rerank`` value, as listed in messages (``exec-visible``, ``ce:<model-name-or-path>``)."""
    stats_model: ClassVar[type[RerankStats]] = RerankStats
    """What :meth:`summarize` returns, and what a results file's ``rerank.stats`` is read back as."""

    @classmethod
    def accepts(cls, spec: str) -> bool:
        """Whether the (stripped) ``--rerank`` value ``spec`` names this reranker."""
        return spec == cls.form

    @classmethod
    def from_spec(cls, spec: str) -> Reranker:
        """The reranker for an accepted ``--rerank`` value; no model is loaded yet."""
        return cls()

    def check(self) -> None:  # noqa: B027 - optional hook
        """Raise :class:`RerankerUnavailable` when the reranker cannot run here."""

    @abstractmethod
    def rerank(self, inputs: Sequence[RerankInput], sandbox: Sandbox) -> list[RerankOutcome]:
        """One outcome per input, in input order."""

    def summarize(self, outcomes: Sequence[RerankOutcome]) -> RerankStats:
        """Reranker-specific statistics over all queries."""
        return RerankStats()


def stable_order(keys: Sequence) -> list[int]:
    """Positions sorted by ``keys`` ascending; equal keys keep vector order."""
    return sorted(range(len(keys)), key=lambda i: keys[i])
