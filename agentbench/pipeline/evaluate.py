"""The main job: retrieve, generate under each condition, execute, record, summarise.

For each query and condition the agent gets a context (none, the retriever's top-k, the canonical, or one
paired distractor), writes the function through LiteLLM, and the sandbox runs the result against the
query's asserts. Records are appended as they complete, so ``--resume`` picks up where a killed run
stopped without redoing or duplicating anything.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from ..agent import Agent, Generation, Task
from ..agent.generate import AgentLike
from ..agent.plugin import PluginAgent, plugin_agent
from ..errors import ConfigError, Interrupted, ModelError
from ..execution import ExecResult, Executor, Job, make_executor
from ..execution.cache import ExecCache, run_cached
from ..llm import LLMClient
from ..llm.processes import auto_processes
from ..pools import Pool, Query, load_pool
from ..pools.models import DistractorMeta
from ..pools.split import HeldOutSplit
from ..progress import stderr
from ..retrieval import evaluate_retrieval
from ..retrieval.results import RetrievalResult
from ..retrieval.store import check_server
from .conditions import Condition, PlanInputs, get_condition, uses_tools
from .config import RunConfig
from .records import ContextKind, RunRecord
from .rundir import RunDirectory, check_writable_dir
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


@dataclass
class _Item:
    query: Query
    condition: Condition
    context_ids: list[str]
    kind: ContextKind
    error: str | None = None
    """The retriever plug-in failed on this query: no generation, a ``retriever_error`` record."""


def _plan(pool: Pool, retrieval: RetrievalResult, config: RunConfig) -> list[_Item]:
    """Every (query, condition) of the run, in condition order, each condition building its context."""
    inputs = PlanInputs(
        ranked=retrieval.ranking(),
        reranked=retrieval.reranking(),  # empty without a reranker that ran: no rag_reranked records
        errors={e.query_id: e.error for e in retrieval.errors},
        k=config.k,
        seed=config.seed,
    )
    items: list[_Item] = []
    for name in config.conditions:
        condition = get_condition(name)
        for q in pool.queries:
            ctx = condition.plan(q, inputs)
            if ctx is not None:
                items.append(_Item(q, condition, list(ctx.ids), ctx.kind, ctx.error))
    return items


def _reappears(meta: DistractorMeta | None, distractor_code: str, code: str) -> bool | None:
    """Does the distractor's edit show up in the generation: its mutated line, or (for a removed guard)
    a copy of the distractor that lacks the guard?"""
    if meta is None or not code or not meta.has_line:
        return None
    lines = {line.strip() for line in code.splitlines() if line.strip()}
    if meta.bug_type == "remove_edge_case_check" or not meta.line_after:
        body = {line.strip() for line in distractor_code.splitlines() if line.strip()}
        copied = len(body & lines) >= len(body) / 2
        removed = meta.line_before.splitlines()[:1]
        return copied and not (removed and removed[0].strip() in lines)
    return meta.line_after.strip() in lines and meta.line_before.strip() not in lines


class _Progress:
    """A bar per condition with counts, pass rate so far and ETA."""

    def __init__(self, totals: dict[str, int], done: dict[str, list[bool]]) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("[bold]{task.description:<12}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("pass {task.fields[rate]}"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=stderr,
        )
        self.passes = {c: list(v) for c, v in done.items()}
        self.tasks = {
            c: self.progress.add_task(c, total=n, completed=len(done.get(c, [])), rate=self._rate(c))
            for c, n in totals.items()
        }

    def _rate(self, condition: str) -> str:
        seen = self.passes.get(condition, [])
        return f"{sum(seen) / len(seen):.2f}" if seen else "-"

    def record(self, rec: RunRecord) -> None:
        if rec.scored:
            self.passes.setdefault(rec.condition, []).append(rec.passed)
        self.progress.update(self.tasks[rec.condition], advance=1, rate=self._rate(rec.condition))

    def __enter__(self) -> _Progress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)


class _Executions:
    """Runs the jobs of finished generations in batches on a worker thread while generation goes on.

    Jobs that arrive while a batch runs form the next batch, so executions overlap with LLM calls and
    the executor still gets many jobs at once to spread over its workers. ``lock`` serialises the
    executor with the tool conditions' own uses of it."""

    def __init__(self, executor: Executor, cache: ExecCache, lock: threading.Lock | None) -> None:
        self.executor, self.cache = executor, cache
        self.lock = lock or threading.Lock()
        self._pending: list[tuple[Job, asyncio.Future]] = []
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._loop())

    async def run(self, job: Job) -> tuple[ExecResult, float]:
        """The job's verdict and the seconds per job of the batch it ran in."""
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending.append((job, future))
        self._wake.set()
        return await future

    def _run_batch(self, jobs: list[Job]) -> list[ExecResult]:
        with self.lock:
            return run_cached(self.executor, jobs, self.cache)

    async def _loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._pending = self._pending, []
            if not batch:
                continue
            started = time.perf_counter()
            try:
                results = await asyncio.to_thread(self._run_batch, [job for job, _ in batch])
            except Exception as exc:  # reaches the items waiting for it, which fail the run
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            per_job = (time.perf_counter() - started) / len(batch)
            for (_, future), result in zip(batch, results, strict=True):
                if not future.done():
                    future.set_result((result, per_job))

    def close(self) -> None:
        self._task.cancel()


