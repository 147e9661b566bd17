"""The run summary (``summary.json``) as typed records; its JSON Schema is exported under ``docs/schema/``.

Every section is a model built by the code that computes it (:mod:`.propagation`, :mod:`.attribution`)
and written in exactly the JSON shape readers know. Versioned by ``schema_version``: a change that
renames, retypes or drops a field bumps it; added fields do not (readers ignore what they do not know,
and :class:`~agentbench.models.Record` keeps it).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Discriminator, Field, Tag, model_validator

from ..models import Record
from ..retrieval.rerank.base import RerankStats
from ..retrieval.rerank.consensus import ConsensusStats
from ..retrieval.rerank.registry import with_typed_stats
from ..retrieval.rerank.visible import VisibleTestsStats
from ..retrieval.results import Number, RerankCost
from .passk import SamplesSummary

__all__ = [
    "SUMMARY_VERSION",
    "RunSummary",
    "RunIdentity",
    "RetrievalSummary",
    "Proportion",
    "ConditionStats",
    "BugTypeEffect",
    "BugInheritance",
    "Top1Passes",
    "Propagation",
    "Unavailable",
    "CountEffect",
    "DifferenceEffect",
    "ShareOfGain",
    "KindShare",
    "Counterfactual",
    "Decomposition",
    "Attribution",
    "RerankSummary",
    "AgentStats",
    "LLMUsage",
    "QueryOutcome",
    "SummaryTiming",
]

SUMMARY_VERSION = 2
"""2: adds ``attribution`` (paired per-query effects of retrieval) and ``per_query``."""


class RunIdentity(Record):
    llm: str
    """the agent's name: the LLM, or the agent plug-in"""
    embedder: str
    """the retriever's name: the embedder, or the retriever plug-in"""
    agent: str | None = None
    retriever: str | None = None
    pool: str
    seed: int
    task_text: Literal["spec", "query", "mixed"] | None = None
    """what generation prompts stated the task with: the pool's specs, its retrieval queries (a pool without
    specs), or both (some queries have specs)"""


class RetrievalSummary(Record):
    """The retrieval stage's headline numbers (the full results are in ``retrieval.json``)."""

    model: str | None = None
    errors: int = 0
    """queries a retriever plug-in failed on (scored as misses)"""
    metrics: dict[str, Number] = Field(default_factory=dict)
    ci95: dict[str, list[Number | None] | None] = Field(default_factory=dict)
    diagnostics: dict[str, Any] = Field(default_factory=dict)
    """the retrieval stage's rank-1 failure analysis, as in ``retrieval.json``"""


class Proportion(Record):
    """A pass rate with its Wilson 95% interval (None for both when ``n`` is 0)."""

    n: int
    """records scored"""
    passed: int
    pass_rate: Number | None
    ci95: list[Number] | None


class ConditionStats(Proportion):
    """One condition: pass rate with a Wilson 95% interval over scored records, and the unscored ones."""

    llm_errors: int = 0
    """records whose LLM call failed (not scored)"""
    infra_errors: int = 0
    """records whose sandbox failed (not scored)"""
    no_code: int = 0
    """replies with no code in them (scored as failures)"""
    agent_errors: int = 0
    """an agent plug-in raised or returned something unusable (scored as failures)"""
    retriever_errors: int = 0
    """a retriever plug-in failed on the query (scored as failures)"""


class BugInheritance(Record):
    failures_with_buggy_context: int
    """failed generations whose first context snippet fails the query's tests"""
    inherited: int
    """those whose per-assert pass/fail pattern equals the context snippet's"""


class BugTypeEffect(Record):
    """Generations given a buggy context snippet of one bug type."""

    n: int
    repair_rate: Number | None
    """share that passed anyway"""
    bug_inheritance_rate: Number | None
    """share of the failed ones with the snippet's per-assert pattern"""


class Top1Passes(Record):
    """The rag pass rate by what the top-1 context snippet was."""

    canonical: Proportion
    own_distractor: Proportion
    other_snippet: Proportion


class Propagation(Record):
    """How retrieval errors reach the generated code (definitions in :mod:`.propagation`)."""

    bug_inheritance_rate: Number | None
    """among failed generations with buggy context, the share with the snippet's per-assert pattern"""
    bug_inheritance: BugInheritance
    mutated_line_rate: Number | None
    """among those, the share where the distractor's edited line (or missing guard) reappears"""
    repair_rate: Number | None
    """the pass rate of generations given buggy context"""
    repair_rate_by_condition: dict[str, Number | None]
    rag_pass_by_top1: Top1Passes
    retrieval_errors: int
    """rag records whose top-1 fails the query's tests"""
    retrieval_errors_became_failures: Number | None
    """the share of those that failed end to end"""
    by_bug_type: dict[str, BugTypeEffect]


