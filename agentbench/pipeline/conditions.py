"""Generation conditions: what context the agent gets for a query, and on which asserts it is scored.

A condition is a small object in a registry. The pipeline asks each condition of a run to
:meth:`~Condition.plan` every query, and never names a condition itself, so a new condition (a tool-using
agent, a different context policy) plugs in with :func:`register` and no edit to the pipeline.

    @dataclass(frozen=True)
    class Worst(Condition):
        def plan(self, query, inputs):
            ids = inputs.ranked.get(query.query_id, [])[-1:]
            return Context(ids, kind_of(query, ids[0]) if ids else "none")

    register(Worst("worst", template="rag", description="the lowest-ranked snippet as context"))
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import ConfigError
from ..pools.models import Query
from .records import ContextKind

__all__ = [
    "Condition",
    "Context",
    "PlanInputs",
    "register",
    "get_condition",
    "available",
    "registered",
    "DEFAULT_CONDITIONS",
    "RAG_RERANKED",
    "kind_of",
    "uses_tools",
    "WithTools",
]

RAG_RERANKED = "rag_reranked"  # --rerank: the rag prompt with the reranked top-k as context


@dataclass(frozen=True)
class Context:
    """The snippets a condition shows for one query; ``error`` marks a query the retriever failed on
    (no generation, a ``retriever_error`` record)."""

    ids: list[str]
    kind: ContextKind
    error: str | None = None


@dataclass(frozen=True)
class PlanInputs:
    """What conditions may draw on: the retrieval stage's ranking, the rerank stage's, the run's k and seed."""

    ranked: Mapping[str, Sequence[str]]
    """query_id -> corpus ids in retrieval order"""
    reranked: Mapping[str, Sequence[str]]
    """query_id -> corpus ids in reranked order (empty without a reranker that ran)"""
    errors: Mapping[str, str]
    """query_id -> the retriever plug-in's error"""
    k: int = 1
    seed: int = 0


def kind_of(query: Query, corpus_id: str) -> ContextKind:
    if corpus_id in query.correct_corpus_ids:
        return "canonical"
    if corpus_id in query.paired_distractor_corpus_ids:
        return "own_distractor"
    return "other_snippet"


@dataclass(frozen=True)
class Condition:
    """One condition: its name, the prompt template it renders, and how it builds a query's context."""

    name: str
    template: str
    """the agent's prompt template (``prompts/<template>.md``)"""
    description: str = ""
    needs_rerank: bool = False
    """only available with --rerank (and then added after rag by default)"""
    in_default: bool = True
    """part of a run when --conditions is not given"""
    tools: bool = False
    """the agent gets search_code, run_tests (on visible asserts) and submit; a run with such a condition
    scores every condition on held-out asserts"""

    def plan(self, query: Query, inputs: PlanInputs) -> Context | None:
        """The context for ``query``, or None when the condition does not apply to it (no record)."""
        raise NotImplementedError

    def suite(self, query: Query, scored: Sequence[str]) -> tuple[str, ...]:
        """The asserts a generation is scored on; ``scored`` is the run's choice (held-out with --rerank)."""
        return tuple(scored)


@dataclass(frozen=True)
class ClosedBook(Condition):
    def plan(self, query: Query, inputs: PlanInputs) -> Context | None:
        return Context([], "none")


@dataclass(frozen=True)
class Retrieved(Condition):
    """The top k of a ranking as context: the retriever's (rag) or the reranker's (rag_reranked)."""

    source: str = "ranked"

    def plan(self, query: Query, inputs: PlanInputs) -> Context | None:
        ranking: Mapping[str, Sequence[str]] = getattr(inputs, self.source)
        if self.source == "reranked" and query.query_id not in ranking:
            return None  # the reranker was skipped: no record rather than a copy of rag
        ids = list(ranking.get(query.query_id, []))[: inputs.k]
        error = inputs.errors.get(query.query_id) if self.source == "ranked" else None
        return Context(ids, kind_of(query, ids[0]) if ids else "none", error)


@dataclass(frozen=True)
class Oracle(Condition):
    def plan(self, query: Query, inputs: PlanInputs) -> Context | None:
        return Context([query.correct_corpus_ids[0]], "canonical")


@dataclass(frozen=True)
class PairedDistractor(Condition):
    """One of the query's own distractors, chosen by seed; queries without one get no record."""

    def plan(self, query: Query, inputs: PlanInputs) -> Context | None:
        if not query.paired_distractor_corpus_ids:
            return None
        choice = random.Random(f"{inputs.seed}:{query.query_id}:distractor").choice(
            query.paired_distractor_corpus_ids
        )
        return Context([choice], "own_distractor")


@dataclass(frozen=True)
class WithTools(Condition):
    """A tool-using condition: no context (``agent``) or the retriever's top k up front (``agent_rag``)."""

    upfront: bool = False

    def plan(self, query: Query, inputs: PlanInputs) -> Context | None:
        if not self.upfront:
            return Context([], "none")
        ids = list(inputs.ranked.get(query.query_id, []))[: inputs.k]
        return Context(ids, kind_of(query, ids[0]) if ids else "none", inputs.errors.get(query.query_id))


_REGISTRY: dict[str, Condition] = {}


def register(condition: Condition, *, replace: bool = False) -> Condition:
    """Add a condition; its name becomes valid for ``--conditions`` and in every report."""
    if condition.name in _REGISTRY and not replace:
        raise ConfigError(f"condition {condition.name!r} is already registered")
    _REGISTRY[condition.name] = condition
    return condition


def registered() -> dict[str, Condition]:
    return dict(_REGISTRY)


def available(rerank: bool) -> list[str]:
    """Condition names a run may ask for."""
    return [c.name for c in _REGISTRY.values() if rerank or not c.needs_rerank]


def get_condition(name: str) -> Condition:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown condition {name!r}: use {', '.join(_REGISTRY)}") from None


def uses_tools(names: list[str] | tuple[str, ...]) -> bool:
    return any(get_condition(n).tools for n in names if n in _REGISTRY)


def default_conditions(rerank: bool = False) -> list[str]:
    return [c.name for c in _REGISTRY.values() if c.in_default and (rerank or not c.needs_rerank)]


register(ClosedBook("closed_book", "closed_book", "no context: what the model knows"))
register(Retrieved("rag", "rag", "the retriever's top k as context"))
register(
    Retrieved(
        RAG_RERANKED, "rag", "the reranked top k as context (--rerank)", needs_rerank=True, source="reranked"
    )
)
register(Oracle("oracle", "oracle", "the canonical solution as context"))
register(PairedDistractor("distractor", "distractor", "one of the query's own buggy clones as context"))
register(
    WithTools(
        "agent", "agent", "tools (search, visible tests, submit), no context", in_default=False, tools=True
    )
)
register(
    WithTools(
        "agent_rag",
        "agent_rag",
        "tools, and the retriever's top k up front as in rag",
        in_default=False,
        tools=True,
        upfront=True,
    )
)

DEFAULT_CONDITIONS: tuple[str, ...] = tuple(default_conditions())