class _RecordWriter:
    """Appends finished records to the run directory off the event loop, each batch with one fsync
    (an fsync per record costs milliseconds and would cap the run's throughput); ``written`` is called
    for every record once it is on disk."""

    def __init__(self, directory: RunDirectory, written: Callable[[RunRecord], None]) -> None:
        self.directory, self.written = directory, written
        self._pending: list[RunRecord] = []
        self._closing = False
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._loop())

    def add(self, record: RunRecord) -> None:
        self._pending.append(record)
        self._wake.set()

    async def _loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._pending = self._pending, []
            if batch:
                await asyncio.to_thread(self.directory.append_records, batch)
                for rec in batch:
                    self.written(rec)
            if self._closing and not self._pending:
                return

    async def close(self) -> None:
        """Write what is still pending and stop (also when the run fails: nothing finished is lost). The
        loop is not cancelled: a batch being written when it was would be on disk but not reported."""
        self._closing = True
        self._wake.set()
        await self._task


async def _generate_and_execute(
    items: list[_Item],
    pool: Pool,
    agent: AgentLike,
    executor: Executor,
    exec_cache: ExecCache,
    context_verdicts: dict[tuple[str, str], list[str]],
    metas: dict[str, DistractorMeta],
    config: RunConfig,
    suites: dict[str, tuple[str, ...]],
    directory: RunDirectory,
    written: Callable[[RunRecord], None],
    tools: RunTools | None = None,
) -> None:
    """Generate, execute and record every item, streaming: each item is executed as soon as its generation
    is back and recorded as soon as its verdict is, while other items' LLM calls are in flight. The LLM
    client bounds the requests in flight (``--concurrency``); ``4 x concurrency`` items are worked on at
    once, so slow executions or retrying requests do not leave LLM slots idle. A fatal error (ModelError)
    cancels the rest; every record finished before it is written."""
    loop = asyncio.get_running_loop()
    # asyncio.to_thread's default pool has min(32, cores + 4) threads: too few for plug-in agents and tool
    # calls at a high --concurrency
    loop.set_default_executor(ThreadPoolExecutor(max_workers=config.concurrency + 8))
    executions = _Executions(executor, exec_cache, tools.lock if tools is not None else None)
    writer = _RecordWriter(directory, written)
    queue = iter(items)

    async def one(it: _Item) -> RunRecord:
        started = time.perf_counter()
        task = Task.from_canonical(
            it.query.query_id,
            it.query.generation_text,
            pool.snippet(it.query.correct_corpus_ids[0]).code,
            context=[pool.snippet(c).code for c in it.context_ids],
            tests=it.query.test_suite,
        ).with_tools(tools.for_query(it.query) if tools is not None and it.condition.tools else None)
        gen = await (_skipped(task, it) if it.error else agent.generate(task, it.condition.template))
        verdict, exec_seconds = None, 0.0
        if gen.status == "ok":
            job = Job(gen.code, _suite(it, suites), config.timeout, it.query.test_setup or "")
            verdict, exec_seconds = await executions.run(job)
        return _record(
            it,
            gen,
            verdict,
            exec_seconds,
            time.perf_counter() - started,
            pool,
            context_verdicts,
            metas,
            tools,
        )

    async def worker() -> None:
        for it in queue:  # one shared iterator: each item is taken by exactly one worker
            writer.add(await one(it))

    workers = [asyncio.create_task(worker()) for _ in range(min(len(items), max(4 * config.concurrency, 8)))]
    try:
        await asyncio.gather(*workers)
    except asyncio.CancelledError:  # Ctrl-C or SIGTERM: the jobs running in the sandbox are killed now
        executor.close()  # (a batch would otherwise run to its end before the process can exit)
        raise
    finally:
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        executions.close()
        await writer.close()


