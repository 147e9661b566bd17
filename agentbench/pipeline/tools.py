"""The tools of a run's tool-using conditions, bound to the run: its retriever and its sandbox.

``search_code`` searches the run's own retriever (the embedder's Chroma store, BM25, or the retriever
plug-in) over the pool; ``run_tests`` runs code through the run's executor and execution cache on the
query's *visible* asserts. Both are serialised by a lock: searchers and executors are shared by all tasks.
"""

from __future__ import annotations

import threading
from functools import partial
from typing import Any

from ..agent.tools import SearchResult, TestOutcome, Tools
from ..errors import SandboxError
from ..execution import Executor, Job
from ..execution.cache import ExecCache, run_cached
from ..pools import Pool, Query
from ..pools.split import HeldOutSplit
from ..retrieval.rerank import Reranking
from .config import RunConfig

__all__ = ["RunTools"]


class RunTools:
    def __init__(
        self,
        pool: Pool,
        config: RunConfig,
        executor: Executor,
        exec_cache: ExecCache | None,
        split: HeldOutSplit | Reranking,
        retriever: Any = None,
    ) -> None:
        self.pool = pool
        self.config = config
        self.executor = executor
        self.exec_cache = exec_cache
        self.split = split
        self.retriever = retriever
        self._searcher: Any = None
        self._own_searcher = False
        self.lock = threading.Lock()
        """Held while the searcher or the executor runs; the run stage takes it too for its executions."""

    def _open(self) -> Any:
        if self._searcher is None:
            if self.retriever is not None:  # the plug-in's searcher, as retrieval used it
                self._searcher = self.retriever
            else:
                from ..retrieval import build_embedder, open_searcher

                self._searcher = open_searcher(
                    self.pool,
                    build_embedder(self.config.embedder_spec),
                    store_dir=self.config.store_dir,
                    chroma_url=self.config.chroma_url,
                    progress=False,
                )
                self._own_searcher = True
        return self._searcher

    def search(self, query: str, k: int) -> list[SearchResult]:
        with self.lock:
            hits = self._open().search_many([query], k)[0]
        return [SearchResult(h.corpus_id, h.code, float(h.score)) for h in hits[:k]]

    def run_tests(self, visible: tuple[str, ...], setup: str, code: str) -> list[TestOutcome]:
        job = Job(code, visible, self.config.timeout, setup)
        with self.lock:
            result = run_cached(self.executor, [job], self.exec_cache)[0]
        if result.infra_error:
            raise SandboxError(f"the sandbox failed ({result.infra_error}); try again")
        outcomes = list(result.results) + ["ERROR:Unknown"] * (len(visible) - len(result.results))
        return [TestOutcome(t, o) for t, o in zip(visible, outcomes, strict=False)]

    def for_query(self, query: Query) -> Tools:
        visible = self.split.split(query).visible
        return Tools(
            self.search,
            partial(self.run_tests, visible, query.test_setup or ""),
            visible_tests=visible,
            max_calls=self.config.max_tool_calls,
        )

    def close(self) -> None:
        if self._own_searcher and self._searcher is not None:
            self._searcher.close()
        self._searcher = None
