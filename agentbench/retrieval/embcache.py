"""On-disk embedding cache: vectors keyed by (embedder config, query/document, sha256 of the text).

Why: API embedders cost money and time, and even a local model costs seconds to load. With every vector
cached, a rerun makes no API calls and never loads the model, which is what keeps warm retrieval runs
within a few seconds. One store (``embeddings/`` under :func:`agentbench.cache.cache_dir`, see
:mod:`agentbench.cache`) is shared by all agentbench processes; a vector is kept as its float32 bytes
(base64), so it reads back bit for bit. The ``embeddings.sqlite`` file of earlier releases is ignored
(vectors are recomputed once).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..cache import EMBEDDINGS, JSONCache, store_dir

__all__ = ["EmbeddingCache", "default_embedding_cache_path", "text_key"]


def default_embedding_cache_path() -> Path:
    """The embedding store's directory: ``<cache_dir>/embeddings``, next to the execution store."""
    return store_dir(EMBEDDINGS)


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _encode(vector: np.ndarray) -> dict[str, object]:
    data = np.ascontiguousarray(vector, dtype=np.float32)
    return {"dim": int(data.shape[0]), "f32": base64.b64encode(data.tobytes()).decode("ascii")}


def _decode(row: dict) -> np.ndarray:
    return np.frombuffer(base64.b64decode(row["f32"]), dtype=np.float32, count=row["dim"]).copy()


class EmbeddingCache:
    """Float32 vectors on :class:`agentbench.cache.JSONCache`; safe to share between threads and processes.

    ``path`` is the store's directory (default :func:`default_embedding_cache_path`).
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else default_embedding_cache_path()
        self._store = JSONCache(self.path, label="embedding")

    def get_many(self, config: str, kind: str, texts: Sequence[str]) -> dict[int, np.ndarray]:
        """Cached vectors by position in ``texts``; misses are absent."""
        keys = [(config, kind, text_key(text)) for text in texts]
        rows = self._store.get_many(keys)
        return {i: _decode(rows[key]) for i, key in enumerate(keys) if key in rows}

    def put_many(self, config: str, kind: str, texts: Sequence[str], vectors: np.ndarray) -> None:
        items = [((config, kind, text_key(t)), _encode(v)) for t, v in zip(texts, vectors, strict=True)]
        self._store.set_many(items)

    def __len__(self) -> int:
        return len(self._store)

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> EmbeddingCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