def _record(
    it: _Item,
    gen: Generation,
    verdict: ExecResult | None,
    exec_seconds: float,
    seconds: float,
    pool: Pool,
    context_verdicts: dict[tuple[str, str], list[str]],
    metas: dict[str, DistractorMeta],
    tools: RunTools | None,
) -> RunRecord:
    """The record of one (query, condition): generation, verdict and what its context was."""
    status = "retriever_error" if it.error else gen.status
    if verdict is not None and verdict.infra_error:
        status = "infra_error"
    first = it.context_ids[0] if it.context_ids else None
    ctx_results = context_verdicts.get((it.query.query_id, first), []) if first else []
    ctx_passes = (bool(ctx_results) and all(r == "pass" for r in ctx_results)) if first else None
    results = list(verdict.results) if verdict is not None else []
    passed = bool(verdict is not None and verdict.passed)
    buggy = first is not None and ctx_passes is False
    inherited = None
    if buggy and status in ("ok", "no_code") and not passed and results:
        inherited = [r == "pass" for r in results] == [r == "pass" for r in ctx_results]
    snippet = pool.snippet(first) if first else None
    return RunRecord(
        query_id=it.query.query_id,
        condition=it.condition.name,
        domain=it.query.domain,
        context_ids=it.context_ids,
        context_kind=it.kind,
        context_passes=ctx_passes,
        context_results=ctx_results,
        context_bug_type=(snippet.bug_type or "") if snippet else "",
        task_text="spec" if it.query.spec else "query",
        messages=gen.messages,
        response=gen.response,
        code=gen.code,
        status=status,
        error=it.error or gen.error or (verdict.infra_error if verdict is not None else None),
        results=results,
        passed=passed,
        inherited_outcomes=inherited,
        mutated_line_reappears=(
            _reappears(metas.get(first or ""), snippet.code, gen.code) if buggy and snippet else None
        ),
        prompt_tokens=gen.usage.prompt_tokens,
        completion_tokens=gen.usage.completion_tokens,
        cost_usd=gen.cost_usd,
        cached=gen.cached,
        llm_seconds=gen.llm_seconds,
        exec_seconds=exec_seconds if verdict is not None else 0.0,
        seconds=seconds,
        trajectory=gen.trajectory,
        tool_stats=(
            {**gen.tool_stats, "visible_tests": list(tools.split.split(it.query).visible_idx)}
            if gen.tool_stats is not None and tools is not None
            else gen.tool_stats
        ),
    )


async def _skipped(task: Task, item: _Item) -> Generation:
    """No generation for a query the retriever plug-in failed on."""
    return Generation(
        task_id=task.task_id,
        condition=item.condition.name,
        model="",
        messages=[],
        function_name=task.function_name,
    )


def _context_verdicts(
    items: list[_Item],
    pool: Pool,
    executor: Executor,
    exec_cache: ExecCache,
    timeout: float,
    suites: dict[str, tuple[str, ...]],
) -> dict[tuple[str, str], list[str]]:
    """Per-assert outcomes of each first context snippet on its query's tests (cached executions)."""
    pairs = sorted({(it.query.query_id, it.context_ids[0]) for it in items if it.context_ids})
    setups = {q.query_id: q.test_setup or "" for q in pool.queries}
    jobs = [Job(pool.snippet(cid).code, suites[qid], timeout, setups[qid]) for qid, cid in pairs]
    results = run_cached(executor, jobs, exec_cache)
    return {pair: list(r.results) for pair, r in zip(pairs, results, strict=True)}


