"""Generate, execute and record a run's items as a stream.

Each item is executed as soon as its generation is back and recorded as soon as its verdict is, while
other items' LLM calls are in flight: executions run in batches on a worker thread
(:class:`ExecutionBatches`) and records are appended in batches with one fsync each (:class:`RecordWriter`),
so neither the sandbox nor the disk holds up the LLM slots.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ..agent import Generation, Task
from ..agent.generate import AgentLike
from ..execution import ExecResult, Executor, Job
from ..execution.cache import ExecCache, run_cached
from ..llm.client import SAMPLE
from ..pools import Pool
from ..pools.models import DistractorMeta
from .config import RunConfig
from .outcome import make_record
from .plan import WorkItem
from .records import RunRecord
from .rundir import RunDirectory
from .tools import RunTools

__all__ = ["RunWork", "ExecutionBatches", "RecordWriter", "generate_and_execute"]


@dataclass(frozen=True)
class RunWork:
    """What every item of a run is generated, executed and recorded against."""

    pool: Pool
    agent: AgentLike
    executor: Executor
    exec_cache: ExecCache
    config: RunConfig
    suites: dict[str, tuple[str, ...]]
    """the asserts of each query the generations are judged on (held-out ones under a test split)"""
    context_verdicts: dict[tuple[str, str], list[str]]
    """per-assert outcomes of each (query, first context snippet)"""
    metas: dict[str, DistractorMeta]
    tools: RunTools | None = None


class ExecutionBatches:
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


class RecordWriter:
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


async def generate_and_execute(
    items: list[WorkItem],
    work: RunWork,
    directory: RunDirectory,
    written: Callable[[RunRecord], None],
) -> None:
    """Generate, execute and record every item, streaming. The LLM client bounds the requests in flight
    (``--concurrency``); ``4 x concurrency`` items are worked on at once, so slow executions or retrying
    requests do not leave LLM slots idle. A fatal error (ModelError) cancels the rest; every record
    finished before it is written."""
    loop = asyncio.get_running_loop()
    # asyncio.to_thread's default pool has min(32, cores + 4) threads: too few for plug-in agents and tool
    # calls at a high --concurrency
    loop.set_default_executor(ThreadPoolExecutor(max_workers=work.config.concurrency + 8))
    executions = ExecutionBatches(
        work.executor, work.exec_cache, work.tools.lock if work.tools is not None else None
    )
    writer = RecordWriter(directory, written)
    queue = iter(items)

    async def worker() -> None:
        for it in queue:  # one shared iterator: each item is taken by exactly one worker
            writer.add(await _work_on(it, work, executions))

    width = min(len(items), max(4 * work.config.concurrency, 8))
    workers = [asyncio.create_task(worker()) for _ in range(width)]
    try:
        await asyncio.gather(*workers)
    except asyncio.CancelledError:  # Ctrl-C or SIGTERM: the jobs running in the sandbox are killed now
        work.executor.close()  # (a batch would otherwise run to its end before the process can exit)
        raise
    finally:
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        executions.close()
        await writer.close()


async def _work_on(it: WorkItem, work: RunWork, executions: ExecutionBatches) -> RunRecord:
    """One item from task to record: generation, then (for code that came back) its execution."""
    started = time.perf_counter()
    task = _task(it, work)
    SAMPLE.set(it.sample)  # this worker task's context: the LLM client keys (and seeds) the call by it
    gen = await (_skipped(task, it) if it.error else work.agent.generate(task, it.condition.template))
    verdict, exec_seconds = None, 0.0
    if gen.status == "ok":
        job = Job(gen.code, it.suite(work.suites), work.config.timeout, it.query.test_setup or "")
        verdict, exec_seconds = await executions.run(job)
    return make_record(
        it,
        gen,
        verdict,
        exec_seconds,
        time.perf_counter() - started,
        work.pool,
        work.context_verdicts,
        work.metas,
        work.tools,
    )


def _task(it: WorkItem, work: RunWork) -> Task:
    """The agent's task for an item: the query, its context snippets and (under a tool condition) tools."""
    pool, tools = work.pool, work.tools
    return Task.from_canonical(
        it.query.query_id,
        it.query.generation_text,
        pool.snippet(it.query.correct_corpus_ids[0]).code,
        context=[pool.snippet(c).code for c in it.context_ids],
        tests=it.query.test_suite,
    ).with_tools(tools.for_query(it.query) if tools is not None and it.condition.tools else None)


async def _skipped(task: Task, item: WorkItem) -> Generation:
    """No generation for a query the retriever plug-in failed on."""
    return Generation(
        task_id=task.task_id,
        condition=item.condition.name,
        model="",
        messages=[],
        function_name=task.function_name,
    )
