"""The main job: retrieve, generate under each condition, execute, record, summarise.

For each query and condition the agent gets a context (none, the retriever's top-k, the canonical, or one
paired distractor), writes the function through LiteLLM, and the sandbox runs the result against the
query's asserts. Records are appended as they complete, so ``--resume`` picks up where a killed run
stopped without redoing or duplicating anything.

This module holds the run's stages in order; the pieces live beside it: planning the (query, condition)
items (:mod:`.plan`), streaming their generation, execution and recording (:mod:`.streaming`), the record
of one item (:mod:`.outcome`) and the progress bars (:mod:`.progress_bar`).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from ..agent import Agent
from ..agent.generate import AgentLike
from ..agent.plugin import PluginAgent, plugin_agent
from ..errors import ConfigError, Interrupted, ModelError
from ..execution import Executor, make_executor
from ..execution.cache import ExecCache
from ..heap import frozen_heap
from ..llm import LLMClient
from ..llm.processes import worker_count
from ..pools import Pool, load_pool
from ..pools.split import HeldOutSplit
from ..retrieval import evaluate_retrieval
from ..retrieval.embedders import build_embedder
from ..retrieval.evaluate import N_RESAMPLES
from ..retrieval.results import RetrievalResult
from ..retrieval.stagecache import cached_retrieval, stage_key
from ..retrieval.store import check_server
from .conditions import get_condition, uses_tools
from .config import RunConfig
from .plan import WorkItem, context_verdicts, plan_items
from .progress_bar import ConditionProgress, progress_counts
from .records import RecordKey, RunRecord
from .rundir import RunDirectory, check_writable_dir
from .streaming import RunWork, generate_and_execute
from .tools import RunTools

__all__ = ["run_pipeline", "RunResult"]


@dataclass
class RunResult:
    """What a run produced; ``summary`` is filled in by the analysis stage (:func:`agentbench.api.evaluate_config`)."""

    directory: RunDirectory
    config: RunConfig
    records: list[RunRecord]
    retrieval: RetrievalResult
    summary: Any = None
    """an :class:`agentbench.analysis.summary.RunSummary`, set by the layer above"""
    llm_stats: dict = field(default_factory=dict)

    @property
    def run_dir(self):  # noqa: ANN201 - a Path
        return self.directory.path


def _make_agent(
    config: RunConfig, client: LLMClient | None, agent: object | None
) -> tuple[AgentLike, LLMClient | None]:
    """The agent under test: a plug-in (``config.agent``/``agent``) or the built-in LiteLLM agent; every
    configuration problem (missing key, unknown model, unimportable plug-in, bad template) fails here."""
    if agent is not None or config.agent:
        if config.prompt:  # the config cannot see an agent object from the Python API
            raise ConfigError(
                "--prompt applies to the built-in agent; an --agent plug-in writes its own prompts"
            )
        return plugin_agent(agent if agent is not None else config.agent, config.concurrency), None
    client = client or LLMClient(
        config.llm,
        api_base=config.api_base,
        temperature=config.temperature,
        max_tokens=config.max_tokens,
        seed=config.seed,
        concurrency=config.concurrency,
        processes=worker_count(config.concurrency, config.llm_processes),
    )
    client.check()  # missing API key or unknown model: fail before any work
    built = Agent(client, prompt=config.prompt, budget=config.budget())
    for name in config.conditions:  # a missing or malformed template fails before any work
        built.template(get_condition(name).template)
    return built, client


def _warn_greedy_samples(config: RunConfig, agent: AgentLike) -> None:
    """Repeated samples of the built-in agent at temperature 0 are greedy decodes of one prompt: the same
    reply N times (a plug-in agent chooses its own decoding, so it is not warned about)."""
    if config.samples > 1 and config.temperature == 0 and not isinstance(agent, PluginAgent):
        print(
            f"agentbench: warning: --samples {config.samples} at temperature 0 decodes greedily, so the "
            "samples will be identical; set --temperature above 0 for pass@k",
            file=sys.stderr,
        )


def run_pipeline(
    config: RunConfig,
    *,
    client: LLMClient | None = None,
    agent: object | None = None,
    retriever: object | None = None,
    show_progress: bool = True,
    executor: Executor | None = None,
    exec_cache: ExecCache | None = None,
    retrieval: RetrievalResult | None = None,
    while_waiting: Callable[[], object] | None = None,
) -> RunResult:
    """Run (or resume) an end-to-end evaluation: retrieval, reranking, generation and execution under
    each condition, with records appended to the run directory as they finish.

    ``agent`` and ``retriever`` are plug-in objects (see :mod:`agentbench.agent.plugin` and
    :mod:`agentbench.retrieval.plugin`); without them ``config.agent``/``config.retriever`` name plug-ins
    as ``module:attr``, and without those the built-in LiteLLM agent and embedder are used.

    Several runs can share work (a matrix, :mod:`.matrix`): ``executor`` is a sandbox executor that stays
    open afterwards, ``exec_cache`` an open execution cache, and ``retrieval`` the retrieval stage's result
    for this pool, retriever and retrieval settings from another run, used instead of retrieving again.
    ``while_waiting`` is called once, when the first record is written: the run then mostly waits on its
    agent, and the caller can prepare what comes after (the analysis stage's imports).
    """
    check_writable_dir(RunDirectory.path_for(config), "--run-dir")  # before any model loads
    the_agent, client = _make_agent(config, client, agent)
    _warn_greedy_samples(config, the_agent)
    retriever_name = None
    if retriever is not None or config.retriever:
        from ..retrieval.plugin import check_retriever

        retriever, retriever_name = check_retriever(retriever if retriever is not None else config.retriever)
    named: dict[str, str] = {}
    if isinstance(the_agent, PluginAgent):
        named["agent"] = the_agent.name  # objects from the Python API are recorded by name
    if retriever_name:
        named["retriever"] = retriever_name
    if named:
        config = config.model_copy(update=named)
    RunDirectory.precheck(config)  # a bad --run-dir fails before the pool loads and retrieval starts
    full = load_pool(config.pool).with_tests(config.tests)  # --tests original: the added asserts left out
    queries = config.select(full.queries)
    pool = full.model_copy(update={"queries": queries})
    tooled = uses_tools(config.conditions)
    if retriever_name and (retrieval is None or tooled):
        # a factory builds its index now: its failure must not leave a run directory behind (with a
        # retrieval given, only the search tool still needs the index)
        from ..retrieval.plugin import plugin_searcher

        retriever = plugin_searcher(retriever, pool, retriever_name)
    else:  # a --chroma-url server that is down fails before a run directory exists
        check_server(config.chroma_url, config.embedder_spec)
    directory = RunDirectory.create(config)
    try:
        return _run_in(
            directory,
            pool,
            the_agent,
            client,
            retriever,
            retriever_name,
            executor,
            exec_cache,
            retrieval,
            tooled,
            show_progress,
            while_waiting,
        )
    except BaseException:
        directory.abandon()  # a start that failed before its first record leaves no trace
        raise
    finally:
        directory.close()


def _run_in(
    directory: RunDirectory,
    pool: Pool,
    the_agent: AgentLike,
    client: LLMClient | None,
    retriever: object | None,
    retriever_name: str | None,
    executor: Executor | None,
    exec_cache: ExecCache | None,
    retrieval: RetrievalResult | None,
    tooled: bool,
    show_progress: bool,
    while_waiting: Callable[[], object] | None = None,
) -> RunResult:
    """The run's work once its directory is held: retrieval, then every (query, condition) not yet done."""
    config = directory.config
    done = _resumable(directory)
    exec_cache = exec_cache if exec_cache is not None else ExecCache()
    reranking = config.reranking()
    # --rerank or a tool condition (run_tests sees the visible asserts): every condition on held-out ones
    split = reranking or (HeldOutSplit(config.visible, config.seed) if tooled and config.visible else None)
    suites = {q.query_id: split.split(q).held_out if split else tuple(q.test_suite) for q in pool.queries}
    sandbox = (
        nullcontext(executor)
        if executor is not None
        else make_executor(config.sandbox, config.sandbox_workers, config.ray)
    )
    with sandbox as executor:
        if retrieval is None:
            retrieval = _retrieve(
                pool, config, executor, exec_cache, retriever, retriever_name, split, show_progress
            )
        directory.write_retrieval(retrieval)
        tools = RunTools(pool, config, executor, exec_cache, split, retriever) if tooled and split else None
        items = plan_items(pool, retrieval, config)
        work = RunWork(
            pool=pool,
            agent=the_agent,
            executor=executor,
            exec_cache=exec_cache,
            config=config,
            suites=suites,
            context_verdicts=context_verdicts(items, pool, executor, exec_cache, config.timeout, suites),
            metas={d.corpus_id: d for d in pool.distractors},
            tools=tools,
        )
        with frozen_heap():  # the set-up's objects live on: no full collection rescans them mid-run
            _generate(directory, items, done, work, show_progress, while_waiting)
    order = {it.key: i for i, it in enumerate(items)}
    records = sorted((r for r in done.values() if r.key in order), key=lambda r: order[r.key])
    return RunResult(directory, config, records, retrieval, llm_stats=_llm_stats(client, the_agent))


def _retrieve(
    pool: Pool,
    config: RunConfig,
    executor: Executor,
    exec_cache: ExecCache,
    retriever: object | None,
    retriever_name: str | None,
    split: HeldOutSplit | None,
    show_progress: bool,
) -> RetrievalResult:
    """The retrieval stage: from the retrieval cache when its key matches (see
    :mod:`agentbench.retrieval.stagecache`), else evaluated (and stored there)."""
    reranking = config.reranking()
    settings = config.retrieval_settings()
    cacheable = retriever is None and reranking is None and not config.chroma_url
    # built, not checked: its key needs no model, and a hit needs none at all (a miss checks it)
    embedder = build_embedder(config.embedder_spec) if retriever is None else None
    key = stage_key(pool, embedder, executor, settings, split, N_RESAMPLES) if cacheable else None

    def compute() -> RetrievalResult:
        return evaluate_retrieval(
            pool,
            embedder,
            executor,
            settings,
            retriever=retriever,
            retriever_name=retriever_name,
            exec_cache=exec_cache,
            progress=show_progress,
            rerank=reranking,
            split=None if reranking else split,
        )

    return cached_retrieval(key, compute)


def _resumable(directory: RunDirectory) -> dict[RecordKey, RunRecord]:
    """The records a resumed run keeps, by key: all of them, or with ``--retry-errors`` the scored ones
    (an outage of the model's service or the sandbox is not a result: it is redone)."""
    done = {r.key: r for r in directory.load_records_for_resume()}
    if directory.config.retry_errors:
        done = {key: r for key, r in done.items() if r.scored}
    return done


def _generate(
    directory: RunDirectory,
    items: list[WorkItem],
    done: dict[RecordKey, RunRecord],
    work: RunWork,
    show_progress: bool,
    while_waiting: Callable[[], object] | None = None,
) -> None:
    """Generate, execute and record every item not in ``done`` (which gains each record once it is on
    disk), behind the progress bars; a fatal model error or Ctrl-C says how to continue the run."""
    todo = [it for it in items if it.key not in done]
    totals, finished = progress_counts([it.condition.name for it in items], list(done.values()))
    bar = ConditionProgress(totals, finished) if show_progress else None

    waiting = [while_waiting] if while_waiting is not None else []

    def written(rec: RunRecord) -> None:
        done[rec.key] = rec
        if bar:
            bar.record(rec)
        if waiting:
            waiting.pop()()

    try:
        if bar:
            bar.__enter__()
        if todo:
            asyncio.run(generate_and_execute(todo, work, directory, written))
    except ModelError as exc:  # fatal for the run (a model that died, a revoked key): say how to go on
        if not done:  # nothing to resume: a fresh start without records leaves no trace (abandon)
            raise type(exc)(f"{exc}; no record was written: fix this, then run the command again") from exc
        raise type(exc)(
            f"{exc}; the {len(done)} record(s) finished so far are kept in {directory.path}: fix this, then "
            f"continue with --resume --run-dir {directory.path}"
        ) from exc
    except KeyboardInterrupt:
        raise Interrupted(
            f"{len(done)} record(s) are kept in {directory.path}; continue with the same command and "
            f"--resume --run-dir {directory.path}"
        ) from None
    finally:
        if bar:
            bar.__exit__(None, None, None)
        if work.tools is not None:
            work.tools.close()


def _llm_stats(client: LLMClient | None, agent: AgentLike) -> dict:
    """The LLM client's call and cache counts; a plug-in agent without a client reports its own calls."""
    if client is not None:
        return client.stats.model_dump()
    return {"calls": getattr(agent, "calls", 0), "cache_hits": 0}