def _suite(item: _Item, suites: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    return item.condition.suite(item.query, suites[item.query.query_id])


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
        processes=(
            auto_processes(config.concurrency) if config.llm_processes is None else config.llm_processes
        ),
    )
    client.check()  # missing API key or unknown model: fail before any work
    built = Agent(client, prompt=config.prompt, budget=config.budget())
    for name in config.conditions:  # a missing or malformed template fails before any work
        built.template(get_condition(name).template)
    return built, client


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
) -> RunResult:
    """Run (or resume) an end-to-end evaluation: retrieval, reranking, generation and execution under
    each condition, with records appended to the run directory as they finish.

    ``agent`` and ``retriever`` are plug-in objects (see :mod:`agentbench.agent.plugin` and
    :mod:`agentbench.retrieval.plugin`); without them ``config.agent``/``config.retriever`` name plug-ins
    as ``module:attr``, and without those the built-in LiteLLM agent and embedder are used.

    Several runs can share work (a matrix, :mod:`.matrix`): ``executor`` is a sandbox executor that stays
    open afterwards, ``exec_cache`` an open execution cache, and ``retrieval`` the retrieval stage's result
    for this pool, retriever and retrieval settings from another run, used instead of retrieving again.
    """
    check_writable_dir(RunDirectory.path_for(config), "--run-dir")  # before any model loads
    the_agent, client = _make_agent(config, client, agent)
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
) -> RunResult:
    """The run's work once its directory is held: retrieval, then every (query, condition) not yet done."""
    config = directory.config
    done = {r.key: r for r in directory.load_records_for_resume()}
    if config.retry_errors:  # an outage of the model's service or the sandbox is not a result: redo it
        done = {key: r for key, r in done.items() if r.scored}
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
            retrieval = evaluate_retrieval(
                pool,
                config.embedder_spec,
                executor,
                config.retrieval_settings(),
                retriever=retriever,
                retriever_name=retriever_name,
                exec_cache=exec_cache,
                progress=show_progress,
                rerank=reranking,
                split=None if reranking else split,
            )
        directory.write_retrieval(retrieval)
        tools = RunTools(pool, config, executor, exec_cache, split, retriever) if tooled and split else None
        items = _plan(pool, retrieval, config)
        context_verdicts = _context_verdicts(items, pool, executor, exec_cache, config.timeout, suites)
        metas = {d.corpus_id: d for d in pool.distractors}
        todo = [it for it in items if (it.query.query_id, it.condition.name) not in done]
        totals: dict[str, int] = {}
        for it in items:
            totals[it.condition.name] = totals.get(it.condition.name, 0) + 1
        finished: dict[str, list[bool]] = {}
        for rec in done.values():
            if rec.scored:
                finished.setdefault(rec.condition, []).append(rec.passed)
            else:
                finished.setdefault(rec.condition, [])
        bar = _Progress(totals, finished) if show_progress else None

        def written(rec: RunRecord) -> None:
            done[rec.key] = rec
            if bar:
                bar.record(rec)

        try:
            if bar:
                bar.__enter__()
            if todo:
                asyncio.run(
                    _generate_and_execute(
                        todo,
                        pool,
                        the_agent,
                        executor,
                        exec_cache,
                        context_verdicts,
                        metas,
                        config,
                        suites,
                        directory,
                        written,
                        tools,
                    )
                )
        except ModelError as exc:  # fatal for the run (a model that died, a revoked key): say how to go on
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
            if tools is not None:
                tools.close()
    order = {(it.query.query_id, it.condition.name): i for i, it in enumerate(items)}
    records = sorted((r for r in done.values() if r.key in order), key=lambda r: order[r.key])
    if client is not None:
        stats = client.stats.model_dump()
    else:
        stats = {"calls": getattr(the_agent, "calls", 0), "cache_hits": 0}
    return RunResult(directory, config, records, retrieval, llm_stats=stats)
