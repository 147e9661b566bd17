"""Chroma vector stores: one collection per (pool corpus, embedder config), built once and reused.

Why named from a hash: the collection name is ``ab-<sha256(store version, corpus hash, embedder config)>``,
so a changed corpus or embedder setting can never be served a stale index; the old collection of the same
pool directory and embedder is deleted when its replacement is built. Only the corpus (ids and code) is
hashed: queries and tests do not change the index. A collection whose count differs from the corpus size
(an interrupted build) is rebuilt.

Exactness: ranking is an exact cosine pass (float64, deterministic ties, see :mod:`.hits`) over the
collection's stored vectors, read once when the searcher opens, in blocks of queries. HNSW candidates are
not used: on a replicated 10k-snippet pool (renamed near-duplicates, token-hashing vectors) Chroma's own top
10 differed from the exact one for 10% of queries even with ``ef_search`` at the corpus size, re-ranking its
top 42 exactly still left a wrong top 10 for 5 of 300 queries, and that ``ef_search`` cost 20 ms a query
(the matrix pass: 2 ms). The HNSW index Chroma builds anyway keeps its default, cheap settings and serves
only :meth:`ChromaSearcher.langchain_vectorstore`.

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

from .._env import prepare_environment
from ..errors import AgentbenchError, ConfigError, RetrievalError
from ..pools.models import Pool
from ..progress import progress_bar
from .embedder_spec import EmbedderSpec
from .embedders import DenseEmbedder, Embedder
from .hits import Searcher, normalized_rows

__all__ = [
    "ChromaSearcher",
    "open_chroma",
    "connect",
    "check_server",
    "parse_chroma_url",
    "corpus_sha256",
    "collection_name",
    "STORE_VERSION",
]

STORE_VERSION = 1


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


def check_server(chroma_url: str | None, embedder: EmbedderSpec | Embedder | None) -> None:
    """Fail fast, before any sandbox or run-directory work, when a dense embedder's ``--chroma-url``
    server cannot be reached (a RetrievalError naming the URL and how to start a server)."""
    if chroma_url is None or embedder is None:
        return
    dense = not embedder.sparse if isinstance(embedder, EmbedderSpec) else isinstance(embedder, DenseEmbedder)
    if dense:
        connect(chroma_url=chroma_url)


class ChromaSearcher(Searcher):
    """Exact top-k over one Chroma collection; ``reused`` says whether the collection was already there."""

    def __init__(self, client: Any, collection: Any, embedder: DenseEmbedder, pool: Pool, reused: bool):
        super().__init__(embedder.name, pool.corpus)
        self.client = client
        self.collection = collection
        self.embedder = embedder
        self.reused = reused
        self._matrix: np.ndarray | None = None
        self._unit: np.ndarray | None = None

    @property
    def collection_name(self) -> str:
        return self.collection.name

    def stored_embeddings(self) -> np.ndarray:
        """The collection's vectors, rows in ``self.ids`` order (fetched once, in pages)."""
        if self._matrix is None:
            n = self.n_docs
            matrix: np.ndarray | None = None
            filled = np.zeros(n, dtype=bool)
            step = max(1, min(self.client.get_max_batch_size(), 5000))
            for offset in range(0, max(n, 1), step):
                try:
                    got = self.collection.get(include=["embeddings"], limit=step, offset=offset)
                except Exception as exc:
                    raise _chroma_error(f"reading embeddings of {self.collection_name}", exc) from exc
                vectors = np.asarray(got["embeddings"], dtype=np.float32)
                if not len(got["ids"]):
                    break
                if matrix is None:
                    matrix = np.zeros((n, vectors.shape[1]), dtype=np.float32)
                rows = np.array([self.position.get(cid, -1) for cid in got["ids"]], dtype=np.int64)
                known = rows >= 0
                matrix[rows[known]] = vectors[known]
                filled[rows[known]] = True
            if matrix is None or not filled.all():
                missing = [cid for cid, ok in zip(self.ids, filled, strict=True) if not ok]
                raise RetrievalError(
                    f"collection {self.collection_name} lacks {len(missing)} snippet(s) such as {missing[0]}; "
                    "delete it (or the store directory) to rebuild"
                )
            self._matrix = matrix
        return self._matrix

    def load(self) -> ChromaSearcher:
        """Read the vectors now (part of opening the index), so that query time is only query work."""
        self._unit_docs()
        return self

    def _unit_docs(self) -> np.ndarray:
        if self._unit is None:
            self._unit = normalized_rows(self.stored_embeddings())
        return self._unit

    def score_all(self, queries: Sequence[str]) -> np.ndarray:
        if not queries or not self.n_docs:
            return np.zeros((len(queries), self.n_docs))
        return normalized_rows(self.embedder.embed_queries(queries)) @ self._unit_docs().T

    def scores_of(self, queries: Sequence[str], ids: Sequence[Sequence[str]]) -> list[dict[str, float]]:
        """Only the listed rows of the matrix: the diagnostics need a handful of scores per query, not a
        second pass over the whole corpus."""
        if not queries:
            return []
        vectors = normalized_rows(self.embedder.embed_queries(queries))
        docs = self._unit_docs() if self.n_docs else None
        out: list[dict[str, float]] = []
        for vector, wanted in zip(vectors, ids, strict=True):
            known = [c for c in wanted if c in self.position]
            if docs is None or not known:
                out.append({})
                continue
            scores = docs[[self.position[c] for c in known]] @ vector
            out.append({c: float(x) for c, x in zip(known, scores, strict=True)})
        return out

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


def _hnsw() -> dict:
    """Chroma's default graph settings: ranking does not use the graph (module docstring), so building
    it should cost little (``ef_construction`` 1000 and 32 neighbours made a 10k build three times slower)."""
    return {"space": "cosine"}


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
            return ChromaSearcher(client, coll, embedder, pool, reused=True).load()
        if coll is not None:
            client.delete_collection(name)
        ids = [s.corpus_id for s in pool.corpus]
        codes = [s.code for s in pool.corpus]
        with progress_bar(f"embedding {n} snippets ({embedder.name})", n, enabled=progress) as advance:
            vectors = embedder.embed_documents(codes, progress=advance)
        # get_or_create + upsert: a concurrent builder of the same collection writes identical rows
        coll = client.get_or_create_collection(
            name,
            configuration={"hnsw": _hnsw()},
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
    return ChromaSearcher(client, coll, embedder, pool, reused=False).load()
