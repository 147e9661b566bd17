"""The compact format of a shipped file (``int16+exact``), and how the build chooses its exact rows.

Why not float32: core's 6,023 float32 vectors take 7.4 MB compressed, over the repository's 5 MB limit per
file. Why not plain float16 or int8: core's snippets come in near-duplicate groups (a canonical and its
one-edit distractors) whose scores differ by as little as 1e-6, and rounding moves scores by up to 1e-4
(float16) or more (int8), which reorders them (bench/bundled_vectors.py ``--dtypes``). So:

- every row is quantized to int16 with its own scale (``max |v| / 32767``). For these vectors (unit length,
  components about 0.05) that is about 8 times as precise as float16 for the same 2 bytes (a score moves by
  at most about 1e-5), and as small once compressed;
- the rows that ranking is sensitive to are kept exactly, as float32 (:func:`select_exact`): the build
  makes every query's top ``top`` (its results-file rows, plus one so membership is stable) and the
  order of its own snippets (canonicals and paired distractors: the diagnostics compare them) identical to
  the float32 ones, then adds a safety margin.

The int16 values are stored as two byte planes (high, low): the high bytes compress well, the low bytes do
not, and mixed together neither would (4.4 MB instead of 4.6 MB for core).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..hits import QUERY_BLOCK, normalized_rows, rank_exact

__all__ = [
    "DTYPE",
    "ARRAYS",
    "LEVELS",
    "Selection",
    "encode",
    "decode",
    "quantized",
    "orders",
    "select_exact",
]

DTYPE = "int16+exact"
ARRAYS = (
    "sha",
    "kind",
    "q_hi",
    "q_lo",
    "scale",
    "exact_rows",
    "exact",
    "reference_queries",
    "reference_top",
    "reference_own",
)
"""The arrays of a file of this dtype (``reference_*``: what the build verified, see :mod:`.build`)."""
LEVELS = 32767
QUANTIZATION = "int16 per row: round(v / s) with s = max|v| / 32767; read back as float32 q * s"


def _split(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """int16 per row (the largest component at +-LEVELS), as high and low byte planes, and the scales."""
    v = np.asarray(vectors, dtype=np.float32)
    scale = (np.abs(v).max(axis=1) / np.float32(LEVELS)).astype(np.float32)
    safe = np.where(scale > 0, scale, np.float32(1)).astype(np.float64)
    q = np.clip(np.rint(v.astype(np.float64) / safe[:, None]), -LEVELS, LEVELS).astype(np.int16)
    return (q >> 8).astype(np.int8), (q & 0xFF).astype(np.uint8), scale


def _join(q_hi: np.ndarray, q_lo: np.ndarray, scale: np.ndarray) -> np.ndarray:
    q = (q_hi.astype(np.int16) << 8) | q_lo.astype(np.int16)
    return q.astype(np.float32) * scale.astype(np.float32)[:, None]


def quantized(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` as every row reads back when it is not kept exactly (float32)."""
    return _join(*_split(vectors))


def encode(vectors: np.ndarray, exact_rows: Sequence[int]) -> dict[str, np.ndarray]:
    """The vector arrays of a file: every row quantized, except ``exact_rows``, kept as float32 (their
    quantized rows are zeros, which compress to nothing)."""
    v = np.asarray(vectors, dtype=np.float32)
    rows = np.array(sorted(set(int(r) for r in exact_rows)), dtype=np.int32)
    q_hi, q_lo, scale = _split(v)
    q_hi[rows], q_lo[rows], scale[rows] = 0, 0, 0
    return {"q_hi": q_hi, "q_lo": q_lo, "scale": scale, "exact_rows": rows, "exact": v[rows]}


def decode(arrays: dict[str, np.ndarray]) -> np.ndarray:
    """The float32 vectors a file of this dtype holds (what a run reads), rows in file order."""
    out = _join(arrays["q_hi"], arrays["q_lo"], arrays["scale"])
    out[arrays["exact_rows"]] = arrays["exact"]
    return out


