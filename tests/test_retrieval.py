"""Retrieval: embedder specs, BM25 tokenizer, exactness against brute force, store reuse/invalidation,
LangChain adapters, LiteLLM caching, and the `agentbench retrieve` CLI (errors, embedded store, server).

Uses the real minilm model and real Chroma. The minilm vectors go through the default embedding cache
(``$AGENTBENCH_CACHE_DIR`` or ``~/.cache/agentbench``), shared with CLI runs: the exactness test encodes
the core pool once (minutes on a slow CPU) and reads the cache afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from agentbench.errors import ConfigError
from agentbench.execution import ProcessExecutor
from agentbench.pipeline import RunConfig
from agentbench.pools import build_pool, load_pool, read_sources, write_pool
from agentbench.pools.io import CORE_POOL_DIR, CORE_SOURCES_DIR
from agentbench.retrieval import EmbedderSpec, EmbeddingCache, build_embedder, open_searcher, parse_embedder
from agentbench.retrieval.bm25 import split_identifier, tokenize_code
from agentbench.retrieval.embedders import MINILM_PACKAGE, SentenceTransformerEmbedder
from agentbench.retrieval.search import tie_key

from .conftest import ROOT, tiny_rows, write_rows

VENV_BIN = ROOT / ".venv" / "bin"
AGENTBENCH_BIN = (
    str(VENV_BIN / "agentbench") if (VENV_BIN / "agentbench").exists() else shutil.which("agentbench")
)
# the chroma CLI comes with the chromadb package, next to the interpreter running the tests
CHROMA_BIN = next(
    (str(b / "chroma") for b in (Path(sys.executable).parent, VENV_BIN) if (b / "chroma").exists()),
    shutil.which("chroma"),
)


def cli(
    *args: str, env: dict | None = None, unset: tuple = (), timeout: float = 900
) -> subprocess.CompletedProcess:
    """Run the installed console script, as a user would."""
    cmd = [AGENTBENCH_BIN, *args] if AGENTBENCH_BIN else [sys.executable, "-m", "agentbench", *args]
    full_env = {k: v for k, v in os.environ.items() if k not in unset} | (env or {})
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=full_env)


@pytest.fixture(scope="session")
def minilm():
    embedder = parse_embedder("minilm")
    assert isinstance(embedder, SentenceTransformerEmbedder)
    return embedder.use_cache(EmbeddingCache())


@pytest.fixture
def tiny(tmp_path: Path):
    return load_pool(write_rows(tmp_path / "tiny", tiny_rows()))


# ---------------------------------------------------------------- embedder specs


def test_unknown_embedder_lists_valid_forms() -> None:
    with pytest.raises(ConfigError) as err:
        parse_embedder("word2vec")
    message = str(err.value)
    assert "unknown embedder 'word2vec'" in message
    for form in ("minilm", "st:<name-or-path>", "bm25", "litellm:<model>"):
        assert form in message
    for bad in ("st:", "litellm:", ""):
        with pytest.raises(ConfigError):
            parse_embedder(bad)


def test_embedder_options() -> None:
    st = parse_embedder("st:some/model?query_prompt=query: &document_prompt=passage: &batch_size=8")
    assert isinstance(st, SentenceTransformerEmbedder)
    assert (st.query_prompt, st.document_prompt, st.batch_size) == ("query: ", "passage: ", 8)
    assert "query: " in st.config_key() and "some/model" in st.config_key()
    assert parse_embedder("st:some/model").config_key() != st.config_key()
    assert "k1=1.2" in parse_embedder("bm25?k1=1.2").config_key()
    assert MINILM_PACKAGE in parse_embedder("minilm").config_key()
    with pytest.raises(ConfigError, match="unknown option 'temperature'"):
        parse_embedder("bm25?temperature=2")
    with pytest.raises(ConfigError, match="must be int"):
        parse_embedder("litellm:text-embedding-3-small?batch_size=many")
    with pytest.raises(ConfigError, match="out of range"):
        parse_embedder("st:x?batch_size=0")


def test_embedder_spec_is_parsed_once_into_a_typed_value(tmp_path: Path) -> None:
    spec = EmbedderSpec.parse(" st:some/model?batch_size=8&trust_remote_code=yes ")
    assert (spec.kind, spec.model, spec.text) == (
        "st",
        "some/model",
        "st:some/model?batch_size=8&trust_remote_code=yes",
    )
    assert dict(spec.options) == {"batch_size": 8, "trust_remote_code": True} and not spec.sparse
    assert EmbedderSpec.parse(spec) is spec and str(spec) == spec.text
    assert (
        EmbedderSpec.parse("bm25?k1=1.2").sparse
        and EmbedderSpec.parse("litellm:openai/x").model == "openai/x"
    )
    built = build_embedder(spec)
    assert (
        isinstance(built, SentenceTransformerEmbedder) and built.name == spec.text and built.batch_size == 8
    )
    # a run configuration parses its --embedder when it is made: a bad one fails there, in one line
    assert RunConfig(embedder="bm25?b=0.5").embedder_spec == EmbedderSpec.parse("bm25?b=0.5")
    with pytest.raises(ConfigError, match="unknown embedder 'word2vec'") as err:
        RunConfig(embedder="word2vec", run_dir=str(tmp_path / "run"))
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="unknown option 'k3'"):
        RunConfig(embedder="bm25?k3=1")


def test_st_model_missing_offline_is_a_config_error(monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match="HF_HUB_OFFLINE"):
        parse_embedder("st:nobody/no-such-model-xyz").check()


def test_litellm_batches_retries_and_caches(monkeypatch, tmp_path: Path) -> None:
    litellm = pytest.importorskip("litellm")
    calls: list[dict] = []

    def fake_embedding(model, input, **kw):
        calls.append({"model": model, "input": list(input), **kw})
        return SimpleNamespace(
            data=[{"index": i, "embedding": [float(len(t)), 1.0]} for i, t in enumerate(input)]
        )

    monkeypatch.setattr(litellm, "embedding", fake_embedding)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    cache = EmbeddingCache(tmp_path / "vectors.sqlite")
    spec = "litellm:text-embedding-3-small?batch_size=2"
    first = parse_embedder(spec)
    first.check()
    vectors = first.use_cache(cache).embed_documents(["a", "bb", "ccc", "a", "dddd"])
    assert vectors[:, 0].tolist() == [1, 2, 3, 1, 4]
    assert [c["input"] for c in calls] == [["a", "bb"], ["ccc", "dddd"]]  # distinct texts, batches of 2
    assert calls[0]["num_retries"] >= 1
    again = parse_embedder(spec).use_cache(cache)
    assert again.embed_documents(["dddd", "a"])[:, 0].tolist() == [4, 1]
    assert again.embed_query("bb").shape == (2,)  # queries are cached separately
    assert len(calls) == 3


def test_litellm_missing_key_is_a_config_error(monkeypatch) -> None:
    pytest.importorskip("litellm")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        parse_embedder("litellm:text-embedding-3-small").check()


# ---------------------------------------------------------------- BM25


def test_code_tokenizer_splits_identifiers_and_keeps_operators() -> None:
    assert split_identifier("parse_HTTPResponse2") == ["parse", "http", "response2"]
    assert split_identifier("to_base64") == ["to", "base64"]
    tokens = tokenize_code("def isValid_ipv4(addr):\n    return len(parts) <= 4 and not x != y")
    assert tokens[:6] == ["def", "isvalid_ipv4", "is", "valid", "ipv4", "addr"]
    for tok in ("return", "<=", "and", "not", "!=", "4", "len", "parts"):
        assert tok in tokens
    assert "(" not in tokens and ":" not in tokens
    assert tokenize_code("x **= 2 // 3") == ["x", "**=", "2", "//", "3"]


def test_bm25_ranks_by_identifier_words_with_deterministic_ties(tmp_path: Path) -> None:
    rows = tiny_rows()
    rows["corpus.jsonl"].append(
        {
            "corpus_id": "c_0003",
            "code": "def reverse_words(s):\n    return ' '.join(s.split()[::-1])\n",
            "label": "correct",
        }
    )
    rows["queries.jsonl"].append(
        {
            "query_id": "q_0002",
            "query": "reverse the words of a sentence",
            "test_suite": ["assert reverse_words('a b') == 'b a'"],
            "correct_corpus_ids": ["c_0003"],
        }
    )
    pool = load_pool(write_rows(tmp_path / "p", rows))
    searcher = open_searcher(pool, parse_embedder("bm25"))
    assert searcher.search("reverse words", 1)[0].corpus_id == "c_0003"
    hits = searcher.search("add one", 3)
    # canonical and its operator-swapped bug score exactly the same; the hash of the id decides
    assert hits[0].score == hits[1].score > hits[2].score
    assert [h.corpus_id for h in hits[:2]] == sorted(["c_0001", "c_0002"], key=tie_key)
    assert all(s == 0 for s in searcher.score_all(["zzz unknown"])[0])


def test_texts_the_model_sees_as_one_input_get_one_vector(tmp_path: Path) -> None:
    """MiniLM's tokenizer drops what tells ``''.join`` from ``' '.join`` (humaneval has 24 such canonical
    and distractor pairs): they get one vector, whatever batches they fall in or the cache holds, so they
    tie exactly and the tie-break orders them on every machine (computed apart, on some CPUs they differed
    in the last bits and a diagnostic changed with the machine)."""
    same = ["def glue(xs):\n    return ''.join(xs)\n", "def glue(xs):\n    return ' '.join(xs)\n"]
    other = "def glue(xs):\n    return '-'.join(xs)\n"
    fillers = [f"def f{i}(x):\n    return x + {i} * (x - {i})\n" for i in range(5)]
    embedder = parse_embedder("minilm").use_cache(EmbeddingCache(tmp_path / "emb"))
    embedder.batch_size = 2  # the two land in different batches
    v = embedder.embed_documents([same[0], *fillers, same[1], other])
    assert np.array_equal(v[0], v[6]) and not np.allclose(v[0], v[7], atol=1e-3)
    assert embedder.encoded_texts == 7 and embedder.shared_texts == 1
    assert len(embedder.cache) == 8  # the shared vector is cached under both texts

    # one cached by an earlier run (in a batch of other lengths), the other new: it takes the cached vector
    first = parse_embedder("minilm").use_cache(EmbeddingCache(tmp_path / "emb2"))
    cached = first.embed_documents([same[0], fillers[0], fillers[1]])[0]
    later = parse_embedder("minilm").use_cache(EmbeddingCache(tmp_path / "emb2"))
    got = later.embed_documents([same[1], fillers[2], same[0]])
    assert later.encoded_texts == 1 and later.shared_texts == 1  # only the filler is computed
    assert np.array_equal(got[0], cached) and np.array_equal(got[2], cached)


# ---------------------------------------------------------------- exactness on the core pool


@pytest.fixture(scope="module")
def exact_pool(tmp_path_factory):
    """The core pool when generated; otherwise a pool built from a few core sources."""
    if (CORE_POOL_DIR / "queries.jsonl").exists():
        return load_pool("core")
    tasks = (
        read_sources(CORE_SOURCES_DIR / "geometry.toml")[:12]
        + read_sources(CORE_SOURCES_DIR / "validation.toml")[:12]
    )
    with ProcessExecutor(workers=2) as executor:
        pool, _ = build_pool(tasks, executor.run, name="mini-core")
    path = tmp_path_factory.mktemp("mini-core") / "pool"
    write_pool(pool, path)
    return load_pool(path)


@pytest.mark.slow
def test_chroma_top10_equals_bruteforce_cosine(exact_pool, minilm, tmp_path: Path) -> None:
    searcher = open_searcher(exact_pool, minilm, store_dir=tmp_path, progress=False)
    queries = [q.query for q in exact_pool.queries]
    ids = [s.corpus_id for s in exact_pool.corpus]
    got = searcher.search_many(queries, 10)

    docs = minilm.embed_documents([s.code for s in exact_pool.corpus]).astype(np.float64)
    qv = minilm.embed_queries(queries).astype(np.float64)
    sims = (qv / np.linalg.norm(qv, axis=1, keepdims=True)) @ (
        docs / np.linalg.norm(docs, axis=1, keepdims=True)
    ).T
    col = {cid: j for j, cid in enumerate(ids)}
    exact_lists = 0
    for i, row in enumerate(sims):
        expected = sorted(range(len(ids)), key=lambda j: (-row[j], tie_key(ids[j])))[:10]
        got_ids = [h.corpus_id for h in got[i]]
        if got_ids == [ids[j] for j in expected]:
            exact_lists += 1
        else:  # Chroma keeps float32 vectors (cosine space perturbs them by ~1 ulp): only near-equal scores may swap
            np.testing.assert_allclose(row[[col[c] for c in got_ids]], row[expected], rtol=0, atol=1e-6)
        np.testing.assert_allclose([h.score for h in got[i]], row[expected], rtol=0, atol=1e-6)
    assert exact_lists >= 0.95 * len(queries)


# ---------------------------------------------------------------- store cache and LangChain


def test_store_is_reused_and_rebuilt_when_pool_or_embedder_changes(tiny, minilm, tmp_path: Path) -> None:
    first = open_searcher(tiny, minilm, store_dir=tmp_path, progress=False)
    assert not first.reused and first.collection.count() == 2
    again = open_searcher(tiny, minilm, store_dir=tmp_path, progress=False)
    assert again.reused and again.collection_name == first.collection_name

    changed = tiny.model_copy(deep=True)
    changed.corpus[1].code += "# edited\n"
    rebuilt = open_searcher(changed, minilm, store_dir=tmp_path, progress=False)
    assert not rebuilt.reused and rebuilt.collection_name != first.collection_name
    names = {c.name for c in rebuilt.client.list_collections()}
    assert names == {rebuilt.collection_name}  # the stale collection of this pool was dropped

    prompted = SentenceTransformerEmbedder(
        "st:minilm-prompted", minilm.model_ref, query_prompt="query: ", identity="minilm-prompted"
    ).use_cache(minilm.cache)
    prompted._load = minilm._load  # type: ignore[method-assign]  # same weights: never load twice
    other = open_searcher(changed, prompted, store_dir=tmp_path, progress=False)
    assert not other.reused and other.collection_name not in names

    other.collection.delete(ids=["c_0001"])  # an interrupted build leaves fewer rows than snippets
    repaired = open_searcher(changed, prompted, store_dir=tmp_path, progress=False)
    assert not repaired.reused and repaired.collection.count() == 2


def test_langchain_retriever_and_vectorstore(tiny, minilm, tmp_path: Path) -> None:
    searcher = open_searcher(tiny, minilm, store_dir=tmp_path, progress=False)
    query = "add one to a number"
    docs = searcher.as_langchain(k=2).invoke(query)
    assert [d.metadata["corpus_id"] for d in docs] == [h.corpus_id for h in searcher.search(query, 2)]
    assert docs[0].page_content in {s.code for s in tiny.corpus}
    assert "label" not in docs[0].metadata and "bug_type" not in docs[0].metadata
    store = searcher.langchain_vectorstore()
    assert {d.metadata["corpus_id"] for d in store.similarity_search(query, k=2)} == {"c_0001", "c_0002"}


# ---------------------------------------------------------------- CLI


def _one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("agentbench: error: ")
    return lines[0]


def test_cli_unknown_embedder_is_one_line_exit_2(tmp_path: Path) -> None:
    line = _one_line_error(
        cli("retrieve", "--pool", "core", "--embedder", "word2vec", "--out", str(tmp_path))
    )
    assert "unknown embedder 'word2vec'" in line and "bm25" in line


@pytest.mark.parametrize("ref", ["/no/such/model", "./relative/missing", "bad name!!", "a/b/c"])
def test_cli_st_model_that_is_neither_a_directory_nor_a_hub_name_is_one_line_exit_2(
    tmp_path: Path, ref: str
) -> None:
    line = _one_line_error(
        cli("retrieve", "--pool", "core", "--embedder", f"st:{ref}", "--out", str(tmp_path))
    )
    assert f"{ref!r}" in line and "no such directory" in line


def test_cli_st_model_not_cached_offline_is_one_line_exit_2(tmp_path: Path) -> None:
    proc = cli(
        "retrieve", "--pool", "core", "--embedder", "st:nobody/no-such-model-xyz", env={"HF_HUB_OFFLINE": "1"}
    )
    assert "HF_HUB_OFFLINE" in _one_line_error(proc)


def test_cli_missing_api_key_fails_before_any_work(tmp_path: Path) -> None:
    env = {"AGENTBENCH_CACHE_DIR": str(tmp_path / "cache")}
    args = ["retrieve", "--pool", str(tmp_path / "absent"), "--embedder", "litellm:text-embedding-3-small"]
    proc = cli(*args, env=env, unset=("OPENAI_API_KEY",))
    line = _one_line_error(proc)  # the key is checked before the (missing) pool is even read
    assert "OPENAI_API_KEY" in line
    assert not (tmp_path / "cache").exists()


def test_cli_bm25_table_and_results_file(tiny, tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {"AGENTBENCH_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "160"}
    proc = cli(
        "retrieve",
        "--pool",
        tiny.path,
        "--embedder",
        "bm25",
        "--out",
        str(out),
        "--sandbox",
        "process",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    for word in ("exec@1", "exec@10", "MRR", "rank-1 failures", "bm25"):
        assert word in proc.stdout
    result = json.loads((out / "bm25.json").read_text())
    assert set(result) >= {
        "model",
        "n_queries",
        "n_corpus",
        "ks",
        "metrics",
        "per_query",
        "diagnostics",
        "ci95",
    }
    top = result["per_query"][0]["top_results"][0]
    assert set(top) == {
        "rank",
        "corpus_id",
        "label",
        "bug_type",
        "similarity",
        "passes_all_tests",
        "test_results",
    }


def test_chroma_url_forms() -> None:
    from agentbench.retrieval.store import parse_chroma_url

    assert parse_chroma_url("localhost:8000") == ("localhost", 8000, False)
    assert parse_chroma_url("https://chroma.example") == ("chroma.example", 443, True)
    for bad in ("ftp://host", "http://:9", "http://host:port"):
        with pytest.raises(ConfigError, match="chroma-url"):
            parse_chroma_url(bad)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory):
    if not CHROMA_BIN:
        if os.environ.get("CI"):
            pytest.fail("the chroma CLI (from the chromadb package) is required in CI")
        pytest.skip("the chroma CLI is not installed")
    root = tmp_path_factory.mktemp("chroma-server")
    port = _free_port()
    log = open(root / "server.log", "wb")
    proc = subprocess.Popen(
        [CHROMA_BIN, "run", "--path", str(root / "data"), "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://localhost:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"chroma run did not start: {(root / 'server.log').read_text()[-500:]}")
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_cli_two_embedders_against_a_chroma_server(tiny, chroma_server, tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {"AGENTBENCH_CACHE_DIR": str(tmp_path / "cache")}
    args = ["retrieve", "--pool", tiny.path, "--embedder", "minilm", "--embedder", "bm25", "--out", str(out)]
    proc = cli(*args, "--chroma-url", chroma_server, "--sandbox", "process", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert [r["model"] for r in summary["results"]] == ["minilm", "bm25"]
    minilm_result = json.loads((out / "minilm.json").read_text())
    assert minilm_result["metrics"]["exec@10"] == 1.0  # both snippets retrieved; the canonical passes
    assert minilm_result["run_info"]["store"] == "built"
    assert (out / "bm25.json").exists()

    import chromadb
    from chromadb.config import Settings

    port = int(chroma_server.rsplit(":", 1)[1])
    client = chromadb.HttpClient(host="localhost", port=port, settings=Settings(anonymized_telemetry=False))
    assert minilm_result["run_info"]["collection"] in {c.name for c in client.list_collections()}

    bad = cli(*args, "--chroma-url", f"http://localhost:{_free_port()}", "--sandbox", "process", env=env)
    assert "cannot reach the Chroma server" in _one_line_error(bad)


# ---------------------------------------------------------------- package surface


def test_public_names_resolve_and_import_is_light() -> None:
    import agentbench.retrieval as retrieval

    for name in retrieval.__all__:
        assert getattr(retrieval, name) is not None
    code = (
        "import sys, agentbench.cli, agentbench.retrieval\n"
        "heavy = [m for m in ('torch', 'sentence_transformers', 'chromadb', 'litellm', 'langchain_core', 'numpy')"
        " if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "torch" not in proc.stdout and "chromadb" not in proc.stdout and "litellm" not in proc.stdout