class Unavailable(Record):
    """An effect that cannot be computed on this run, and why."""

    model_config = ConfigDict(extra="forbid")  # in the JSON Schema, only {n, reason} is "unavailable"

    n: int = 0
    reason: str


class CountEffect(Record):
    """Queries where something happened (a retrieval-induced failure or rescue), with a bootstrap CI."""

    n: int
    """queries with both conditions scored"""
    count: int
    rate: Number | None
    ci95: list[Number] | None
    """paired 95% bootstrap interval of the rate"""
    p_value: Number | None
    """exact McNemar p of the condition pair"""


class DifferenceEffect(Record):
    """A difference of pass rates on the same queries (other − baseline)."""

    n: int
    baseline: str
    other: str
    baseline_rate: Number | None
    other_rate: Number | None
    difference: Number | None
    ci95: list[Number] | None
    """paired 95% bootstrap interval of the difference"""
    p_value: Number | None
    """exact McNemar p"""


class ShareOfGain(Record):
    """(rag − closed_book) / (oracle − closed_book) on the queries with all three scored."""

    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset({"reason"})

    n: int
    rag_gain: Number | None
    oracle_gain: Number | None
    share: Number | None
    ci95: list[Number] | None
    reason: str | None = None
    """why ``share`` is None (oracle gains nothing over closed_book); absent otherwise"""


class KindShare(Record):
    """One kind of rag top-1: its share of queries, the pass rate given it, and share × pass rate."""

    n: int
    share: Number | None
    pass_rate: Number | None
    contribution: Number | None


class Counterfactual(Record):
    """rag's outcome where the top-1 passes the tests, oracle's where it does not ("had exec@1 been 1")."""

    n: int
    rag_pass_rate: Number | None
    rag_pass_rate_if_exec1_were_1: Number | None = Field(alias="rag_pass_rate_if_exec@1_were_1")
    oracle_pass_rate: Number | None
    ranking_cost: Number | None
    """counterfactual − rag: what the ranking costs"""
    context_use_gap: Number | None
    """oracle − counterfactual: the model not using correct context as well as the canonical"""


def _unavailable_or(model: type[Record]) -> Any:
    """``model``, or :class:`Unavailable` where it cannot be computed: a value of just ``n`` and
    ``reason`` is the latter (a :class:`ShareOfGain` may carry a reason beside its numbers)."""

    def tag(value: Any) -> str:
        if isinstance(value, dict):
            return "unavailable" if "reason" in value and set(value) <= {"n", "reason"} else "available"
        return "unavailable" if isinstance(value, Unavailable) else "available"

    return Annotated[
        Annotated[model, Tag("available")] | Annotated[Unavailable, Tag("unavailable")],
        Discriminator(tag),
    ]


MaybeCount = _unavailable_or(CountEffect)
MaybeDifference = _unavailable_or(DifferenceEffect)
MaybeShareOfGain = _unavailable_or(ShareOfGain)
MaybeCounterfactual = _unavailable_or(Counterfactual)


class Decomposition(Record):
    """The rag pass rate split over what the top-1 was: Σ P(kind) × P(pass | kind)."""

    n: int
    rag_pass_rate: Number | None
    by_top1_kind: dict[str, KindShare]
    """kind (canonical, own_distractor, other_snippet, none) -> its share, pass rate and contribution"""
    counterfactual: MaybeCounterfactual


MaybeDecomposition = _unavailable_or(Decomposition)


class Attribution(Record):
    """What retrieval did to this agent, query by query (definitions in :mod:`.attribution`)."""

    n_queries: int
    resamples: int
    """bootstrap resamples (one seeded set shared by every interval)"""
    seed: int
    retrieval_induced_failures: MaybeCount
    """closed_book passes, rag fails, the rag top-1 fails the tests"""
    retrieval_rescues: MaybeCount
    """closed_book fails, rag passes"""
    net_effect_of_retrieval: MaybeDifference
    """rag − closed_book"""
    cost_of_buggy_context: MaybeDifference
    """distractor − closed_book"""
    value_of_right_context: MaybeDifference
    """oracle − closed_book"""
    retrieval_share_of_oracle_gain: MaybeShareOfGain
    decomposition: MaybeDecomposition = Field(
        default_factory=lambda: Unavailable(reason="written by an older agentbench")
    )
    """rag pass rate = Σ P(top-1 kind) × P(pass | kind), and the counterfactual: had exec@1 been 1"""
    transitions: dict[str, dict[str, int]] = Field(default_factory=dict)
    """closed_book → rag outcome (``pass→fail``, ...) -> rag top-1 kind -> queries"""


