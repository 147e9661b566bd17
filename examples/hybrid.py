"""A hybrid retriever: BM25 and dense rankings fused by reciprocal rank fusion (RRF).

    agentbench run --retriever examples.hybrid:retriever --agent examples.simple_agent:agent --limit 10

``retriever`` is a *factory*: agentbench calls it once with the pool's corpus (``corpus_id`` and ``code``
of each snippet, never its label) and it returns the search function ``(query, k) -> [(corpus_id,
score), ...]``, best first. Your own service would be queried here instead; what matters is that each result
names a pool snippet, by its corpus id or its exact code.

The dense half uses agentbench's MiniLM embedder with its on-disk embedding cache (so a rerun does not
re-embed the pool), and the vectors agentbench ships for its bundled pools (so `core` and `humaneval` are
not embedded at all); any sentence-transformers model works the same way.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence

import bm25s
import numpy as np

from agentbench import CorpusDoc
from agentbench.retrieval import EmbeddingCache, parse_embedder
from agentbench.retrieval.bundled import for_embedder

RRF_K = 60  # the usual RRF constant: dampens the weight of top ranks
DEPTH = 50  # candidates taken from each ranking before fusion

_WORD = re.compile(r"[A-Za-z]+|\d+")


def tokenize(text: str) -> list[str]:
    """Identifiers split on snake_case and camelCase, lower-cased: ``maxValue_2`` -> max, value, 2."""
    words = []
    for word in _WORD.findall(text):
        words += [w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", word)] or [word.lower()]
    return words


def rrf(rankings: Sequence[Sequence[int]], n_docs: int) -> np.ndarray:
    """Reciprocal rank fusion scores: the sum over rankings of 1 / (RRF_K + rank)."""
    scores = np.zeros(n_docs)
    for ranking in rankings:
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] += 1.0 / (RRF_K + rank)
    return scores


def retriever(corpus: list[CorpusDoc]) -> Callable[[str, int], list[tuple[str, float]]]:
    ids = [doc.corpus_id for doc in corpus]
    # Exact score ties (BM25 often scores a snippet and its one-operator mutant the same) are broken by a
    # hash of the id: deterministic, and unrelated to how the pool numbered or ordered its snippets.
    tiebreak = np.array([hashlib.sha256(cid.encode()).hexdigest() for cid in ids])
    bm25 = bm25s.BM25()
    bm25.index([tokenize(doc.code) for doc in corpus], show_progress=False)

    embedder = parse_embedder("minilm").use_cache(EmbeddingCache())
    embedder.use_shipped(for_embedder(embedder))  # None for another model: everything is embedded
    vectors = np.asarray(embedder.embed_documents([doc.code for doc in corpus]), dtype=np.float64)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

    def search(query: str, k: int) -> list[tuple[str, float]]:
        depth = min(DEPTH, len(ids))
        sparse = bm25.get_scores(tokenize(query))
        q = np.asarray(embedder.embed_query(query), dtype=np.float64)
        dense = vectors @ (q / np.linalg.norm(q))
        rankings = [np.lexsort((tiebreak, -s))[:depth] for s in (sparse, dense)]
        fused = rrf(rankings, len(ids))
        best = np.lexsort((tiebreak, -fused))[:k]
        return [(ids[i], float(fused[i])) for i in best if fused[i] > 0]

    return search
