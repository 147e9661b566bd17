"""Large pools for scaling tests: a pool replicated with its function names renamed.

Why renamed: a pool of exact copies would index duplicate documents and every query would have twenty
indistinguishable answers. Replica ``r`` renames each query's function ``f`` to ``f_<word>`` (a word per
replica, e.g. ``popcount32_harbor``) in the code, the asserts, the test setup, the spec and the mutated
lines of the distractor metadata, so a replica's snippets pass and fail exactly the asserts the originals do
(the rename is the same whole-word substitution everywhere, strings included). The query text gets the
renamed function in backticks appended, as a developer searching a code base would write it; without it a
query could not tell its own replica from the others. The replicas are near-duplicates of one another, which
is what makes them a hard test for approximate vector search.

A pool of exactly ``n_snippets`` is made by cycling replicas query group by query group (a canonical with
its distractors); the last group is cut to fit. Replica ``r`` is the same whatever ``n_snippets`` is, so a
10k pool is a prefix of the 100k one.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from ..errors import PoolError
from .models import DistractorMeta, Pool, Query, Snippet

__all__ = ["replicate_pool", "replica_word", "REPLICA_WORDS"]

REPLICA_WORDS = (
    "harbor", "ledger", "falcon", "meadow", "copper", "lantern", "glacier", "orchard",
    "compass", "thistle", "beacon", "canyon", "willow", "quarry", "saffron", "tundra",
    "pebble", "summit", "marble", "juniper", "anchor", "prairie", "ember", "cobalt",
    "harvest", "lagoon", "timber", "vertex", "mosaic", "nectar", "raven", "sierra",
)  # fmt: skip


def replica_word(r: int) -> str:
    """``harbor``, ``ledger``, ... then ``harbor_ledger`` and so on: distinct for every ``r >= 0``."""
    n = len(REPLICA_WORDS)
    parts = [REPLICA_WORDS[r % n]]
    r //= n
    while r:
        r -= 1
        parts.append(REPLICA_WORDS[r % n])
        r //= n
    return "_".join(parts)


def _function_name(query: Query, canonical: Snippet) -> str:
    meta = query.metadata if isinstance(query.metadata, dict) else {}
    name = meta.get("function_name")
    if name:
        return str(name)
    try:
        tree = ast.parse(canonical.code)
    except SyntaxError as exc:
        raise PoolError(f"canonical {canonical.corpus_id} of {query.query_id} does not parse") from exc
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return node.name
    raise PoolError(f"{query.query_id}: no metadata.function_name and no top-level def in its canonical")


class _Renamer:
    def __init__(self, old: str, new: str) -> None:
        self.pattern = re.compile(rf"(?<![\w]){re.escape(old)}(?![\w])")
        self.new = new

    def __call__(self, text: str) -> str:
        return self.pattern.sub(self.new, text)


def _groups(pool: Pool) -> list[tuple[Query, list[Snippet], dict[str, DistractorMeta]]]:
    meta_of = pool.distractor_meta()
    groups = []
    for q in pool.queries:
        ids = list(dict.fromkeys(q.correct_corpus_ids + q.paired_distractor_corpus_ids))
        try:
            snippets = [pool.snippet(cid) for cid in ids]
        except KeyError as exc:
            raise PoolError(f"{q.query_id} references unknown corpus_id {exc.args[0]!r}") from exc
        groups.append((q, snippets, {cid: meta_of[cid] for cid in ids if cid in meta_of}))
    return groups


def _replica(
    r: int, query: Query, snippets: list[Snippet], metas: dict[str, DistractorMeta], room: int
) -> tuple[Query, list[Snippet], list[DistractorMeta]]:
    """Replica ``r`` of one query group, keeping at most ``room`` snippets (canonicals first)."""
    word = replica_word(r)
    old = _function_name(query, snippets[0])
    new = f"{old}_{word}"
    rename = _Renamer(old, new)
    new_id = {s.corpus_id: f"{s.corpus_id}-{word}" for s in snippets}
    canon = [c for c in query.correct_corpus_ids if c in new_id]
    paired = [c for c in query.paired_distractor_corpus_ids if c in new_id]
    keep = set((canon + paired)[:room])
    meta = dict(query.metadata) if isinstance(query.metadata, dict) else {"source_metadata": query.metadata}
    meta |= {"function_name": new, "replica": r, "replica_of": query.query_id}
    q = query.model_copy(
        update={
            "query_id": f"{query.query_id}-{word}",
            "query": f"{query.query} (`{new}`)",
            "test_suite": [rename(t) for t in query.test_suite],
            "test_setup": rename(query.test_setup) if query.test_setup else query.test_setup,
            "spec": rename(query.spec) if query.spec else query.spec,
            "correct_corpus_ids": [new_id[c] for c in canon if c in keep],
            "paired_distractor_corpus_ids": [new_id[c] for c in paired if c in keep],
            "entry_id": f"{query.entry_id}#{word}",
            "metadata": meta,
        }
    )
    corpus = [
        s.model_copy(
            update={
                "corpus_id": new_id[s.corpus_id],
                "code": rename(s.code),
                "source_entry_id": f"{s.source_entry_id}#{word}",
            }
        )
        for s in snippets
        if s.corpus_id in keep
    ]
    distractors = [
        d.model_copy(
            update={
                "corpus_id": new_id[cid],
                "query_id": q.query_id,
                "canonical_corpus_id": new_id.get(d.canonical_corpus_id, d.canonical_corpus_id),
                "line_before": rename(d.line_before),
                "line_after": rename(d.line_after),
            }
        )
        for cid, d in metas.items()
        if cid in keep
    ]
    return q, corpus, distractors


def _cycle(groups: list) -> Iterator[tuple[int, tuple]]:
    r = 0
    while True:
        for group in groups:
            yield r, group
        r += 1


def replicate_pool(pool: Pool, n_snippets: int, *, name: str | None = None) -> Pool:
    """A pool of exactly ``n_snippets`` snippets made of renamed replicas of ``pool`` (module docstring)."""
    if n_snippets < 1:
        raise PoolError(f"--snippets must be at least 1, got {n_snippets}")
    groups = _groups(pool)
    if not groups:
        raise PoolError(f"pool {pool.name} has no queries to replicate")
    queries: list[Query] = []
    corpus: list[Snippet] = []
    distractors: list[DistractorMeta] = []
    for r, (query, snippets, metas) in _cycle(groups):
        room = n_snippets - len(corpus)
        if room <= 0:
            break
        q, c, d = _replica(r, query, snippets, metas, room)
        queries.append(q)
        corpus.extend(c)
        distractors.extend(d)
    codes = {s.code for s in corpus}
    if len(codes) != len(corpus):
        raise PoolError(
            f"replicating {pool.name} gave {len(corpus) - len(codes)} duplicate snippet(s): the source pool "
            "has identical snippets or function names that the renaming cannot tell apart"
        )
    return Pool(
        name=name or f"{pool.name}-x{n_snippets}",
        path="",
        queries=queries,
        corpus=corpus,
        distractors=distractors,
    )