def check_shapes(arrays: dict[str, np.ndarray]) -> bool:
    """Whether the arrays fit together (checked before :func:`decode` on load)."""
    n = len(arrays["kind"])
    dim = arrays["q_hi"].shape[1] if arrays["q_hi"].ndim == 2 else -1
    rows, queries, top = arrays["exact_rows"], arrays["reference_queries"], arrays["reference_top"]
    return (
        arrays["sha"].shape == (n, 32)
        and arrays["q_hi"].shape == arrays["q_lo"].shape == (n, dim)
        and arrays["scale"].shape == (n,)
        and arrays["exact"].shape == (len(rows), dim)
        and top.ndim == 2
        and len(top) == len(queries) == len(arrays["reference_own"])
        and all(bool(((r >= 0) & (r < n)).all()) for r in (rows, queries, top))
        and bool(((arrays["reference_own"] >= -1) & (arrays["reference_own"] < n)).all())
    )


@dataclass(frozen=True)
class Selection:
    """The rows :func:`select_exact` keeps exactly, and what it verified."""

    document_rows: np.ndarray  # positions in ``docs``
    query_rows: np.ndarray  # positions in ``queries``
    reference_top: np.ndarray  # (n_queries, top): each query's float32 top, positions in ``docs``
    reference_own: list[np.ndarray]  # each query's own snippets in float32 order, positions in ``docs``
    top: int
    iterations: int
    max_score_error: float  # over every watched (query, snippet) score, after the selection
    margin: float  # adjacent watched pairs closer than this in float32 were kept exactly

    def meta(self) -> dict[str, Any]:
        return {
            "exact_documents": len(self.document_rows),
            "exact_queries": len(self.query_rows),
            "verified": {
                "identical_top": self.top,
                "identical_own_order": True,
                "queries": len(self.reference_top),
                "iterations": self.iterations,
                "max_score_error": self.max_score_error,
                "margin": self.margin,
            },
        }


@dataclass(frozen=True)
class _Watched:
    top: np.ndarray  # (n_q, top) positions
    top_scores: np.ndarray  # scores of the reference's top positions
    own: list[np.ndarray]  # each query's own snippets, best first
    own_scores: list[np.ndarray]  # scores of the reference's own order


def _watch(
    docs: np.ndarray,
    queries: np.ndarray,
    tie_ranks: np.ndarray,
    own: Sequence[np.ndarray],
    top: int,
    ref: _Watched | None = None,
) -> _Watched:
    """Rankings as the retrieval stage computes them (ChromaSearcher: float64 unit rows, queries in blocks
    of QUERY_BLOCK, :func:`rank_exact`; own snippets' scores one query at a time, as ``scores_of``)."""
    unit = normalized_rows(docs)
    tops, top_scores, owns, own_scores = [], [], [], []
    for start in range(0, len(queries), QUERY_BLOCK):
        block = normalized_rows(queries[start : start + QUERY_BLOCK])
        for j, row in enumerate(block @ unit.T):
            i = start + j
            tops.append(rank_exact(row, tie_ranks, top))
            top_scores.append(row[tops[-1] if ref is None else ref.top[i]])
            scores = unit[own[i]] @ block[j]
            order = own[i][np.lexsort((tie_ranks[own[i]], -scores))]
            owns.append(order)
            want = order if ref is None else ref.own[i]
            own_scores.append((unit[want] @ block[j]) if len(want) else np.zeros(0))
    return _Watched(np.stack(tops), np.stack(top_scores), owns, own_scores)


