"""Vectors shipped with the package for the bundled pools under the default embedder (minilm).

Why: embedding the 5,012 core snippets takes minutes on a laptop CPU, and a new user's first command
would spend most of its time there. The package therefore ships, per bundled pool, the vector of every
snippet and every query, computed exactly as a run computes them (:mod:`.build`). A run on a bundled pool
with minilm reads them instead of loading the model; the model still embeds anything else.

One file per pool, ``<pool>.npz`` next to this module (``np.savez``, compressed for core; no pickles):

- ``sha``: (n, 32) uint8, the sha256 of the exact text embedded (the snippet's code, the query's text);
- ``kind``: (n,) uint8, 0 for a document (snippet), 1 for a query;
- the vectors, as ``meta``'s ``dtype`` says: ``float32`` (humaneval): ``vectors``, (n, dim), exactly as the
  model returned them; ``int16+exact`` (core, which as float32 would exceed the repository's 5 MB limit
  per file): every row quantized to int16 except the rows ranking is sensitive to, kept as float32, chosen
  so that every query's top 11 and the order of its own snippets are the float32 ones (:mod:`.hybrid`);
- ``meta``: JSON: the pool, the embedder, ``model_sha256`` and ``model_bytes`` (:func:`model_sha256`),
  ``dtype``, what the build verified, and ``data_sha256``: the sha256 of every array (:func:`data_sha256`).

A vector is used only when both hashes match: the embedder's model files hash to ``model_sha256`` and the
text hashes to the row's ``sha``. A file that cannot be read or whose ``data_sha256`` does not match (a
corrupt package file) is ignored with one warning, and everything is embedded as without it. Another pool,
an edited snippet or another embedder (``st:``, prompts, another model version) embeds as before, and the
embedding cache works as before. Shipped vectors are not copied into the cache: the package holds them.

Regenerate after a pool or model change with ``python -m agentbench.retrieval.bundled`` (a test fails,
naming that command, when a shipped file does not cover its pool).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...pools.io import BUNDLED_POOLS
from ...pools.models import Pool
from .._defaults import DEFAULT_EMBEDDER
from ..embedders import Embedder, Kind, SentenceTransformerEmbedder, VectorSource
from . import hybrid

__all__ = [
    "ShippedVectors",
    "for_pool",
    "for_embedder",
    "load",
    "model_sha256",
    "data_sha256",
    "shipped_path",
    "BUNDLED_DIR",
    "KINDS",
    "REGENERATE",
    "SHIPPED_POOLS",
]

log = logging.getLogger("agentbench.retrieval.bundled")

BUNDLED_DIR = Path(__file__).parent
KINDS: tuple[Kind, ...] = ("document", "query")
REGENERATE = "python -m agentbench.retrieval.bundled"
SHIPPED_POOLS: tuple[str, ...] = ("core", "humaneval")
"""The bundled pools whose vectors ship (every bundled pool)."""
FORMAT = 2
"""1: float32 ``vectors`` only (humaneval's file); 2: also the ``int16+exact`` dtype (:mod:`.hybrid`)."""
FLOAT32_ARRAYS = ("sha", "kind", "vectors")
MAX_FILE_BYTES = 5_000_000
"""The repository's limit per tracked file: the build refuses to write a larger one."""
_WARNED: set[str] = set()
_LOADED: dict[tuple[str, int, int], ShippedVectors | None] = {}
_MODEL_SHA: dict[tuple[str, int, int], str] = {}


def shipped_path(pool_name: str) -> Path:
    """Where the shipped vectors of bundled pool ``pool_name`` live."""
    return BUNDLED_DIR / f"{pool_name}.npz"


def model_files(model_dir: Path) -> list[Path]:
    """Every regular file under the model directory, sorted by relative path: what :func:`model_sha256`
    covers (weights, tokenizer, configs and prompts all change vectors)."""
    return sorted(
        (p for p in model_dir.rglob("*") if p.is_file()), key=lambda p: p.relative_to(model_dir).as_posix()
    )


def model_sha256(model_dir: str | Path, expected_bytes: int | None = None) -> str | None:
    """The model's identity: sha256 over one line ``<relative path>\\t<sha256 of the file>\\n`` per file of
    :func:`model_files`. None when ``model_dir`` is not a directory, or its files do not add up to
    ``expected_bytes`` (a different model, told apart without reading it). Memoised per directory, size
    and modification time: the weights take about 0.2 s to hash."""
    path = Path(model_dir).expanduser()
    if not path.is_dir():
        return None
    files = model_files(path)
    stats = [f.stat() for f in files]
    size = sum(s.st_size for s in stats)
    if expected_bytes is not None and size != expected_bytes:
        return None
    key = (str(path.resolve()), size, max((s.st_mtime_ns for s in stats), default=0))
    if key not in _MODEL_SHA:
        lines = hashlib.sha256()
        for f in files:
            with f.open("rb") as fh:
                digest = hashlib.file_digest(fh, "sha256").hexdigest()
            lines.update(f"{f.relative_to(path).as_posix()}\t{digest}\n".encode())
        _MODEL_SHA[key] = lines.hexdigest()
    return _MODEL_SHA[key]


def model_bytes(model_dir: str | Path) -> int:
    """Total size of :func:`model_files`."""
    return sum(f.stat().st_size for f in model_files(Path(model_dir)))


def data_sha256(arrays: Mapping[str, np.ndarray]) -> str:
    """The checksum ``meta`` records: each array's name, dtype, shape and bytes, by name."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        data = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}:{data.dtype.str}:{data.shape}\n".encode())
        digest.update(data.tobytes())
    return digest.hexdigest()


def text_sha256(text: str) -> bytes:
    """The row key of a text: the sha256 of its UTF-8 bytes (as the embedding cache keys it)."""
    return hashlib.sha256(text.encode()).digest()


class ShippedVectors:
    """One verified shipped file: vectors by (kind, sha256 of the text), served as float32 (the
    ``int16+exact`` dtype decoded, :func:`.hybrid.decode`)."""

    def __init__(self, meta: dict[str, Any], arrays: Mapping[str, np.ndarray], path: Path) -> None:
        self.meta = meta
        self.path = path
        self.reference: dict[str, np.ndarray] = {}  # what the build verified (compact files)
        if meta.get("dtype") == hybrid.DTYPE:
            self.vectors = hybrid.decode(dict(arrays))
            self.reference = {k: arrays[f"reference_{k}"] for k in ("queries", "top", "own")}
        else:
            self.vectors = np.asarray(arrays["vectors"], dtype=np.float32)
        self.rows = {
            (int(kind), bytes(sha)): row
            for row, (kind, sha) in enumerate(zip(arrays["kind"], arrays["sha"], strict=True))
        }

    @property
    def model_sha256(self) -> str:
        return str(self.meta["model_sha256"])

    def __len__(self) -> int:
        return len(self.rows)

    def has(self, kind: Kind, text: str) -> bool:
        return (KINDS.index(kind), text_sha256(text)) in self.rows

    def row_of(self, kind: Kind, text: str) -> int:
        """The file row of ``text`` (-1 when it is not shipped)."""
        return self.rows.get((KINDS.index(kind), text_sha256(text)), -1)

    def get_many(self, kind: Kind, texts: Sequence[str]) -> dict[int, np.ndarray]:
        """Vectors by position in ``texts`` (a copy each); texts not shipped are absent."""
        k = KINDS.index(kind)
        out: dict[int, np.ndarray] = {}
        for i, text in enumerate(texts):
            row = self.rows.get((k, text_sha256(text)))
            if row is not None:
                out[i] = self.vectors[row].copy()
        return out


def _warn_corrupt(path: Path, reason: str) -> None:
    if str(path) in _WARNED:
        return
    _WARNED.add(str(path))
    log.warning(
        "the shipped vectors %s are corrupt (%s): ignored, the pool is embedded instead "
        "(reinstall agentbench, or regenerate them: %s)",
        path,
        reason,
        REGENERATE,
    )


def load(path: Path) -> ShippedVectors | None:
    """The verified vectors in ``path``; None when it is absent, or corrupt (then with one warning per
    file and process). Read once per file version."""
    try:
        stat = path.stat()
    except OSError:
        return None
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _LOADED:
        _LOADED[key] = _read(path)
    return _LOADED[key]


def _read(path: Path) -> ShippedVectors | None:
    try:
        with np.load(path, allow_pickle=False) as npz:
            meta = json.loads(str(npz["meta"]))
            compact = meta["dtype"] == hybrid.DTYPE
            arrays = {name: npz[name] for name in (hybrid.ARRAYS if compact else FLOAT32_ARRAYS)}
        expected = meta["data_sha256"]
        if compact:
            ok = hybrid.check_shapes(arrays)
        else:
            n = len(arrays["kind"])
            ok = arrays["sha"].shape == (n, 32) and len(arrays["vectors"]) == n
    except Exception as exc:  # any failure to decode the file (zip, CRC, JSON, keys) is a corrupt file
        _warn_corrupt(path, f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}")
        return None
    if not ok or data_sha256(arrays) != expected:
        _warn_corrupt(path, "their sha256 does not match the one recorded in the file")
        return None
    return ShippedVectors(meta, arrays, path)


def bundled_name(pool: Pool) -> str | None:
    """Which bundled pool ``pool`` was loaded from (by directory), or None."""
    try:
        where = os.path.realpath(pool.path)
    except (TypeError, ValueError):
        return None
    for name in SHIPPED_POOLS:
        if where == os.path.realpath(BUNDLED_POOLS[name]):
            return name
    return None


def for_pool(pool: Pool, embedder: Embedder) -> ShippedVectors | None:
    """The shipped vectors ``embedder`` may use for ``pool``: only for a bundled pool, a
    sentence-transformers embedder without prompts whose model files hash to the shipped model's
    sha256, and a file that passes its checksum. None otherwise (everything is embedded)."""
    name = bundled_name(pool)
    return None if name is None else _matching(name, embedder)


def for_embedder(embedder: Embedder) -> VectorSource | None:
    """Every bundled pool's shipped vectors that ``embedder`` may use (the checks of :func:`for_pool`),
    for code that embeds a bundled pool's texts without its :class:`Pool`, such as a ``--retriever``
    plug-in given only the corpus; rows match by the text's sha256, so other texts are embedded."""
    parts = [found for name in SHIPPED_POOLS if (found := _matching(name, embedder)) is not None]
    return _Union(parts) if parts else None


class _Union:
    """Several shipped files as one vector source (the first that holds a text serves it)."""

    def __init__(self, parts: Sequence[ShippedVectors]) -> None:
        self.parts = parts

    def get_many(self, kind: Kind, texts: Sequence[str]) -> dict[int, np.ndarray]:
        out: dict[int, np.ndarray] = {}
        for part in self.parts:
            for i, vector in part.get_many(kind, texts).items():
                out.setdefault(i, vector)
        return out


def _matching(name: str, embedder: Embedder) -> ShippedVectors | None:
    if not isinstance(embedder, SentenceTransformerEmbedder):
        return None
    if embedder.query_prompt is not None or embedder.document_prompt is not None:
        return None
    shipped = load(shipped_path(name))
    if shipped is None:
        return None
    if model_sha256(embedder.model_ref, shipped.meta.get("model_bytes")) != shipped.model_sha256:
        # the default embedder is expected to match: say why this run embeds (another package version)
        level = logging.INFO if embedder.name == DEFAULT_EMBEDDER else logging.DEBUG
        log.log(level, "the shipped %s vectors are for another model than %s: embedding", name, embedder.name)
        return None
    return shipped