class RerankSummary(Record):
    """With --rerank: what the reranking was, what it gained end to end and what it cost."""

    name: str | None
    """the reranker; None when it was skipped"""
    skipped: str | None
    """why the reranker was skipped"""
    k: int | None
    visible_tests: str | None
    seed: int | None
    scored_on: str | None
    top1_changed: int | None
    """queries whose top-1 the reranker changed"""
    exec1_before: Number | None = Field(alias="exec@1_before")
    """retrieval exec@1 in vector order, on held-out asserts"""
    exec1_after: Number | None = Field(alias="exec@1_after")
    """retrieval exec@1 in reranked order, on held-out asserts"""
    rag_pass_rate: Number | None
    rag_reranked_pass_rate: Number | None
    cost: RerankCost
    """executions (and those run now rather than cached), wall and sandbox seconds"""
    stats: VisibleTestsStats | ConsensusStats | RerankStats
    """the reranker's own statistics (its model; ``{}`` for a reranker without any or a skipped one)"""

    @model_validator(mode="before")
    @classmethod
    def _stats_of_the_reranker(cls, data: Any) -> Any:
        """Read ``stats`` as the model of the reranker ``name`` names, as in the retrieval results."""
        return with_typed_stats(data)


class AgentStats(Record):
    """One tool condition: what the agent did with the tools, and repair and bug inheritance under buggy
    context (Wilson CIs; comparable with rag's, on the same held-out asserts)."""

    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset({"tasks_running_tests", "refused_untested"})

    n: int
    tool_calls_per_task: Number | None
    turns_per_task: Number | None
    """replies per task (built-in loop only)"""
    searches_per_task: Number | None
    test_runs_per_task: Number | None
    tasks_running_tests: int | None = None
    """tasks with at least one run_tests call (absent from summaries written before it was counted)"""
    refused_untested: int | None = None
    """answers and submits the test-first rule refused (before any run_tests; absent as above)"""
    searches_after_failing_tests: int
    tasks_searching_after_failing_tests: int
    valid_tool_call_rate: Number | None
    tagged_tool_call_rate: Number | None
    """valid calls in the exact format (not accepted leniently)"""
    replies_without_call_rate: Number | None
    submitted: int
    """tasks that ended with a submit call"""
    budget_exhausted: int
    """tasks that ran out of a budget (scored on their last code)"""
    tokens_per_task: Number | None
    cost_usd_per_task: Number
    repair: Proportion
    bug_inheritance: Proportion


class LLMUsage(Record):
    model: str
    calls: int
    cache_hits: int
    errors: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: Number


class QueryOutcome(Record):
    query_id: str
    top1_kind: str | None
    top1_passes: bool | None
    outcomes: dict[str, bool | float | None]
    """condition -> passed (None: not scored, e.g. an LLM error); with --samples, the pass fraction"""


class SummaryTiming(Record):
    llm_seconds: Number
    exec_seconds: Number


class RunSummary(Record):
    """Retrieval-only and end-to-end numbers of one run, side by side."""

    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset({"rerank", "agent", "attribution", "samples"})

    schema_version: int = SUMMARY_VERSION
    run: RunIdentity
    n_queries: int | None
    retrieval: RetrievalSummary
    conditions: dict[str, ConditionStats]
    propagation: Propagation
    """bug inheritance, mutated-line and repair rates, rag pass rate by top-1 kind (see
    :mod:`.propagation`)"""
    attribution: Attribution | None = None
    """retrieval-induced failures and rescues with CIs and McNemar p (see :mod:`.attribution`); None in a
    summary written before it existed"""
    side_by_side: dict[str, Number | None]
    by_domain: dict[str, dict[str, Proportion]]
    """domain -> condition -> pass rate"""
    rerank: RerankSummary | None = None
    """with --rerank: exec@1 and rag pass rate before and after reranking, and its cost"""
    agent: dict[str, AgentStats] | None = None
    """with the tool conditions (agent, agent_rag): per condition, tool calls, turns, searches, test runs,
    searches after a failing run_tests, valid tool-call rate, budgets run out, tokens and cost per task,
    and repair and bug inheritance under buggy context (Wilson CIs)"""
    llm: LLMUsage
    per_query: list[QueryOutcome] = Field(default_factory=list)
    timing: SummaryTiming
    samples: SamplesSummary | None = None
    """with --samples above 1: pass@k per condition, per-query pass fractions and flaky queries"""
