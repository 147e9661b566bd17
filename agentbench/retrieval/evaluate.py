"""Retrieval-only evaluation of one embedder on one pool, in ExecRetrieval's per-model results schema.

Flow: rank every query's top snippets (exact, see :mod:`.search`), execute each retrieved snippet against
*that query's* asserts through the execution layer and its cache, then score. Verdicts decide relevance;
labels are only reported. An execution that hit a sandbox infrastructure error makes the whole evaluation
fail rather than silently count as a miss (verdicts already obtained stay cached for the rerun).
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import numpy as np

from ..errors import ConfigError, PoolError, SandboxError
from ..execution import Executor, Job
from ..execution.cache import ExecCache, run_cached
from ..pools.models import Pool, Query
from ..pools.split import HeldOutSplit
from ..progress import progress_bar
from .embcache import EmbeddingCache
from .embedder_spec import EmbedderSpec
from .embedders import DenseEmbedder, Embedder, build_embedder
from .metrics import (
    QueryRecord,
    Ranked,
    aggregate,
    confidence_intervals,
    diagnostics,
)
from .ranking import Ranking
from .rerank.stage import Reranking, rerank_stage
from .results import (
    RESULTS_VERSION,
    Diagnostics,
    QueryFailure,
    QueryRow,
    RerankResult,
    RetrievalResult,
    RunInfo,
    Timing,
    TopResult,
)
from .search import Hit, Searcher, open_searcher
from .settings import RetrievalSettings

__all__ = ["evaluate_retrieval", "checked_embedder", "N_RESAMPLES", "RESULTS_VERSION", "TOP_RESULTS"]

TOP_RESULTS = 10  # per query in the results file, as in the paper


N_RESAMPLES = 5000
"""Bootstrap resamples of the exec@k intervals."""


def _own_scores(searcher: Searcher, queries: list[Query]) -> list[dict[str, float]]:
    """Per query, the scores of its canonicals and paired distractors: all the diagnostics need (a
    100k-snippet pool never needs the full queries x corpus matrix)."""
    ids = [q.correct_corpus_ids + q.paired_distractor_corpus_ids for q in queries]
    return searcher.scores_of([q.query for q in queries], ids)


def _canonical_below_paired(query: Query, scores: dict[str, float]) -> bool | None:
    canon = [scores[c] for c in query.correct_corpus_ids if c in scores]
    paired = [scores[c] for c in query.paired_distractor_corpus_ids if c in scores]
    if not canon or not paired or np.isnan(canon + paired).any():  # NaN: a plug-in gives no full scores
        return None
    return bool(max(canon) < max(paired))


def _relation(query: Query, corpus_id: str) -> str:
    if corpus_id in query.correct_corpus_ids:
        return "canonical"
    return "paired" if corpus_id in query.paired_distractor_corpus_ids else "other"


def _execute(
    pool: Pool,
    hits: list[list[Hit]],
    executor: Executor,
    cache: ExecCache | None,
    timeout: float,
    progress: bool,
    suites: list[tuple[str, ...]] | None = None,
):
    suites = suites or [tuple(q.test_suite) for q in pool.queries]
    jobs = [
        Job(hit.code, suite, timeout, q.test_setup or "")
        for q, suite, q_hits in zip(pool.queries, suites, hits, strict=True)
        for hit in q_hits
    ]
    with progress_bar(f"executing {len(jobs)} retrieved snippets", len(jobs), enabled=progress) as adv:
        results = run_cached(executor, jobs, cache, progress=adv)
    broken = [r for r in results if r.infra_error]
    if broken:
        raise SandboxError(
            f"{len(broken)} of {len(results)} executions hit sandbox infrastructure errors (first: "
            f"{broken[0].infra_error}); rerun to retry them, verdicts already obtained are cached"
        )
    it = iter(results)
    return [[next(it) for _ in q_hits] for q_hits in hits]


def evaluate_retrieval(
    pool: Pool,
    embedder_spec: str | EmbedderSpec | Embedder | None,
    executor: Executor,
    settings: RetrievalSettings | None = None,
    *,
    retriever: Any = None,
    retriever_name: str | None = None,
    exec_cache: ExecCache | None = None,
    embed_cache: EmbeddingCache | None = None,
    n_resamples: int = N_RESAMPLES,
    progress: bool = True,
    rerank: Reranking | None = None,
    split: HeldOutSplit | None = None,
) -> RetrievalResult:
    """Score ``embedder_spec`` (an embedder, or an ``--embedder`` value parsed or not) on ``pool`` under
    ``settings`` (cutoffs, store, timeout, seed; the pool is already limited); see the module docstring.

    ``exec_cache=None`` runs every execution; ``embed_cache=None`` uses the default on-disk embedding cache
    unless the embedder already has one (so warm reruns never load the model).

    With ``rerank`` (see :mod:`.rerank`), every metric is computed on each query's held-out asserts: the
    top-level ones for vector order (the baseline), those under ``"rerank"`` for the reranked order.
    ``split`` alone (a run with tool-using conditions) scores on held-out asserts without reranking.

    ``retriever`` (a :class:`~.search.Searcher`, a plug-in object or a ``module:attr`` string, see
    :mod:`.plugin`) replaces the embedder; per-query plug-in failures are listed under ``"errors"``.
    """
    clock = [time.perf_counter()]
    settings = settings or RetrievalSettings()
    if not pool.queries or not pool.corpus:
        raise PoolError(f"pool {pool.name} has no queries or no snippets to retrieve")
    depth = max(TOP_RESULTS, settings.cutoffs[-1], rerank.k if rerank is not None else 0)
    embedder = checked_embedder(embedder_spec) if retriever is None else None
    own_cache = None
    if isinstance(embedder, DenseEmbedder) and embed_cache is None and embedder.cache is None:
        own_cache = embed_cache = EmbeddingCache()
    try:
        searcher = _open(pool, embedder, settings, embed_cache, progress, retriever, retriever_name)
        clock.append(time.perf_counter())
        hits, errors = _search(pool, searcher, depth, plugin=embedder is None, progress=progress)
        own_scores = _own_scores(searcher, pool.queries)
        clock.append(time.perf_counter())
        suites = _scored_suites(pool, rerank if rerank is not None else split)
        verdicts = _execute(pool, hits, executor, exec_cache, settings.timeout, progress, suites)
        clock.append(time.perf_counter())
        searcher.close()
    finally:
        if own_cache is not None and embedder is not None:
            embedder.use_cache(None)
            own_cache.close()
    ranking = Ranking(hits, verdicts, own_scores)
    rr_result = None
    if rerank is not None:
        rr_result = _rerank(rerank, pool, ranking, executor, exec_cache, settings, n_resamples, progress)
    clock.append(time.perf_counter())
    scored = _scored(pool, ranking, settings.cutoffs, settings.seed, n_resamples)
    clock.append(time.perf_counter())
    name = embedder.name if embedder is not None else searcher.name
    held_out = rerank is not None or split is not None
    return RetrievalResult(
        schema_version=RESULTS_VERSION,
        model=name,
        embedder_config=embedder.config_key() if embedder is not None else {"retriever": name},
        pool=pool.name,
        pool_path=pool.path,
        n_queries=len(pool.queries),
        n_corpus=len(pool.corpus),
        ks=settings.cutoffs,
        metrics=scored.metrics,
        ci95=scored.ci95,
        diagnostics=scored.diagnostics,
        errors=errors,
        run_info=_run_info(
            executor, settings, n_resamples, depth, held_out, searcher, _timing(clock, embedder)
        ),
        per_query=scored.per_query,
        rerank=rr_result,
    )


def checked_embedder(embedder_spec: str | EmbedderSpec | Embedder | None) -> Embedder:
    """The embedder ``embedder_spec`` names, its prerequisites checked (a ConfigError before any work)."""
    if embedder_spec is None:
        raise ConfigError("no embedder and no retriever given")
    embedder = (
        embedder_spec
        if isinstance(embedder_spec, Embedder)
        else build_embedder(EmbedderSpec.parse(embedder_spec))
    )
    embedder.check()
    return embedder


def _open(
    pool: Pool,
    embedder: Embedder | None,
    settings: RetrievalSettings,
    embed_cache: EmbeddingCache | None,
    progress: bool,
    retriever: Any,
    retriever_name: str | None,
) -> Searcher:
    """The embedder's index of ``pool`` (built or reused), or else the plug-in retriever as a searcher
    (a ``module:attr`` string names itself)."""
    if embedder is not None:
        return open_searcher(
            pool,
            embedder,
            store_dir=settings.store_dir,
            chroma_url=settings.chroma_url,
            embed_cache=embed_cache,
            progress=progress,
        )
    from .plugin import plugin_searcher

    return plugin_searcher(retriever, pool, None if isinstance(retriever, str) else retriever_name)


def _search(
    pool: Pool, searcher: Searcher, depth: int, *, plugin: bool, progress: bool
) -> tuple[list[list[Hit]], list[QueryFailure]]:
    """Every query's top ``depth`` hits, and the queries a plug-in failed on (with a progress bar for
    plug-ins, which may be slow per query)."""
    texts = [q.query for q in pool.queries]
    plugged = plugin and hasattr(searcher, "on_query")
    with progress_bar(f"retrieving with {searcher.name}", len(texts), enabled=progress and plugged) as adv:
        if plugged:
            searcher.on_query = adv
        hits = searcher.search_many(texts, depth)
    errors = [
        QueryFailure(query_id=q.query_id, error=e)
        for q, e in zip(pool.queries, getattr(searcher, "errors", None) or [], strict=False)
        if e
    ]
    return hits, errors


def _scored_suites(pool: Pool, splitter: Reranking | HeldOutSplit | None) -> list[tuple[str, ...]] | None:
    """Each query's held-out asserts when a split applies; None scores on all of them."""
    return [splitter.split(q).held_out for q in pool.queries] if splitter is not None else None


