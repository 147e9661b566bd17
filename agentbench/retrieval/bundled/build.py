"""Writing and checking the shipped vectors (:mod:`agentbench.retrieval.bundled`).

Vectors are computed the way a run computes them, so that a run reading them ranks exactly as a run
embedding them: snippets in corpus order through ``embed_documents`` (as :func:`..store.open_chroma` does),
queries in blocks of ``QUERY_BLOCK`` through ``embed_queries`` (as ``Searcher.search_many`` does), with a
fresh minilm embedder that has no cache and no shipped vectors.

A compact (``int16+exact``) file also records what the build verified against the float32 vectors: each
query's float32 top ``TOP`` and the float32 order of its own snippets (``reference_*``), which
:func:`verify` checks the file still reproduces (a test does, for all of core, without embedding).
"""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

from ...errors import ConfigError
from ...pools.io import load_pool
from ...pools.models import Pool
from ..embedders import MINILM_PACKAGE, SentenceTransformerEmbedder, minilm
from ..evaluate import TOP_RESULTS
from ..hits import QUERY_BLOCK, tie_ranks_for
from . import (
    FORMAT,
    KINDS,
    MAX_FILE_BYTES,
    REGENERATE,
    ShippedVectors,
    data_sha256,
    hybrid,
    load,
    model_bytes,
    model_sha256,
    shipped_path,
    text_sha256,
)

__all__ = [
    "DTYPE",
    "DTYPES",
    "TOP",
    "fresh_vectors",
    "write",
    "build",
    "verify",
    "problems",
    "own_positions",
    "pool_matrices",
]

DTYPE = "float32"
DTYPES = {"core": hybrid.DTYPE, "humaneval": DTYPE}
"""What each pool's file stores: humaneval's float32 vectors take 1.2 MB; core's would take 7.4 MB
compressed, over the 5 MB limit, and plain float16 or int8 copies change rankings (docs/retrieval.md)."""
TOP = TOP_RESULTS + 1
"""The depth a compact file keeps identical: the results file's rows, and one more so that which
snippets make the top 10 is stable too."""


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
    pool: Pool | None = None,
) -> Path:
    """Write ``vectors`` (by (kind, text)) as a shipped file for ``embedder``'s model. The compact dtype
    needs the ``pool`` (its rankings choose the exact rows); a file over ``MAX_FILE_BYTES`` is not written
    (ConfigError)."""
    items = list(vectors.items())
    matrix = np.stack([v for _, v in items]).astype(np.float32)
    arrays = {
        "sha": np.array([list(text_sha256(text)) for (_, text), _ in items], dtype=np.uint8).reshape(-1, 32),
        "kind": np.array([KINDS.index(kind) for (kind, _), _ in items], dtype=np.uint8),
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
        "computed_with": {pkg: _version(pkg) for pkg in ("sentence-transformers", "torch", MINILM_PACKAGE)},
    }
    if dtype == hybrid.DTYPE:
        if pool is None:
            raise ConfigError(f"writing {dtype} vectors needs the pool: pass pool=")
        compact, meta["selection"] = _compact(pool, {key: i for i, (key, _) in enumerate(items)}, matrix)
        arrays |= compact
    else:
        arrays["vectors"] = matrix.astype(dtype)
    meta["data_sha256"] = data_sha256(arrays)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    save = np.savez_compressed if dtype == hybrid.DTYPE else np.savez
    save(tmp, meta=np.array(json.dumps(meta, sort_keys=True)), **arrays)
    if tmp.stat().st_size > MAX_FILE_BYTES:
        size = tmp.stat().st_size
        tmp.unlink()
        raise ConfigError(
            f"{path.name} would take {size:,} bytes, over the repository's {MAX_FILE_BYTES:,}-byte limit per "
            f"file: not written (store fewer exact rows or a smaller dtype)"
        )
    tmp.replace(path)
    return path


