"""The Python API: what ``agentbench run`` and ``agentbench retrieve`` do, callable from code and CI.

    import agentbench

    result = agentbench.evaluate(pool="core", retriever=my_retriever, agent=my_agent, limit=10)
    result.summary["conditions"]["rag"]["pass_rate"], result.run_dir

    scores = agentbench.retrieve(pool="core", retriever=my_retriever)
    scores["metrics"]["exec@1"]

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
from .retrieval import DEFAULT_EMBEDDER, DEFAULT_KS

__all__ = ["evaluate", "retrieve", "retrieve_all", "run_config"]


def run_config(**fields: Any) -> RunConfig:
    """A validated :class:`RunConfig` from keyword settings; an unknown or mistyped one is a ConfigError."""
    unknown = sorted(set(fields) - set(RunConfig.model_fields))
    if unknown:
        raise ConfigError(f"unknown option {unknown[0]!r}: see agentbench.RunConfig for the settings")
    try:
        return RunConfig(**fields)
    except ValueError as exc:  # pydantic: a value of the wrong type
        first = exc.errors()[0] if hasattr(exc, "errors") else {"loc": ("?",), "msg": str(exc)}
        raise ConfigError(f"option {first['loc'][0]!r}: {first['msg']}") from None


def evaluate(
    pool: str = "core",
    *,
    retriever: Any = None,
    agent: Any = None,
    embedder: str = DEFAULT_EMBEDDER,
    llm: str | None = None,
    conditions: Sequence[str] | None = None,
    limit: int | None = None,
    sandbox: str = "auto",
    run_dir: str | Path | None = None,
    resume: bool = False,
    seed: int = 0,
    show_progress: bool = False,
    **options: Any,
) -> RunResult:
    """Run the end-to-end evaluation (``agentbench run``) and return its records and summary.

    ``options`` are the other :class:`~agentbench.pipeline.RunConfig` settings (``k``, ``concurrency``,
    ``prompt``, ``timeout``, ``max_tokens``, ``api_base``, ``rerank``, ...).
    """
    from .pipeline import evaluate as run_pipeline

    # paths (store_dir=, prompt=) may be Path objects, as in retrieve(); RunConfig stores strings
    options = {k: os.fspath(v) if isinstance(v, os.PathLike) else v for k, v in options.items()}
    fields: dict[str, Any] = dict(
        pool=pool, embedder=embedder, limit=limit, sandbox=sandbox, resume=resume, seed=seed, **options
    )
    if llm is not None:
        fields["llm"] = llm
    if conditions is not None:
        fields["conditions"] = [conditions] if isinstance(conditions, str) else list(conditions)
    if run_dir is not None:
        fields["run_dir"] = str(run_dir)
    if isinstance(retriever, str):
        fields["retriever"], retriever = retriever, None
    if isinstance(agent, str):
        fields["agent"], agent = agent, None
    config = run_config(**fields)
    return run_pipeline(config, agent=agent, retriever=retriever, show_progress=show_progress)


def retrieve_all(
    pool: str = "core",
    *,
    embedders: Sequence[str] = (),
    retrievers: Sequence[Any] = (),
    ks: Sequence[int] = DEFAULT_KS,
    limit: int | None = None,
    sandbox: str = "auto",
    sandbox_workers: int | None = None,
    timeout: float = 10.0,
    seed: int = 0,
    store_dir: str | Path = "stores",
    chroma_url: str | None = None,
    rerank: str | None = None,
    visible_tests: str = "0.5",
    rerank_k: int = 10,
    show_progress: bool = False,
) -> list[dict]:
    """Retrieval-only scoring of several embedders and retriever plug-ins on one pool, sharing the
    sandbox and caches; one results dict (ExecRetrieval's per-model schema) each, embedders first."""
    from .execution import make_executor
    from .execution.cache import ExecCache
    from .pools import load_pool
    from .retrieval import EmbeddingCache, evaluate_retrieval, parse_embedder
    from .retrieval.plugin import check_retriever
    from .retrieval.rerank import RerankerUnavailable, make_reranking
    from .retrieval.store import parse_chroma_url

    if not embedders and not retrievers:
        embedders = [DEFAULT_EMBEDDER]
    if limit is not None and limit < 1:
        raise ConfigError(f"limit must be at least 1, got {limit}")
    if chroma_url is not None:
        parse_chroma_url(chroma_url)
    reranking = None
    if rerank:
        try:
            reranking = make_reranking(rerank, visible_tests, rerank_k, seed)
        except RerankerUnavailable as exc:
            import sys

            print(f"agentbench: rerank: {exc}", file=sys.stderr)
    parsed = [parse_embedder(s) for s in dict.fromkeys(embedders)]
    for e in parsed:  # missing keys or models fail here, before any work
        e.check()
    plugins = [check_retriever(r) for r in retrievers]  # import and signature problems, before any work
    loaded = load_pool(pool)
    if limit:
        loaded = loaded.model_copy(update={"queries": loaded.queries[:limit]})
    results: list[dict] = []
    common = dict(
        ks=ks, store_dir=store_dir, chroma_url=chroma_url, timeout=timeout, seed=seed, rerank=reranking
    )
    with (
        make_executor(sandbox, sandbox_workers) as executor,
        ExecCache() as cache,
        EmbeddingCache() as vectors,
    ):
        for e in parsed:
            results.append(
                evaluate_retrieval(
                    loaded,
                    e,
                    executor,
                    exec_cache=cache,
                    embed_cache=vectors,
                    progress=show_progress,
                    **common,
                )
            )
        for obj, name in plugins:
            results.append(
                evaluate_retrieval(
                    loaded,
                    None,
                    executor,
                    retriever=obj,
                    retriever_name=name,
                    exec_cache=cache,
                    progress=show_progress,
                    **common,
                )
            )
    return results


def retrieve(
    pool: str = "core", *, retriever: Any = None, embedder: str = DEFAULT_EMBEDDER, **options: Any
) -> dict:
    """Retrieval-only scoring (``agentbench retrieve``) of one retriever plug-in or embedder: exec@k,
    nDCG, MRR and rank-1 failure diagnostics, plus ``errors`` (queries the plug-in failed on).

    ``options`` are those of :func:`retrieve_all` (``ks``, ``limit``, ``sandbox``, ``timeout``, ...).
    """
    if retriever is not None:
        return retrieve_all(pool, retrievers=[retriever], **options)[0]
    return retrieve_all(pool, embedders=[embedder], **options)[0]