def _rerank(
    rerank: Reranking,
    pool: Pool,
    ranking: Ranking,
    executor: Executor,
    exec_cache: ExecCache | None,
    settings: RetrievalSettings,
    n_resamples: int,
    progress: bool,
) -> RerankResult:
    """The rerank stage: reorder the top k, and score the new order on the held-out asserts."""
    reranked_ranking, rr_info, rr_details = rerank_stage(
        rerank, pool, ranking, executor, exec_cache, settings.timeout, progress
    )
    rr_scored = _scored(pool, reranked_ranking, settings.cutoffs, settings.seed, n_resamples)
    for row, extra in zip(rr_scored.per_query, rr_details, strict=True):
        row.rerank = extra
    return RerankResult(**rr_info, **rr_scored._asdict())


def _timing(clock: list[float], embedder: Embedder | None) -> Timing:
    """Phase durations from the clock readings taken after opening, search, execution, rerank, scoring."""
    began, indexed, searched, executed, reranked, finished = clock
    return Timing(
        index_s=indexed - began,
        search_s=searched - indexed,
        execute_s=executed - searched,
        rerank_s=reranked - executed,
        metrics_s=finished - reranked,
        total_s=finished - began,
        encode_s=getattr(embedder, "encode_seconds", 0.0),
        load_s=getattr(embedder, "load_seconds", 0.0),
    )