def _compact(
    pool: Pool, row: dict[tuple[str, str], int], matrix: np.ndarray
) -> tuple[dict[str, np.ndarray], dict]:
    """The ``int16+exact`` arrays of ``matrix`` (rows by (kind, text) in ``row``): the exact rows chosen on
    ``pool``'s rankings, and the float32 orders they keep (``reference_*``, as file rows)."""
    doc_rows = np.array([row[("document", s.code)] for s in pool.corpus], dtype=np.int64)
    query_rows = np.array([row[("query", q.query)] for q in pool.queries], dtype=np.int64)
    own = own_positions(pool)
    selection = hybrid.select_exact(
        matrix[doc_rows], matrix[query_rows], tie_ranks_for([s.corpus_id for s in pool.corpus]), own, TOP
    )
    exact = sorted(set(doc_rows[selection.document_rows]) | set(query_rows[selection.query_rows]))
    arrays = hybrid.encode(matrix, exact)
    width = max((len(o) for o in own), default=0)
    padded = np.full((len(own), width), -1, dtype=np.int32)
    for i, order in enumerate(selection.reference_own):
        padded[i, : len(order)] = doc_rows[order]
    arrays["reference_queries"] = query_rows.astype(np.int32)
    arrays["reference_top"] = doc_rows[selection.reference_top].astype(np.int32)
    arrays["reference_own"] = padded
    return arrays, selection.meta() | {"exact_rows": len(exact), "quantization": hybrid.QUANTIZATION}


def own_positions(pool: Pool) -> list[list[int]]:
    """Each query's own snippets (canonicals, then paired distractors) as corpus positions."""
    position = {s.corpus_id: i for i, s in enumerate(pool.corpus)}
    ids = [dict.fromkeys(q.correct_corpus_ids + q.paired_distractor_corpus_ids) for q in pool.queries]
    return [[position[c] for c in wanted if c in position] for wanted in ids]


def build(pool_name: str, dtype: str | None = None) -> Path:
    """Recompute and write the shipped vectors of bundled pool ``pool_name`` (in its dtype of ``DTYPES``
    unless given), then check the written file reproduces the orders the build verified."""
    embedder = minilm()
    pool = load_pool(pool_name)
    dtype = dtype or DTYPES.get(pool_name, DTYPE)
    path = shipped_path(pool_name)
    write(path, pool_name, fresh_vectors(pool, embedder), embedder, dtype, pool)
    found = verify(pool_name, pool)
    if found:
        raise RuntimeError("\n".join(found))
    return path


def verify(pool_name: str, pool: Pool | None = None) -> list[str]:
    """Why the shipped file of ``pool_name``, read as a run reads it, does not rank every query of the pool
    as the float32 vectors did when it was built (each query's top ``TOP`` and the order of its own
    snippets, recorded in the file); empty when it does, or when the file is float32 (nothing to check)."""
    path = shipped_path(pool_name)
    shipped = load(path)
    if shipped is None:
        return [f"{path} is missing or corrupt: run `{REGENERATE}`"]
    if shipped.meta.get("dtype") != hybrid.DTYPE:
        return []
    pool = pool or load_pool(pool_name)
    docs, queries = pool_matrices(shipped, pool)
    if docs is None or queries is None:
        return [f"{path} does not cover pool {pool_name}: run `{REGENERATE}`"]
    ties = tie_ranks_for([s.corpus_id for s in pool.corpus])
    top, own = hybrid.orders(docs, queries, ties, own_positions(pool), TOP)
    rows = {int(r): i for i, r in enumerate(shipped.reference["queries"])}
    position = {shipped.row_of("document", s.code): i for i, s in enumerate(pool.corpus)}
    out = []
    for i, q in enumerate(pool.queries):
        j = rows.get(shipped.row_of("query", q.query), -1)
        if j < 0:
            out.append(f"query {q.query_id}: no float32 reference in {path.name}")
            continue
        want_top = [position.get(int(r), -1) for r in shipped.reference["top"][j]]
        want_own = [position.get(int(r), -1) for r in shipped.reference["own"][j] if r >= 0]
        if want_top != top[i].tolist() or want_own != own[i].tolist():
            out.append(f"query {q.query_id}: its top {TOP} or own order differs from float32 ({path.name})")
    return out


def pool_matrices(shipped: ShippedVectors, pool: Pool) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The shipped vectors of ``pool``'s snippets (corpus order) and queries, or None where one is missing."""
    out = []
    for kind, texts in (
        ("document", [s.code for s in pool.corpus]),
        ("query", [q.query for q in pool.queries]),
    ):
        got = shipped.get_many(kind, texts)
        out.append(np.stack([got[i] for i in range(len(texts))]) if len(got) == len(texts) else None)
    return out[0], out[1]


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
