"""Writing and checking the shipped vectors (:mod:`agentbench.retrieval.bundled`).

Vectors are computed the way a run computes them, so that a run reading them ranks exactly as a run
embedding them: snippets in corpus order through ``embed_documents`` (as :func:`..store.open_chroma` does),
queries in blocks of ``QUERY_BLOCK`` through ``embed_queries`` (as ``Searcher.search_many`` does), with a
fresh minilm embedder that has no cache and no shipped vectors.
"""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

from ...pools.io import load_pool
from ...pools.models import Pool
from ..embedders import MINILM_PACKAGE, SentenceTransformerEmbedder, minilm
from ..hits import QUERY_BLOCK
from . import (
    FORMAT,
    KINDS,
    REGENERATE,
    data_sha256,
    load,
    model_bytes,
    model_sha256,
    shipped_path,
    text_sha256,
)

__all__ = ["DTYPE", "fresh_vectors", "write", "build", "problems"]

DTYPE = "float32"
"""What the files store. float16 halves the size but changes rankings: measured on core, see
docs/retrieval.md and bench/bundled_vectors.py."""


def fresh_vectors(
    pool: Pool, embedder: SentenceTransformerEmbedder | None = None
) -> dict[tuple[str, str], np.ndarray]:
    """Every snippet's and query's vector, by (kind, text), computed as a run computes them."""
    embedder = embedder or minilm()
    embedder.use_cache(None).use_shipped(None)
    codes = list(dict.fromkeys(s.code for s in pool.corpus))
    queries = list(dict.fromkeys(q.query for q in pool.queries))
    out = {("document", t): v for t, v in zip(codes, embedder.embed_documents(codes), strict=True)}
    for start in range(0, len(queries), QUERY_BLOCK):
        block = queries[start : start + QUERY_BLOCK]
        out.update({("query", t): v for t, v in zip(block, embedder.embed_queries(block), strict=True)})
    return out


def write(
    path: Path,
    pool_name: str,
    vectors: dict[tuple[str, str], np.ndarray],
    embedder: SentenceTransformerEmbedder,
    dtype: str = DTYPE,
) -> Path:
    """Write ``vectors`` (by (kind, text)) as a shipped file for ``embedder``'s model."""
    items = list(vectors.items())
    arrays = {
        "sha": np.array([list(text_sha256(text)) for (_, text), _ in items], dtype=np.uint8).reshape(-1, 32),
        "kind": np.array([KINDS.index(kind) for (kind, _), _ in items], dtype=np.uint8),
        "vectors": np.stack([v for _, v in items]).astype(dtype),
    }
    meta = {
        "format": FORMAT,
        "pool": pool_name,
        "embedder": embedder.name,
        "embedder_config": embedder.config_key(),
        "model_sha256": model_sha256(embedder.model_ref),
        "model_bytes": model_bytes(embedder.model_ref),
        "dtype": dtype,
        "n_documents": int((arrays["kind"] == 0).sum()),
        "n_queries": int((arrays["kind"] == 1).sum()),
        "data_sha256": data_sha256(arrays),
        "computed_with": {pkg: _version(pkg) for pkg in ("sentence-transformers", "torch", MINILM_PACKAGE)},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, meta=np.array(json.dumps(meta, sort_keys=True)), **arrays)
    tmp.replace(path)
    return path


def build(pool_name: str, dtype: str = DTYPE) -> Path:
    """Recompute and write the shipped vectors of bundled pool ``pool_name``."""
    embedder = minilm()
    pool = load_pool(pool_name)
    return write(shipped_path(pool_name), pool_name, fresh_vectors(pool, embedder), embedder, dtype)


def problems(pool_name: str, pool: Pool | None = None) -> list[str]:
    """Why the shipped file of bundled pool ``pool_name`` does not serve every snippet and query of the
    current pool (or of ``pool``) with the installed minilm model (empty when it does)."""
    path = shipped_path(pool_name)
    shipped = load(path)
    if shipped is None:
        return [f"{path} is missing or corrupt: run `{REGENERATE}`"]
    out = []
    embedder = minilm()
    if model_sha256(embedder.model_ref) != shipped.model_sha256:
        out.append(f"{path} was computed with another model than the installed {MINILM_PACKAGE}")
    pool = pool or load_pool(pool_name)
    for kind, texts in (
        ("document", [s.code for s in pool.corpus]),
        ("query", [q.query for q in pool.queries]),
    ):
        missing = [t for t in texts if not shipped.has(kind, t)]
        if missing:
            label = "snippets" if kind == "document" else "queries"
            out.append(f"{len(missing)} of {len(texts)} {label} of pool {pool_name} are not in {path.name}")
    return [f"{p}: run `{REGENERATE}`" for p in out]


def _version(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None