def _run_info(
    executor: Executor,
    settings: RetrievalSettings,
    n_resamples: int,
    depth: int,
    held_out: bool,
    searcher: Searcher,
    timing: Timing,
) -> RunInfo:
    """How the evaluation ran: executor, scoring settings, and whether the store was built or reused."""
    reused = getattr(searcher, "reused", None)
    return RunInfo(
        executor=executor.config_key(),
        timeout=settings.timeout,
        seed=settings.seed,
        n_resamples=n_resamples,
        depth=depth,
        scored_on="held_out" if held_out else "all",
        store="memory" if reused is None else ("reused" if reused else "built"),
        collection=getattr(searcher, "collection_name", None),
        timing=timing,
    )


class _Scored(NamedTuple):
    """One order of the hits, scored: the fields a results file (and its rerank section) shares."""

    metrics: dict[str, float]
    ci95: dict[str, list[float | None] | None]
    diagnostics: Diagnostics
    per_query: list[QueryRow]


def _scored(pool: Pool, ranking: Ranking, cutoffs: list[int], seed: int, n_resamples: int) -> _Scored:
    """Metrics, bootstrap intervals, diagnostics and per-query rows of one order of the hits."""
    records, per_query = _score(pool, ranking.hits, ranking.verdicts, ranking.scores)
    return _Scored(
        metrics=aggregate(records, cutoffs),
        ci95=confidence_intervals(records, cutoffs, seed=seed, n_resamples=n_resamples),
        diagnostics=Diagnostics.model_validate(diagnostics(records, cutoffs)),
        per_query=per_query,
    )


def _score(
    pool: Pool, hits: list[list[Hit]], verdicts: list, own_scores: list[dict[str, float]]
) -> tuple[list[QueryRecord], list[QueryRow]]:
    """Per-query records (for the metrics) and results-file rows, for hits in the given order."""
    records: list[QueryRecord] = []
    per_query: list[QueryRow] = []
    for q, q_hits, q_verdicts, scores in zip(pool.queries, hits, verdicts, own_scores, strict=True):
        ranked = []
        top_results = []
        for hit, verdict in zip(q_hits, q_verdicts, strict=True):
            snippet = pool.snippet(hit.corpus_id)
            bug = snippet.bug_type or ""
            ranked.append(
                Ranked(
                    hit.corpus_id, verdict.passed, snippet.label, bug, _relation(q, hit.corpus_id), hit.score
                )
            )
            if hit.rank <= TOP_RESULTS:
                top_results.append(
                    TopResult(
                        rank=hit.rank,
                        corpus_id=hit.corpus_id,
                        label=snippet.label,
                        bug_type=bug,
                        similarity=hit.score,
                        passes_all_tests=verdict.passed,
                        test_results=list(verdict.results),
                    )
                )
        retrieved = {h.corpus_id for h in q_hits}
        unseen_canonicals = sum(c not in retrieved for c in set(q.correct_corpus_ids))
        records.append(
            QueryRecord(
                query_id=q.query_id,
                domain=q.domain,
                ranked=tuple(ranked),
                n_relevant=unseen_canonicals + sum(r.passes for r in ranked),
                canonical_below_paired=_canonical_below_paired(q, scores),
            )
        )
        per_query.append(
            QueryRow(
                query_id=q.query_id,
                query=q.query,
                correct_corpus_ids=list(q.correct_corpus_ids),
                top_results=top_results,
            )
        )
    return records, per_query