def orders(
    docs: np.ndarray, queries: np.ndarray, tie_ranks: np.ndarray, own: Sequence[Sequence[int]], top: int
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Each query's top ``top`` and the order of its own snippets, as positions in ``docs``, ranked as
    the retrieval stage ranks (what :func:`select_exact` keeps identical)."""
    own_arr = [np.asarray(o, dtype=np.int64) for o in own]
    found = _watch(np.asarray(docs, np.float32), np.asarray(queries, np.float32), tie_ranks, own_arr, top)
    return found.top, found.own


def select_exact(
    docs: np.ndarray, queries: np.ndarray, tie_ranks: np.ndarray, own: Sequence[Sequence[int]], top: int
) -> Selection:
    """The rows to keep exactly so that, with every other row :func:`quantized`, each query's top ``top``
    and the order of its own snippets (``own[i]``: positions in ``docs``) are the float32 ones.

    Greedy: start with every row quantized; for each query whose watched orders differ, keep the query and
    every snippet whose position differs exactly; repeat until none differs. Then the margin: the watched
    scores still err by at most ``e`` (``max_score_error``); any adjacent watched pair (two neighbours in a
    query's top, or in its own order) whose float32 gap is below ``2e`` could swap under an error of ``e``
    each, so its query and snippets are kept exactly too (repeated, with ``e`` measured again, until no
    such pair remains). Snippets with identical float32 vectors are kept alike, so an exact score tie
    stays a tie."""
    docs, queries = np.asarray(docs, dtype=np.float32), np.asarray(queries, dtype=np.float32)
    own_arr = [np.asarray(o, dtype=np.int64) for o in own]
    ref = _watch(docs, queries, tie_ranks, own_arr, top)
    twins = _twins(docs)
    approx_d, approx_q = quantized(docs), quantized(queries)
    exact_d, exact_q = np.zeros(len(docs), bool), np.zeros(len(queries), bool)
    iterations, with_margin = 0, False
    while True:
        iterations += 1
        got = _watch(
            np.where(exact_d[:, None], docs, approx_d),
            np.where(exact_q[:, None], queries, approx_q),
            tie_ranks,
            own_arr,
            top,
            ref,
        )
        errors = [np.abs(got.top_scores - ref.top_scores).ravel()]
        errors += [np.abs(a - b) for a, b in zip(got.own_scores, ref.own_scores, strict=True)]
        max_error = float(np.concatenate(errors).max(initial=0.0))
        margin = 2 * max_error if with_margin else -np.inf
        new_d: set[int] = set()
        new_q: set[int] = set()
        differing = 0
        for i in range(len(queries)):
            same = np.array_equal(ref.top[i], got.top[i]) and np.array_equal(ref.own[i], got.own[i])
            differing += not same
            rows = _unstable(ref.top[i], got.top[i], ref.top_scores[i], margin, exact_d, exact_q[i])
            rows |= _unstable(ref.own[i], got.own[i], ref.own_scores[i], margin, exact_d, exact_q[i])
            if rows:
                new_d |= {t for r in rows for t in twins.get(r, (r,))}
                new_q.add(i)
        if all(exact_d[r] for r in new_d) and all(exact_q[i] for i in new_q):
            if differing:  # cannot happen: a differing order always involves a quantized row
                raise RuntimeError(f"{differing} rankings still differ with every involved row exact")
            if with_margin:
                break
            with_margin = True  # every order is identical: now the margin
        exact_d[list(new_d)] = True
        exact_q[list(new_q)] = True
    return Selection(
        document_rows=np.flatnonzero(exact_d),
        query_rows=np.flatnonzero(exact_q),
        reference_top=ref.top,
        reference_own=ref.own,
        top=top,
        iterations=iterations,
        max_score_error=max_error,
        margin=margin,
    )


def _unstable(
    want: np.ndarray, got: np.ndarray, scores: np.ndarray, margin: float, exact_d: np.ndarray, exact_q: bool
) -> set[int]:
    """Snippets of one watched order that differ, or sit in an adjacent pair closer than ``margin`` (unless
    the query and both snippets are already exact: their scores are the float32 ones)."""
    rows = {int(r) for a, b in zip(want, got, strict=True) if a != b for r in (a, b)}
    gaps = scores[:-1] - scores[1:]
    for j in np.flatnonzero(gaps < margin):
        pair = (int(want[j]), int(want[j + 1]))
        if not (exact_q and exact_d[pair[0]] and exact_d[pair[1]]):
            rows |= set(pair)
    return rows


def _twins(docs: np.ndarray) -> dict[int, tuple[int, ...]]:
    """Rows by row, for rows whose float32 vectors are bit for bit equal to another's."""
    _, inverse, counts = np.unique(docs, axis=0, return_inverse=True, return_counts=True)
    out: dict[int, tuple[int, ...]] = {}
    for group in np.flatnonzero(counts > 1):
        members = tuple(int(r) for r in np.flatnonzero(inverse.ravel() == group))
        out.update({r: members for r in members})
    return out
