"""Chroma vector stores: one collection per (pool corpus, embedder config), built once and reused.

Why named from a hash: the collection name is ``ab-<sha256(store version, corpus hash, embedder config)>``,
so a changed corpus or embedder setting can never be served a stale index; the old collection of the same
pool directory and embedder is deleted when its replacement is built. Only the corpus (ids and code) is
hashed: queries and tests do not change the index. A collection whose count differs from the corpus size
(an interrupted build) is rebuilt.

Exactness: HNSW is configured with ``ef_search`` at least the corpus size, Chroma returns a candidate set
larger than ``k``, and the candidates are re-ranked by exact cosine on the stored embeddings with
deterministic ties (see :mod:`.hits`); the candidate set is widened whenever a tie straddles its edge.

Embeddings are always passed explicitly (Chroma's default embedding function would download a model),
and Chroma errors are translated to :class:`~agentbench.errors.RetrievalError` here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

from ..errors import AgentbenchError, ConfigError, RetrievalError
from ..pools.models import Pool
from ..progress import progress_bar
from ._env import prepare_environment
from .embedders import DenseEmbedder
from .hits import Hit, Searcher, cosine_scores, rank_exact

__all__ = [
    "ChromaSearcher",
    "open_chroma",
    "connect",
    "parse_chroma_url",
    "corpus_sha256",
    "collection_name",
    "STORE_VERSION",
]

STORE_VERSION = 1
MIN_CANDIDATES = 32


def corpus_sha256(pool: Pool) -> str:
    """Hash of the corpus ids and code, independent of row order."""
    rows = sorted((s.corpus_id, s.code) for s in pool.corpus)
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def collection_name(corpus_hash: str, embedder_key: str) -> str:
    digest = hashlib.sha256(f"{STORE_VERSION}\n{corpus_hash}\n{embedder_key}".encode()).hexdigest()
    return f"ab-{digest[:40]}"


def _chroma_error(action: str, exc: Exception) -> RetrievalError:
    message = " ".join(str(exc).split())[:300] or type(exc).__name__
    return RetrievalError(f"Chroma failed while {action}: {message}")


def parse_chroma_url(chroma_url: str) -> tuple[str, int, bool]:
    """``http(s)://host[:port]`` (scheme optional) -> (host, port, ssl); ConfigError otherwise."""
    url = urlparse(chroma_url if "://" in chroma_url else f"http://{chroma_url}")
    try:
        port = url.port
    except ValueError:
        port = -1
    if url.scheme not in ("http", "https") or not url.hostname or port == -1:
        raise ConfigError(f"--chroma-url {chroma_url!r} is not an http(s)://host:port URL")
    return url.hostname, port or (443 if url.scheme == "https" else 8000), url.scheme == "https"


def connect(store_dir: str | Path = "stores", chroma_url: str | None = None) -> Any:
    """An embedded client persisted under ``store_dir/chroma``, or an HTTP client for ``chroma_url``."""
    prepare_environment()
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False)
    if chroma_url is None:
        path = Path(store_dir).expanduser() / "chroma"
        try:
            path.mkdir(parents=True, exist_ok=True)
            return chromadb.PersistentClient(path=str(path), settings=settings)
        except OSError as exc:
            raise RetrievalError(f"cannot use store directory {path}: {exc.strerror}") from exc
        except Exception as exc:
            raise _chroma_error(f"opening the store in {path}", exc) from exc
    host, port, ssl = parse_chroma_url(chroma_url)
    try:
        client = chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=settings)
        client.heartbeat()
    except Exception as exc:
        raise RetrievalError(
            f"cannot reach the Chroma server at {chroma_url} ({type(exc).__name__}); start one with "
            "`chroma run --path DIR --port PORT` or drop --chroma-url to use the embedded store"
        ) from exc
    return client


