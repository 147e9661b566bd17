"""The main job: retrieve, generate under each condition, execute, record, summarise.

For each query and condition the agent gets a context (none, the retriever's top-k, the canonical, or one
paired distractor), writes the function through LiteLLM, and the sandbox runs the result against the
query's asserts. Records are appended as they complete, so ``--resume`` picks up where a killed run
stopped without redoing or duplicating anything.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ..agent import Agent, Generation, LLMClient, Task
from ..agent.generate import AgentLike
from ..agent.plugin import PluginAgent, plugin_agent
from ..errors import ConfigError, ModelError
from ..execution import Executor, Job, make_executor
from ..execution.cache import ExecCache, run_cached
from ..pools import Pool, Query, load_pool
from ..pools.models import DistractorMeta
from ..progress import stderr
from ..retrieval import evaluate_retrieval
from ..retrieval.rerank import RerankerUnavailable, Reranking, VisibleTests, make_reranking
from .config import RAG_RERANKED, RunConfig
from .records import ContextKind, RecordLog, RunRecord

__all__ = ["evaluate", "RunResult", "prepare_run_dir"]


@dataclass
class RunResult:
    run_dir: Path
    config: RunConfig
    records: list[RunRecord]
    retrieval: dict
    summary: dict
    llm_stats: dict = field(default_factory=dict)


@dataclass
class _Item:
    query: Query
    condition: str
    context_ids: list[str]
    kind: ContextKind
    error: str | None = None
    """The retriever plug-in failed on this query: no generation, a ``retriever_error`` record."""


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-")[:40]


def prepare_run_dir(config: RunConfig) -> Path:
    """Create or reopen the run directory; refuse to mix two configurations in one directory."""
    if config.run_dir:
        run_dir = Path(config.run_dir)
    else:
        if config.resume:
            raise ConfigError("--resume needs --run-dir DIR naming the run to continue")
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        run_dir = Path("runs") / f"{stamp}-{_slug(config.agent_name)}-{_slug(config.retriever_name)}"
    config_file = run_dir / "config.json"
    if config_file.exists():
        if not config.resume:
            raise ConfigError(
                f"{run_dir} already holds a run: pass --resume to continue it or choose another --run-dir"
            )
        try:
            previous = RunConfig.model_validate_json(config_file.read_text())
        except ValueError as exc:
            raise ConfigError(f"{config_file} is unreadable; choose another --run-dir") from exc
        if previous.fingerprint() != config.fingerprint():
            raise ConfigError(
                f"{run_dir} was started with different settings; resume with the same flags or choose another --run-dir"
            )
    elif config.resume and run_dir.exists() and any(run_dir.iterdir()):
        raise ConfigError(f"{run_dir} has no config.json; it is not an agentbench run directory")
    run_dir.mkdir(parents=True, exist_ok=True)
    data = config.model_dump()
    data["run_dir"] = str(run_dir)
    _write_json(config_file, data)
    return run_dir


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    tmp.replace(path)


def _kind(query: Query, corpus_id: str) -> ContextKind:
    if corpus_id in query.correct_corpus_ids:
        return "canonical"
    if corpus_id in query.paired_distractor_corpus_ids:
        return "own_distractor"
    return "other_snippet"


def _plan(pool: Pool, retrieval: dict, config: RunConfig) -> list[_Item]:
    top = {q["query_id"]: [r["corpus_id"] for r in q["top_results"]] for q in retrieval["per_query"]}
    failed = {e["query_id"]: e["error"] for e in retrieval.get("errors", [])}
    rr = retrieval.get("rerank") or {}
    reranked = {q["query_id"]: [r["corpus_id"] for r in q["top_results"]] for q in rr.get("per_query", [])}
    if rr.get("name") is None:  # no reranking, or a skipped reranker: no rag_reranked records
        reranked = {}
    items: list[_Item] = []
    for condition in config.conditions:
        for q in pool.queries:
            if condition == "closed_book":
                items.append(_Item(q, condition, [], "none"))
            elif condition == "rag":
                ids = top[q.query_id][: config.k]
                kind = _kind(q, ids[0]) if ids else "none"
                items.append(_Item(q, condition, ids, kind, failed.get(q.query_id)))
            elif condition == RAG_RERANKED and q.query_id in reranked:
                ids = reranked[q.query_id][: config.k]
                items.append(_Item(q, condition, ids, _kind(q, ids[0]) if ids else "none"))
            elif condition == "oracle":
                items.append(_Item(q, condition, [q.correct_corpus_ids[0]], "canonical"))
            elif condition == "distractor" and q.paired_distractor_corpus_ids:
                choice = random.Random(f"{config.seed}:{q.query_id}:distractor").choice(
                    q.paired_distractor_corpus_ids
                )
                items.append(_Item(q, condition, [choice], "own_distractor"))
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
) -> list[RunRecord]:
    started = time.perf_counter()
    tasks = [
        Task.from_canonical(
            it.query.query_id,
            it.query.query,
            pool.snippet(it.query.correct_corpus_ids[0]).code,
            context=[pool.snippet(c).code for c in it.context_ids],
            tests=it.query.test_suite,
        )
        for it in items
    ]
    generations = await asyncio.gather(
        *(
            _skipped(t, it)
            if it.error
            else agent.generate(t, "rag" if it.condition == RAG_RERANKED else it.condition)
            for t, it in zip(tasks, items, strict=True)
        )
    )
    runnable = [i for i, g in enumerate(generations) if g.status == "ok"]
    exec_started = time.perf_counter()
    jobs = [Job(generations[i].code, suites[items[i].query.query_id], config.timeout) for i in runnable]
    verdicts = dict(
        zip(runnable, await asyncio.to_thread(run_cached, executor, jobs, exec_cache), strict=True)
    )
    exec_seconds = (time.perf_counter() - exec_started) / max(len(jobs), 1)
    records = []
    for i, (it, gen) in enumerate(zip(items, generations, strict=True)):
        verdict = verdicts.get(i)
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
        records.append(
            RunRecord(
                query_id=it.query.query_id,
                condition=it.condition,
                domain=it.query.domain,
                context_ids=it.context_ids,
                context_kind=it.kind,
                context_passes=ctx_passes,
                context_results=ctx_results,
                context_bug_type=(snippet.bug_type or "") if snippet else "",
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
                seconds=time.perf_counter() - started,
            )
        )
    return records


async def _skipped(task: Task, item: _Item) -> Generation:
    """No generation for a query the retriever plug-in failed on."""
    return Generation(
        task_id=task.task_id,
        condition=item.condition,
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
    jobs = [Job(pool.snippet(cid).code, suites[qid], timeout) for qid, cid in pairs]
    results = run_cached(executor, jobs, exec_cache)
    return {pair: list(r.results) for pair, r in zip(pairs, results, strict=True)}


def _reranking(config: RunConfig) -> Reranking | None:
    """--rerank: every condition is scored on held-out asserts; a reranker that cannot run here (a
    cross-encoder offline) is skipped with one line, keeping the held-out scoring and no rag_reranked."""
    if not config.rerank:
        return None
    try:
        return make_reranking(config.rerank, config.visible_tests, config.rerank_k, config.seed)
    except RerankerUnavailable as exc:
        print(f"agentbench: rerank: {exc}", file=sys.stderr)
        visible = VisibleTests.parse(config.visible_tests)
        return Reranking(None, visible, config.rerank_k, config.seed, skipped=str(exc))


def _make_agent(
    config: RunConfig, client: LLMClient | None, agent: object | None
) -> tuple[AgentLike, LLMClient | None]:
    """The agent under test: a plug-in (``config.agent``/``agent``) or the built-in LiteLLM agent; every
    configuration problem (missing key, unknown model, unimportable plug-in, bad template) fails here."""
    if agent is not None or config.agent:
        if config.prompt:  # validate_values() cannot see an agent object from the Python API
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
    )
    client.check()  # missing API key or unknown model: fail before any work
    built = Agent(client, prompt=config.prompt)
    for condition in config.conditions:
        built.template("rag" if condition == RAG_RERANKED else condition)
    return built, client


def evaluate(
    config: RunConfig,
    *,
    client: LLMClient | None = None,
    agent: object | None = None,
    retriever: object | None = None,
    show_progress: bool = True,
) -> RunResult:
    """Run (or resume) an end-to-end evaluation and write its run directory.

    ``agent`` and ``retriever`` are plug-in objects (see :mod:`agentbench.agent.plugin` and
    :mod:`agentbench.retrieval.plugin`); without them ``config.agent``/``config.retriever`` name plug-ins
    as ``module:attr``, and without those the built-in LiteLLM agent and embedder are used.
    """
    from ..analysis import summarize, write_report

    config.validate_values()
    the_agent, client = _make_agent(config, client, agent)
    retriever_name = None
    if retriever is not None or config.retriever:
        from ..retrieval.plugin import check_retriever

        retriever, retriever_name = check_retriever(retriever if retriever is not None else config.retriever)
    if isinstance(the_agent, PluginAgent):
        config.agent = the_agent.name  # objects from the Python API are recorded by name
    if retriever_name:
        config.retriever = retriever_name
    full = load_pool(config.pool)
    queries = full.queries[: config.limit] if config.limit else full.queries
    pool = full.model_copy(update={"queries": queries})
    if retriever_name:  # a factory builds its index now: its failure must not leave a run directory behind
        from ..retrieval.plugin import plugin_searcher

        retriever = plugin_searcher(retriever, pool, retriever_name)
    run_dir = prepare_run_dir(config)
    log = RecordLog(run_dir / "records.jsonl")
    done = {r.key: r for r in log.load()}
    exec_cache = ExecCache()
    reranking = _reranking(config)
    suites = {
        q.query_id: reranking.split(q).held_out if reranking else tuple(q.test_suite) for q in pool.queries
    }
    with make_executor(config.sandbox, config.sandbox_workers) as executor:
        retrieval = evaluate_retrieval(
            pool,
            config.embedder,
            executor,
            retriever=retriever,
            retriever_name=retriever_name,
            store_dir=config.store_dir,
            chroma_url=config.chroma_url,
            exec_cache=exec_cache,
            timeout=config.timeout,
            seed=config.seed,
            progress=show_progress,
            rerank=reranking,
        )
        _write_json(run_dir / "retrieval.json", retrieval)
        items = _plan(pool, retrieval, config)
        context_verdicts = _context_verdicts(items, pool, executor, exec_cache, config.timeout, suites)
        metas = {d.corpus_id: d for d in pool.distractors}
        todo = [it for it in items if (it.query.query_id, it.condition) not in done]
        totals: dict[str, int] = {}
        for it in items:
            totals[it.condition] = totals.get(it.condition, 0) + 1
        finished: dict[str, list[bool]] = {}
        for rec in done.values():
            if rec.scored:
                finished.setdefault(rec.condition, []).append(rec.passed)
            else:
                finished.setdefault(rec.condition, [])
        chunk = max(2 * config.concurrency, 4)
        bar = _Progress(totals, finished) if show_progress else None
        try:
            if bar:
                bar.__enter__()
            for start in range(0, len(todo), chunk):
                batch = todo[start : start + chunk]
                records = asyncio.run(
                    _generate_and_execute(
                        batch, pool, the_agent, executor, exec_cache, context_verdicts, metas, config, suites
                    )
                )
                for rec in records:
                    log.append(rec)
                    done[rec.key] = rec
                    if bar:
                        bar.record(rec)
        except ModelError as exc:  # fatal for the run (a model that died, a revoked key): say how to go on
            raise type(exc)(
                f"{exc}; the {len(done)} record(s) finished so far are kept in {run_dir}: fix this, then "
                f"continue with --resume --run-dir {run_dir}"
            ) from exc
        finally:
            if bar:
                bar.__exit__(None, None, None)
    order = {(it.query.query_id, it.condition): i for i, it in enumerate(items)}
    records = sorted((r for r in done.values() if r.key in order), key=lambda r: order[r.key])
    if client is not None:
        stats = client.stats.model_dump()
    else:
        stats = {"calls": getattr(the_agent, "calls", 0), "cache_hits": 0}
    summary = summarize(records, retrieval, stats, config)
    _write_json(run_dir / "summary.json", summary)
    write_report(run_dir / "report.md", summary)
    return RunResult(run_dir, config, records, retrieval, summary, stats)
