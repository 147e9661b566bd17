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
import json
import re
from pathlib import Path

import numpy as np
import pytest

from agentbench.execution import Job, ProcessExecutor
from agentbench.pools import load_pool, replicate_pool, write_pool
from agentbench.retrieval.embedders import DenseEmbedder
from agentbench.retrieval.search import open_searcher, tie_key
from agentbench.retrieval.tokens import tokenize_code

from . import test_retrieval
from .conftest import core_subset, run_cli
from .test_retrieval import _free_port, _one_line_error, cli

chroma_server = test_retrieval.chroma_server  # a `chroma run` server for this module

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
    full = 10_000 // n_core
    assert full >= 1 and len(pool10k.queries) > full * len(core.queries)  # full replicas and part of one more
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


# ---------------------------------------------------------------- --chroma-url against a real server


@pytest.fixture(scope="module")
def small_replicated(tmp_path_factory) -> Path:
    """Renamed replicas of 8 core tasks (100 snippets, 20 queries): near-duplicates, quick to embed."""
    root = tmp_path_factory.mktemp("small-replicated")
    src = load_pool(core_subset(8, root / "src"))
    path = root / "pool"
    write_pool(replicate_pool(src, 100, name="pool"), path)
    return path


def _retrieve(pool: Path, out: Path, env: dict, *extra: str) -> dict[str, dict]:
    args = ["retrieve", "--pool", str(pool), "--embedder", "minilm", "--embedder", "bm25"]
    proc = cli(*args, "--sandbox", "process", "--out", str(out), "--json", *extra, env=env)
    assert proc.returncode == 0, proc.stderr
    return {name: json.loads((out / f"{name}.json").read_text()) for name in ("minilm", "bm25")}


def _comparable(result: dict) -> dict:
    """Everything but timings and where the store lives."""
    info = {k: v for k, v in result["run_info"].items() if k not in ("timing", "store")}
    return {k: v for k, v in result.items() if k != "run_info"} | {"run_info": info}


def test_retrieve_against_a_chroma_server_equals_the_embedded_store(
    small_replicated, chroma_server, tmp_path: Path
) -> None:
    env = {"AGENTBENCH_CACHE_DIR": str(tmp_path / "cache")}
    embedded = _retrieve(small_replicated, tmp_path / "embedded", env, "--store-dir", str(tmp_path / "st"))
    served = _retrieve(small_replicated, tmp_path / "served", env, "--chroma-url", chroma_server)
    again = _retrieve(small_replicated, tmp_path / "again", env, "--chroma-url", chroma_server)
    assert embedded["minilm"]["run_info"]["store"] == "built" == served["minilm"]["run_info"]["store"]
    assert again["minilm"]["run_info"]["store"] == "reused"
    assert embedded["minilm"]["n_corpus"] == 100
    for name in ("minilm", "bm25"):  # ids, order, similarities (exactly), verdicts, metrics, intervals
        assert _comparable(served[name]) == _comparable(embedded[name])
        assert _comparable(again[name]) == _comparable(embedded[name])
    tops = [q["top_results"][0]["corpus_id"] for q in served["minilm"]["per_query"]]
    assert len(set(tops)) > 1 and served["minilm"]["metrics"]["exec@10"] > 0


def test_run_against_a_chroma_server_equals_the_embedded_store(
    small_replicated, chroma_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentbench.api import evaluate_config
    from agentbench.pipeline import RunConfig

    from .test_pipeline import _client, _stable

    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    common = dict(
        pool=str(small_replicated),
        llm="copycat/m",
        embedder="minilm",
        limit=4,
        sandbox="process",
        concurrency=2,
        conditions=["rag"],
    )
    records = {}
    for where, extra in (
        ("embedded", {"store_dir": str(tmp_path / "st")}),
        ("served", {"chroma_url": chroma_server}),
    ):
        client, _ = _client()
        config = RunConfig(**common, run_dir=str(tmp_path / where), **extra)
        records[where] = _stable(evaluate_config(config, client=client, show_progress=False).records)
    assert len(records["served"]) == 4
    assert records["served"] == records["embedded"]


def test_chroma_url_errors_are_one_line_exit_2(small_replicated, tmp_path: Path) -> None:
    # the default sandbox (Docker when it runs): the error comes before the sandbox starts or announces itself
    args = ["retrieve", "--pool", str(small_replicated), "--embedder", "minilm", "--out", str(tmp_path / "o")]
    env = {"AGENTBENCH_CACHE_DIR": str(tmp_path / "cache")}
    down = _one_line_error(cli(*args, "--chroma-url", f"http://127.0.0.1:{_free_port()}", env=env))
    assert "cannot reach the Chroma server" in down and "chroma run" in down
    bad = _one_line_error(cli(*args, "--chroma-url", "ftp://127.0.0.1:8000", env=env))
    assert "--chroma-url" in bad and "http(s)://host:port" in bad
    assert not (tmp_path / "o").exists()


def test_run_with_a_chroma_server_down_fails_before_the_run_directory(
    small_replicated, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentbench.api import evaluate_config
    from agentbench.errors import RetrievalError
    from agentbench.pipeline import RunConfig

    from .test_pipeline import _client

    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    client, handler = _client()
    url = f"http://127.0.0.1:{_free_port()}"
    config = RunConfig(
        pool=str(small_replicated), llm="copycat/m", embedder="minilm", limit=2, sandbox="process",
        run_dir=str(tmp_path / "run"), chroma_url=url,
    )  # fmt: skip
    with pytest.raises(RetrievalError, match="cannot reach the Chroma server"):
        evaluate_config(config, client=client, show_progress=False)
    assert not (tmp_path / "run").exists() and handler.calls == 0
