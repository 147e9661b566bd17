"""A user's retriever as a :class:`~.hits.Searcher` (``--retriever module:attr`` / ``retriever=``).

Accepted, checked in this order:

- a LangChain ``BaseRetriever`` (or any object with ``invoke(query)`` returning Documents);
- a callable ``(query: str, k: int)`` returning a ranked list, best first, of ``(corpus_id_or_code,
  score)`` pairs, bare corpus ids or code strings, LangChain Documents, or dicts with ``corpus_id`` or
  ``code`` (and optionally ``score``); it may be ``async``;
- a factory: a callable taking one argument, called once with the pool's corpus (a list of
  :class:`CorpusDoc`: ``corpus_id`` and ``code`` only, never labels, in an order unrelated to the pool's)
  and returning one of the above, so a user's own index can be built from the pool.

A retrieved item must name a pool snippet: by corpus id (a Document's ``metadata["corpus_id"]`` or
``metadata["id"]``, or ``Document.id``) or by its exact code. Per query, a retriever that raises or returns
something else is recorded as an error for that query (no hits; counted in ``retrieval.errors``) and the
run goes on. Scores are reported as given (1/rank when absent); the plug-in's order is the ranking.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..plugins import accepts, describe, load_spec
from ..pools.models import Pool
from .hits import Hit, Searcher, tie_key

__all__ = ["CorpusDoc", "PluginSearcher", "check_retriever", "plugin_searcher"]

_SHAPES = "a LangChain BaseRetriever, a callable (query, k) or a factory taking the pool's corpus"


@dataclass(frozen=True)
class CorpusDoc:
    """One pool snippet as a retriever factory sees it."""

    corpus_id: str
    code: str


class _Unusable(Exception):
    """A per-query problem with what the plug-in returned."""


def _is_retriever(obj: Any) -> bool:
    return not inspect.isclass(obj) and callable(getattr(obj, "invoke", None))


def _resolve(obj: Any, pool: Pool, spec: str) -> tuple[Any, str]:
    """``(callable or retriever, kind)`` for an object :func:`check_retriever` accepted, building the
    index through a factory first."""
    if _is_retriever(obj):
        return obj, "retriever"
    if accepts(obj, 2):
        return obj, "callable"
    # in hash order, not pool order: pools list a canonical before its distractors, so a plug-in that
    # breaks score ties by position would otherwise be handed the answer
    snippets = sorted(pool.corpus, key=lambda s: tie_key(s.corpus_id))
    corpus = [CorpusDoc(s.corpus_id, s.code) for s in snippets]
    try:
        built = obj(corpus)
        if inspect.isawaitable(built):
            built = asyncio.run(built)
    except Exception as exc:
        raise ConfigError(f"retriever {spec}: the factory raised {type(exc).__name__}: {exc}") from None
    if _is_retriever(built):
        return built, "retriever"
    if callable(built) and accepts(built, 2):
        return built, "callable"
    raise ConfigError(
        f"retriever {spec}: the factory returned {type(built).__name__}, not a retriever or a callable (query, k)"
    )


class PluginSearcher(Searcher):
    """Ranks with a user's retriever; ``errors`` holds, per query of the last ``search_many``, the
    problem with that query's result (None when fine)."""

    def __init__(self, target: Any, kind: str, pool: Pool, name: str) -> None:
        super().__init__(name, pool.corpus)
        self.target = target
        self.kind = kind
        self.errors: list[str | None] = []
        self.on_query: Callable[[int], object] | None = None
        """Called with 1 after each query (the progress bar)."""
        by_code: dict[str, str] = {}
        for cid in sorted(self.ids, key=lambda c: self.tie_ranks[self.position[c]]):
            by_code.setdefault(self.codes[cid].strip(), cid)
        self.by_code = by_code

    def score_all(self, queries: Sequence[str]) -> np.ndarray:
        """Unknown for a plug-in: NaN (diagnostics that need every score are left out)."""
        return np.full((len(queries), self.n_docs), np.nan)

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        hits: list[list[Hit]] = []
        self.errors = []
        for query in queries:
            try:
                hits.append(self._search(query, k))
                self.errors.append(None)
            except Exception as exc:  # the plug-in's failure is this query's, not the run's
                message = str(exc) if isinstance(exc, _Unusable) else f"raised {type(exc).__name__}: {exc}"
                hits.append([])
                self.errors.append(f"retriever {self.name}: {message}"[:500])
            if self.on_query is not None:
                self.on_query(1)
        return hits

    def _search(self, query: str, k: int) -> list[Hit]:
        raw = self.target.invoke(query) if self.kind == "retriever" else self.target(query, k)
        if inspect.isawaitable(raw):
            raw = asyncio.run(raw)
        if raw is None or isinstance(raw, str | bytes | dict) or not hasattr(raw, "__iter__"):
            raise _Unusable(f"returned {type(raw).__name__}, expected a ranked list")
        out: list[Hit] = []
        seen: set[str] = set()
        for item in raw:
            cid, score = self._identify(item)
            if cid in seen:
                continue
            seen.add(cid)
            rank = len(out) + 1
            out.append(Hit(rank, cid, 1.0 / rank if score is None else score, self.codes[cid]))
            if len(out) == k:
                break
        return out

    def _identify(self, item: Any) -> tuple[str, float | None]:
        score: Any = None
        if isinstance(item, tuple | list) and len(item) == 2:
            item, score = item
        if isinstance(item, Hit):
            item, score = item.corpus_id, item.score if score is None else score
        elif isinstance(item, dict):
            score = item.get("score", score)
            item = item.get("corpus_id") or item.get("code")
        elif hasattr(item, "page_content"):  # a LangChain Document
            meta = getattr(item, "metadata", None) or {}
            score = meta.get("score", score)
            item = next(
                (
                    x
                    for x in (meta.get("corpus_id"), meta.get("id"), getattr(item, "id", None))
                    if x in self.codes
                ),
                item.page_content,
            )
        if not isinstance(item, str):
            raise _Unusable(f"returned an item of type {type(item).__name__}, not a corpus id or code")
        cid = item if item in self.codes else self.by_code.get(item.strip())
        if cid is None:
            shown = item if len(item) <= 60 else item[:57] + "..."
            raise _Unusable(
                f"returned {shown!r}, which is neither a corpus id nor the code of a pool snippet"
            )
        if score is not None:
            try:
                score = float(score)
            except (TypeError, ValueError):
                raise _Unusable(f"returned a score that is not a number: {score!r}") from None
            if not math.isfinite(score):
                score = None
        return cid, score


def check_retriever(retriever: Any) -> tuple[Any, str]:
    """``(object, name)`` for a plug-in object or ``module:attr`` string: imported and its shape checked,
    so these problems fail before any work (a factory is only called by :func:`plugin_searcher`)."""
    if isinstance(retriever, str):
        name, retriever = retriever, load_spec(retriever, "retriever")
    else:
        name = describe(retriever)
    if isinstance(retriever, Searcher) or _is_retriever(retriever):
        return retriever, name
    if not callable(retriever):
        raise ConfigError(f"retriever {name}: {type(retriever).__name__} is not {_SHAPES}")
    if not (accepts(retriever, 2) or accepts(retriever, 1)):
        raise ConfigError(f"retriever {name}: its signature fits none of {_SHAPES}")
    return retriever, name


def plugin_searcher(retriever: Any, pool: Pool, name: str | None = None) -> Searcher:
    """Resolve ``retriever`` (an object, or a ``module:attr`` string) into a searcher over ``pool``."""
    if name is None:
        retriever, name = check_retriever(retriever)
    if isinstance(retriever, Searcher):
        return retriever
    target, kind = _resolve(retriever, pool, name)
    return PluginSearcher(target, kind, pool, name)
