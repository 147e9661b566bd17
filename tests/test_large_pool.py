"""Large pools: `pool replicate` (renamed replicas that stay valid and execute like the originals), exact
dense ranking on a 10k-snippet replicated pool full of near-duplicates, and `--chroma-url` against a real
`chroma run` server giving exactly the embedded store's results (retrieve and run).

The 10k exactness test embeds with a token-hashing embedder defined here, not MiniLM: MiniLM needs ~15
minutes for 10k snippets on a 2-core machine, and the property under test is the store's ranking, which
only sees vectors. Hashed token counts make the renamed replicas near-duplicates (they differ in one token)
and produce many exact ties, the hardest case for approximate search and for tie order. MiniLM's exactness
is tested on the core pool in test_retrieval.py and on a replicated pool against the server below.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np
import pytest

from agentbench.execution import Job, ProcessExecutor
from agentbench.pools import load_pool, replicate_pool, write_pool
from agentbench.retrieval.embedders import DenseEmbedder
from agentbench.retrieval.search import open_searcher, tie_key
from agentbench.retrieval.tokens import tokenize_code

from .conftest import core_subset, run_cli
from .test_retrieval import _free_port, _one_line_error, chroma_server, cli  # noqa: F401 - fixture

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


class HashedTokens(DenseEmbedder):
    """Signed counts of code tokens hashed into 256 dimensions (deterministic, no model)."""

    def __init__(self) -> None:
        super().__init__("hashed-tokens")

    def config_key(self) -> str:
        return "test:hashed-tokens-256-v1"

    def _encode(self, texts: list[str], kind: str) -> np.ndarray:
        out = np.zeros((len(texts), 256), dtype=np.float32)
        for i, text in enumerate(texts):
            for tok in tokenize_code(text):
                h = int.from_bytes(hashlib.blake2b(tok.encode(), digest_size=8).digest(), "little")
                out[i, h % 256] += 1.0 if (h >> 32) & 1 else -1.0
        return out


@pytest.fixture(scope="module")
def core():
    return load_pool("core")


@pytest.fixture(scope="module")
def pool10k(core, tmp_path_factory):
    path = tmp_path_factory.mktemp("large") / "pool-10k"
    write_pool(replicate_pool(core, 10_000, name="pool-10k"), path)
    return load_pool(path)


# ---------------------------------------------------------------- replication


def test_replicate_gives_exact_size_unique_renamed_snippets(core, pool10k) -> None:
    assert len(pool10k.corpus) == 10_000
    assert len({s.code for s in pool10k.corpus}) == 10_000
    assert len({s.corpus_id for s in pool10k.corpus}) == 10_000
    n_core = len(core.corpus)
    assert len(pool10k.queries) > 2 * len(core.queries)  # two full replicas and part of a third
    by_id = {q.query_id: q for q in core.queries}
    for q in pool10k.queries[:: len(pool10k.queries) // 50]:
        source = by_id[q.metadata["replica_of"]]
        old, new = source.metadata["function_name"], q.metadata["function_name"]
        assert new != old and new.startswith(old + "_")
        assert q.query.startswith(source.query) and f"`{new}`" in q.query
        assert len(q.test_suite) == len(source.test_suite)
        for test in q.test_suite:
            assert not re.search(rf"\b{re.escape(old)}\b", test)
        for cid in q.correct_corpus_ids + q.paired_distractor_corpus_ids:
            code = pool10k.snippet(cid).code
            assert f"def {new}(" in code and not re.search(rf"\b{re.escape(old)}\b", code)
    # the last query group is cut to fit, keeping its canonical
    last = pool10k.queries[-1]
    assert (
        last.correct_corpus_ids
        and sum(len(q.correct_corpus_ids) for q in pool10k.queries)
        + sum(len(q.paired_distractor_corpus_ids) for q in pool10k.queries)
        == 10_000
        <= 3 * n_core
    )
    # metadata rows follow their snippets
    meta = pool10k.distractor_meta()
    for q in pool10k.queries[:200]:
        for cid in q.paired_distractor_corpus_ids:
            assert meta[cid].query_id == q.query_id and meta[cid].canonical_corpus_id in q.correct_corpus_ids
    # a replica does not depend on the requested size
    small = replicate_pool(core, 6_000)
    assert [s.code for s in small.corpus] == [s.code for s in pool10k.corpus[:6_000]]


def test_replica_snippets_pass_and_fail_exactly_the_asserts_their_originals_do(core, pool10k) -> None:
    by_id = {q.query_id: q for q in core.queries}
    replicas = [q for q in pool10k.queries if q.metadata["replica"] == 1][::40]
    jobs_orig, jobs_rep = [], []
    for q in replicas:
        source = by_id[q.metadata["replica_of"]]
        for cid in q.correct_corpus_ids + q.paired_distractor_corpus_ids:
            original = core.snippet(cid.rsplit("-", 1)[0])
            jobs_orig.append(Job(original.code, tuple(source.test_suite), 10, source.test_setup or ""))
            jobs_rep.append(Job(pool10k.snippet(cid).code, tuple(q.test_suite), 10, q.test_setup or ""))
    with ProcessExecutor(workers=2) as executor:
        got_orig = executor.run(jobs_orig)
        got_rep = executor.run(jobs_rep)
    assert len(jobs_rep) >= 100
    assert not any(r.infra_error for r in got_orig + got_rep)
    assert [r.results for r in got_rep] == [r.results for r in got_orig]
    assert any(r.passed for r in got_rep) and any(not r.passed for r in got_rep)


def test_pool_replicate_cli_writes_a_pool_that_validates(tmp_path: Path) -> None:
    src = core_subset(12, tmp_path / "src")
    out = tmp_path / "big"
    proc = run_cli("pool", "replicate", str(src), "--snippets", "150", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "150 snippets" in proc.stdout
    ok = run_cli("pool", "validate", str(out))
    assert ok.returncode == 0, ok.stderr
    assert "150 snippets" in ok.stdout
    assert len((out / "corpus.jsonl").read_text().splitlines()) == 150


def test_pool_replicate_missing_pool_is_one_line_exit_2(tmp_path: Path) -> None:
    line = _one_line_error(
        cli("pool", "replicate", str(tmp_path / "nope"), "--snippets", "10", "--out", str(tmp_path / "o"))
    )
    assert "not found" in line
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------- exact ranking at 10k


@pytest.mark.slow
def test_dense_store_ranking_is_exact_on_a_10k_replicated_pool(pool10k, tmp_path: Path) -> None:
    embedder = HashedTokens()
    searcher = open_searcher(pool10k, embedder, store_dir=tmp_path, progress=False)
    assert searcher.collection.count() == 10_000
    # every fourth query: each task's answers have renamed near-duplicates in the other replicas
    queries = [q.query for q in pool10k.queries[::4]]
    got = searcher.search_many(queries, 10)

    ids = [s.corpus_id for s in pool10k.corpus]
    qv = embedder.embed_queries(queries).astype(np.float64)
    qv /= np.linalg.norm(qv, axis=1, keepdims=True)

    def unit(m: np.ndarray) -> np.ndarray:
        m = m.astype(np.float64)
        return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-300)

    # Chroma keeps unit-length float32 copies: the ranking is exact on those, and on the embedder's own
    # vectors up to that rounding (scores within 1e-6 may swap)
    got_stored = searcher.collection.get(ids=ids, include=["embeddings"])
    stored = unit(np.asarray(got_stored["embeddings"]))[[got_stored["ids"].index(c) for c in ids]]
    raw = unit(embedder.embed_documents([s.code for s in pool10k.corpus]))
    keys = np.array([tie_key(c) for c in ids])
    tied_rank1 = 0
    for i, (row, raw_row) in enumerate(zip(qv @ stored.T, qv @ raw.T, strict=True)):
        expected = np.lexsort((keys, -row))[:10]
        got_ids = [h.corpus_id for h in got[i]]
        assert got_ids == [ids[j] for j in expected], queries[i]
        np.testing.assert_allclose([h.score for h in got[i]], row[expected], rtol=0, atol=1e-12)
        raw_expected = np.lexsort((keys, -raw_row))[:10]
        np.testing.assert_allclose(raw_row[[ids.index(c) for c in got_ids]], raw_row[raw_expected], atol=1e-6)
        tied_rank1 += bool(np.isclose(raw_row[raw_expected[0]], raw_row[raw_expected[1]], rtol=0, atol=1e-9))
    assert len(queries) >= 500
    assert tied_rank1 > 0  # near-duplicates tie at rank 1: the test exercises tie order too