class ChromaSearcher(Searcher):
    """Exact top-k over one Chroma collection; ``reused`` says whether the collection was already there."""

    def __init__(self, client: Any, collection: Any, embedder: DenseEmbedder, pool: Pool, reused: bool):
        super().__init__(embedder.name, pool.corpus)
        self.client = client
        self.collection = collection
        self.embedder = embedder
        self.reused = reused
        self._matrix: np.ndarray | None = None

    @property
    def collection_name(self) -> str:
        return self.collection.name

    def stored_embeddings(self) -> np.ndarray:
        """The collection's vectors, rows in ``self.ids`` order (fetched once)."""
        if self._matrix is None:
            try:
                got = self.collection.get(include=["embeddings"])
            except Exception as exc:
                raise _chroma_error(f"reading embeddings of {self.collection_name}", exc) from exc
            index = {cid: i for i, cid in enumerate(got["ids"])}
            missing = [cid for cid in self.ids if cid not in index]
            if missing:
                raise RetrievalError(
                    f"collection {self.collection_name} lacks {len(missing)} snippet(s) such as {missing[0]}; "
                    "delete it (or the store directory) to rebuild"
                )
            vectors = np.asarray(got["embeddings"], dtype=np.float32)
            self._matrix = vectors[[index[cid] for cid in self.ids]]
        return self._matrix

    def score_all(self, queries: Sequence[str]) -> np.ndarray:
        if not queries or not self.n_docs:
            return np.zeros((len(queries), self.n_docs))
        return cosine_scores(self.embedder.embed_queries(queries), self.stored_embeddings())

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        if not queries:
            return []
        if not self.n_docs or k <= 0:
            return [[] for _ in queries]
        vectors = self.embedder.embed_queries(queries)
        matrix = self.stored_embeddings()
        n = self.n_docs
        want = min(n, max(2 * k, k + MIN_CANDIDATES))
        results: list[list[Hit] | None] = [None] * len(queries)
        pending = list(range(len(queries)))
        while pending:
            candidates = self._candidates(vectors[pending], want)
            retry = []
            for qi, ids in zip(pending, candidates, strict=True):
                positions = np.array([self.position[cid] for cid in ids], dtype=np.int64)
                scores = cosine_scores(vectors[qi : qi + 1], matrix[positions])[0]
                order = rank_exact(scores, self.tie_ranks[positions], k)
                top = scores[order]
                # a tie at the candidate boundary may hide equal scores (with smaller tie keys) outside it
                if len(positions) < n and len(top) and top[-1] <= scores.min():
                    retry.append(qi)
                    continue
                results[qi] = self._hits_at(positions[order], top)
            pending = retry
            want = min(n, want * 4)
        return [r or [] for r in results]

    def _candidates(self, vectors: np.ndarray, n_results: int) -> list[list[str]]:
        try:
            got = self.collection.query(query_embeddings=vectors, n_results=n_results, include=["distances"])
        except Exception as exc:
            raise _chroma_error(f"querying {self.collection_name}", exc) from exc
        return got["ids"]

    def _hits_at(self, positions: np.ndarray, scores: np.ndarray) -> list[Hit]:
        return [
            Hit(rank, self.ids[pos], float(score), self.codes[self.ids[pos]])
            for rank, (pos, score) in enumerate(zip(positions, scores, strict=True), start=1)
        ]

    def langchain_vectorstore(self) -> Any:
        """The collection as a ``langchain_chroma.Chroma`` (its own similarity search is approximate)."""
        from langchain_chroma import Chroma

        from .lc import LangChainEmbeddings

        return Chroma(
            client=self.client,
            collection_name=self.collection_name,
            embedding_function=LangChainEmbeddings(self.embedder),
            create_collection_if_not_exists=False,
        )


def _hnsw(n_docs: int) -> dict:
    return {
        "space": "cosine",
        "ef_construction": max(200, min(n_docs, 1000)),
        "ef_search": max(100, n_docs),
        "max_neighbors": 32,
    }


def _existing(client: Any, name: str) -> Any | None:
    from chromadb.errors import NotFoundError

    try:
        return client.get_collection(name, embedding_function=None)
    except (NotFoundError, ValueError):
        return None


def _drop_stale(client: Any, keep: str, pool_path: str, embedder_key: str) -> None:
    """Delete older collections built for the same pool directory and embedder config."""
    for coll in client.list_collections():
        meta = coll.metadata or {}
        if coll.name != keep and meta.get("pool_path") == pool_path and meta.get("embedder") == embedder_key:
            client.delete_collection(coll.name)


def open_chroma(
    pool: Pool,
    embedder: DenseEmbedder,
    *,
    store_dir: str | Path = "stores",
    chroma_url: str | None = None,
    progress: bool = True,
) -> ChromaSearcher:
    """Reuse the collection for (pool corpus, embedder config) if complete, else (re)build it."""
    client = connect(store_dir, chroma_url)
    key = embedder.config_key()
    name = collection_name(corpus_sha256(pool), key)
    n = len(pool.corpus)
    try:
        coll = _existing(client, name)
        if coll is not None and coll.count() == n:
            return ChromaSearcher(client, coll, embedder, pool, reused=True)
        if coll is not None:
            client.delete_collection(name)
        ids = [s.corpus_id for s in pool.corpus]
        codes = [s.code for s in pool.corpus]
        with progress_bar(f"embedding {n} snippets ({embedder.name})", n, enabled=progress) as advance:
            vectors = embedder.embed_documents(codes, progress=advance)
        # get_or_create + upsert: a concurrent builder of the same collection writes identical rows
        coll = client.get_or_create_collection(
            name,
            configuration={"hnsw": _hnsw(n)},
            metadata={
                "agentbench_store": STORE_VERSION,
                "pool": pool.name,
                "pool_path": pool.path,
                "embedder": key,
                "n_docs": n,
            },
            embedding_function=None,
        )
        step = max(1, min(client.get_max_batch_size(), 2048))
        for start in range(0, n, step):
            end = start + step
            coll.upsert(
                ids=ids[start:end],
                embeddings=vectors[start:end],
                documents=codes[start:end],
                metadatas=[{"corpus_id": cid} for cid in ids[start:end]],
            )
        _drop_stale(client, name, pool.path, key)
    except AgentbenchError:
        raise
    except Exception as exc:
        raise _chroma_error(f"building collection {name} for {pool.name}", exc) from exc
    return ChromaSearcher(client, coll, embedder, pool, reused=False)
