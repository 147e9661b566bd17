"""The Python API: what ``agentbench run`` and ``agentbench retrieve`` do, callable from code and CI.

    import agentbench

    result = agentbench.evaluate(pool="core", retriever=my_retriever, agent=my_agent, limit=10)
    result.summary.conditions["rag"].pass_rate, result.run_dir

    scores = agentbench.retrieve(pool="core", retriever=my_retriever, limit=50, rerank="exec-visible")
    scores.metrics["exec@1"], scores.rerank.metrics["exec@1"]

    matrix = agentbench.evaluate_matrix(pool="core", llms=["gpt-4o-mini", "local/qwen2.5-coder-0.5b"],
                                        embedders=["minilm", "bm25"], limit=20, run_dir="runs/m")
    matrix.leaderboard.rows[0].agent, matrix.leaderboard.row(2).vs_baseline["rag.pass"]["p_value"]

Settings are the fields of :class:`~agentbench.retrieval.settings.RetrievalSettings` (retrieval) and
:class:`~agentbench.pipeline.RunConfig` (a run, which extends them); both are validated once, here, and
immutable afterwards.

``retriever`` and ``agent`` are plug-in objects or ``"module:attr"`` strings (see
:mod:`agentbench.retrieval.plugin` and :mod:`agentbench.agent.plugin` for the accepted shapes); without
them the built-in ``embedder`` (a Chroma-backed retriever) and the LiteLLM agent for ``llm`` are used.
Errors are :class:`agentbench.AgentbenchError` subclasses with a one-line message.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .pipeline import RunConfig, RunResult
from .pipeline.matrix import MatrixResult
from .retrieval import DEFAULT_EMBEDDER
from .retrieval.results import RetrievalResult
from .retrieval.settings import RetrievalSettings, settings_from

__all__ = [
    "evaluate",
    "evaluate_config",
    "evaluate_matrix",
    "evaluate_matrix_config",
    "retrieve",
    "retrieve_all",
    "run_config",
    "retrieval_settings",
]


def run_config(**fields: Any) -> RunConfig:
    """A validated :class:`RunConfig` from keyword settings; an unknown or mistyped one is a ConfigError."""
    unknown = sorted(set(fields) - set(RunConfig.model_fields))
    if unknown:
        raise ConfigError(f"unknown option {unknown[0]!r}: see agentbench.RunConfig for the settings")
    return settings_from(RunConfig, fields)


def retrieval_settings(**fields: Any) -> RetrievalSettings:
    """Validated :class:`RetrievalSettings`; an unknown or mistyped one is a ConfigError."""
    unknown = sorted(set(fields) - set(RetrievalSettings.model_fields))
    if unknown:
        raise ConfigError(
            f"unknown option {unknown[0]!r}: see agentbench.retrieval.settings.RetrievalSettings for the settings"
        )
    return settings_from(RetrievalSettings, fields)


def evaluate(
    pool: str = "core",
    *,
    retriever: Any = None,
    agent: Any = None,
    embedder: str = DEFAULT_EMBEDDER,
    llm: str | None = None,
    conditions: Sequence[str] | None = None,
    run_dir: str | Path | None = None,
    show_progress: bool = False,
    **options: Any,
) -> RunResult:
    """Run the end-to-end evaluation (``agentbench run``) and return its records and summary.

    ``options`` are the other :class:`~agentbench.pipeline.RunConfig` settings (``k``, ``limit``,
    ``sandbox``, ``seed``, ``resume``, ``concurrency``, ``prompt``, ``timeout``, ``max_tokens``,
    ``api_base``, ``rerank``, ...).
    """
    fields: dict[str, Any] = dict(pool=pool, embedder=embedder, **options)
    if llm is not None:
        fields["llm"] = llm
    if conditions is not None:
        fields["conditions"] = [conditions] if isinstance(conditions, str) else list(conditions)
    if run_dir is not None:
        fields["run_dir"] = os.fspath(run_dir)
    if isinstance(retriever, str):
        fields["retriever"], retriever = retriever, None
    if isinstance(agent, str):
        fields["agent"], agent = agent, None
    config = run_config(**fields)
    return evaluate_config(config, agent=agent, retriever=retriever, show_progress=show_progress)


def evaluate_config(
    config: RunConfig,
    *,
    client: Any = None,
    agent: Any = None,
    retriever: Any = None,
    show_progress: bool = True,
) -> RunResult:
    """Run (or resume) the pipeline for ``config``, then summarise it into the run directory.

    ``client`` is an :class:`~agentbench.llm.LLMClient` to use instead of one built from ``config``;
    ``agent`` and ``retriever`` are plug-in objects (see :mod:`agentbench.agent.plugin` and
    :mod:`agentbench.retrieval.plugin`).
    """
    from .analysis.warm import import_in_background
    from .pipeline import run_pipeline

    result = run_pipeline(
        config,
        client=client,
        agent=agent,
        retriever=retriever,
        show_progress=show_progress,
        while_waiting=import_in_background,
    )
    _finish(result)
    return result


def _finish(result: RunResult) -> None:
    """The analysis stage of a run: summary.json (written last: it marks the run complete) and report.md."""
    from .analysis import render_report, summarize

    result.summary = summarize(result.records, result.retrieval, result.llm_stats, result.config)
    result.directory.write_summary(result.summary)
    result.directory.write_report(render_report(result.summary))


def evaluate_matrix(
    pool: str = "core",
    *,
    llms: Sequence[str] = (),
    embedders: Sequence[str] = (),
    agents: Sequence[Any] = (),
    retrievers: Sequence[Any] = (),
    baseline: str | int | None = None,
    run_dir: str | Path | None = None,
    show_progress: bool = False,
    **options: Any,
) -> MatrixResult:
    """Run every (LLM or agent) x (embedder or retriever) combination (``agentbench run`` with repeated
    ``--llm``/``--embedder``/``--agent``/``--retriever``), each in its own run directory under ``run_dir``,
    sharing the sandbox, the caches and one retrieval stage per retriever; then the leaderboard against
    ``baseline`` (a 1-based index, ``"AGENT,RETRIEVER"``, a run directory name or an axis value naming
    one combination; the first by default), written to ``leaderboard.json``/``.html``.

    ``agents`` and ``retrievers`` are plug-in objects or ``"module:attr"`` strings; ``options`` are the
    other :class:`~agentbench.pipeline.RunConfig` settings, shared by every combination (``resume=True``
    continues an interrupted matrix).
    """
    fields: dict[str, Any] = dict(pool=pool, **options)
    if run_dir is not None:
        fields["run_dir"] = os.fspath(run_dir)
    if isinstance(fields.get("conditions"), str):
        fields["conditions"] = [fields["conditions"]]
    for name in ("llm", "embedder", "agent", "retriever"):
        if name in fields:
            raise ConfigError(f"evaluate_matrix takes {name}s=[...], not {name}=")
    return evaluate_matrix_config(
        run_config(**fields),
        llms=llms,
        embedders=embedders,
        agents=agents,
        retrievers=retrievers,
        baseline=baseline,
        show_progress=show_progress,
    )


def evaluate_matrix_config(
    config: RunConfig,
    *,
    llms: Sequence[str] = (),
    embedders: Sequence[str] = (),
    agents: Sequence[Any] = (),
    retrievers: Sequence[Any] = (),
    baseline: str | int | None = None,
    show_progress: bool = True,
    n_resamples: int | None = None,
) -> MatrixResult:
    """:func:`evaluate_matrix` for a validated base ``config`` (its llm, embedder, agent and retriever are
    replaced by each combination's; ``config.run_dir`` is the matrix directory)."""
    from .analysis.compare import N_RESAMPLES
    from .analysis.leaderboard import build_leaderboard, write_leaderboard
    from .pipeline.matrix import MatrixDirectory, axis, check_combinations, plan_matrix, resolve_baseline
    from .pipeline.matrix import run_matrix as _run_matrix

    if config.resume and not config.run_dir:
        raise ConfigError("--resume needs --run-dir DIR naming the matrix to continue")
    path = Path(config.run_dir) if config.run_dir else MatrixDirectory.default_path()
    combos = plan_matrix(
        config,
        axis(llms, agents, kind="agent", concurrency=config.concurrency),
        axis(embedders, retrievers, kind="retriever"),
        path,
    )
    base = resolve_baseline(combos, baseline)
    directory = MatrixDirectory.prepare(path, combos, resume=config.resume)
    check_combinations(combos)  # keys, models, plug-ins: before anything is written
    from .pools import load_pool

    config.select(load_pool(config.pool).queries)  # an empty pool or a --sample too large: before any work
    result = _run_matrix(
        directory, resume=config.resume, finish=_finish, baseline=base, show_progress=show_progress
    )
    result.leaderboard = build_leaderboard(
        path, base.index, seed=config.seed, n_resamples=n_resamples or N_RESAMPLES
    )
    write_leaderboard(result.leaderboard, path)
    return result


def retrieve_all(
    pool: str = "core",
    *,
    embedders: Sequence[str] = (),
    retrievers: Sequence[Any] = (),
    settings: RetrievalSettings | None = None,
    show_progress: bool = False,
    **options: Any,
) -> list[RetrievalResult]:
    """Retrieval-only scoring of several embedders and retriever plug-ins on one pool, sharing the
    sandbox and caches; one :class:`RetrievalResult` (ExecRetrieval's per-model schema) each, embedders
    first.

    ``settings`` (or, instead, its fields as keyword ``options``: ``ks``, ``limit``, ``sandbox``,
    ``timeout``, ``seed``, ``store_dir``, ``rerank``, ...) say how retrieval is run and scored.
    """
    from .execution import make_executor
    from .execution.cache import ExecCache
    from .pools import load_pool
    from .retrieval import EmbedderSpec, EmbeddingCache, build_embedder, evaluate_retrieval
    from .retrieval.plugin import check_retriever
    from .retrieval.store import check_server

    if settings is not None and options:
        raise ConfigError(f"pass settings= or keyword settings, not both (got {sorted(options)[0]!r})")
    settings = settings or retrieval_settings(**options)
    if not embedders and not retrievers:
        embedders = [DEFAULT_EMBEDDER]
    specs = [EmbedderSpec.parse(s) for s in dict.fromkeys(embedders)]
    parsed = [build_embedder(s) for s in specs]
    for e in parsed:  # missing keys or models fail here, before any work
        e.check()
    plugins = [check_retriever(r) for r in retrievers]  # import and signature problems, before any work
    reranking = settings.reranking()
    loaded = load_pool(pool)
    for e in parsed:  # a --chroma-url server that is down fails here, before the sandbox starts
        check_server(settings.chroma_url, e)
    if settings.limit or settings.sample:
        loaded = loaded.model_copy(update={"queries": settings.select(loaded.queries)})
    results: list[RetrievalResult] = []
    with (
        make_executor(settings.sandbox, settings.sandbox_workers, settings.ray) as executor,
        ExecCache() as cache,
        EmbeddingCache() as vectors,
    ):
        for e in parsed:
            results.append(
                evaluate_retrieval(
                    loaded,
                    e,
                    executor,
                    settings,
                    exec_cache=cache,
                    embed_cache=vectors,
                    progress=show_progress,
                    rerank=reranking,
                )
            )
        for obj, name in plugins:
            results.append(
                evaluate_retrieval(
                    loaded,
                    None,
                    executor,
                    settings,
                    retriever=obj,
                    retriever_name=name,
                    exec_cache=cache,
                    progress=show_progress,
                    rerank=reranking,
                )
            )
    return results


def retrieve(
    pool: str = "core", *, retriever: Any = None, embedder: str = DEFAULT_EMBEDDER, **options: Any
) -> RetrievalResult:
    """Retrieval-only scoring (``agentbench retrieve``) of one retriever plug-in or embedder: exec@k,
    nDCG, MRR and rank-1 failure diagnostics, plus ``errors`` (queries the plug-in failed on).

    ``options`` are those of :func:`retrieve_all` (``settings``, or ``ks``, ``limit``, ``sandbox``,
    ``timeout``, ...).
    """
    if retriever is not None:
        return retrieve_all(pool, retrievers=[retriever], **options)[0]
    return retrieve_all(pool, embedders=[embedder], **options)[0]
