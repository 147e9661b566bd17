"""Vectors shipped for the bundled pools (issue 33 item 1, :mod:`agentbench.retrieval.bundled`).

- the shipped files cover every snippet and query of the current bundled pools (a pool edited without
  regenerating fails here, naming the command);
- they are used only for a bundled pool and the default embedder's model, and then the model never runs;
- a corrupt file is ignored with one warning and everything is embedded;
- exec@k, every results-file row and every query's full ranking over the corpus are identical with the
  shipped vectors and with vectors computed now: all of humaneval and a seeded sample of core queries
  with their own snippets (the full core, 5,012 snippets, takes minutes to embed: bench/bundled_vectors.py
  --rankings checks it).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from agentbench.execution import ProcessExecutor
from agentbench.execution.cache import ExecCache
from agentbench.pools import load_pool
from agentbench.retrieval import EmbeddingCache, bundled, evaluate_retrieval, open_searcher, parse_embedder
from agentbench.retrieval.bundled.build import problems
from agentbench.retrieval.embedders import minilm
from agentbench.retrieval.settings import RetrievalSettings


@pytest.fixture
def fresh_bundled_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """No file read or warning remembered from an earlier test."""
    monkeypatch.setattr(bundled, "_LOADED", {})
    monkeypatch.setattr(bundled, "_WARNED", set())


@pytest.mark.parametrize("name", sorted(bundled.SHIPPED_POOLS))
def test_shipped_vectors_cover_every_snippet_and_query_of_the_bundled_pools(name: str) -> None:
    found = problems(name)
    assert not found, "\n".join(found)


def test_an_edited_pool_is_reported_with_the_regeneration_command() -> None:
    pool = load_pool("humaneval")
    edited = pool.model_copy(deep=True)
    edited.corpus[0].code += "# edited\n"
    edited.queries[0].query += " (edited)"
    found = problems("humaneval", edited)
    assert len(found) == 2 and all(bundled.REGENERATE in line for line in found), found
    assert "1 of 623 snippets" in found[0] and "1 of 164 queries" in found[1]


def test_shipped_vectors_serve_a_bundled_pool_without_running_the_model(tmp_path: Path) -> None:
    pool = load_pool("humaneval")
    small = pool.only(pool.queries[:3])  # --limit keeps the pool's directory: still served
    embedder = minilm().use_cache(EmbeddingCache(tmp_path / "emb"))
    searcher = open_searcher(small, embedder, store_dir=tmp_path / "stores", progress=False)
    hits = searcher.search_many([q.query for q in small.queries], 3)
    assert embedder.shipped is not None and embedder.shipped.meta["model_sha256"] == bundled.model_sha256(
        embedder.model_ref
    )
    assert embedder.encoded_texts == 0 and embedder._model is None  # never loaded
    assert len(embedder.cache) == 0  # shipped vectors are not copied into the cache
    assert [h.corpus_id for h in hits[0]][0] in small.queries[0].correct_corpus_ids + [
        s.corpus_id for s in small.corpus
    ]


def test_other_pools_and_embedders_are_not_served(tmp_path: Path) -> None:
    pool = load_pool("humaneval")
    assert bundled.for_pool(pool, minilm()) is not None
    moved = pool.model_copy(update={"path": str(tmp_path / "copy")})
    assert bundled.for_pool(moved, minilm()) is None  # another pool, even with the same texts
    prompted = parse_embedder(f"st:{minilm().model_ref}?query_prompt=query: ")
    assert bundled.for_pool(pool, prompted) is None  # prompts change the vectors
    assert bundled.for_pool(pool, parse_embedder("bm25")) is None
    same_model = parse_embedder(f"st:{minilm().model_ref}")
    assert bundled.for_pool(pool, same_model) is not None  # the same model files, by their sha256


def test_a_plug_in_given_only_the_corpus_is_served_by_text(tmp_path: Path) -> None:
    """for_embedder: what examples/hybrid.py uses; every bundled pool's rows, matched by text."""
    humaneval = load_pool("humaneval")
    embedder = minilm().use_cache(EmbeddingCache(tmp_path / "emb"))
    embedder.use_shipped(bundled.for_embedder(embedder))
    texts = [humaneval.corpus[0].code, humaneval.corpus[1].code]
    vectors = embedder.embed_documents(texts)
    assert embedder.encoded_texts == 0 and embedder._model is None  # both served, the model never loaded
    for text, vector in zip(texts, vectors, strict=True):
        own = bundled.for_pool(humaneval, embedder).get_many("document", [text])[0]
        assert np.array_equal(np.asarray(vector, dtype=np.float32), own)
    core = load_pool("core")  # core's vectors do not ship (over the repository's file size limit)
    assert bundled.for_pool(core, embedder) is None
    assert not bundled.for_embedder(embedder).get_many("document", [core.corpus[0].code])
    assert not bundled.for_embedder(embedder).get_many("document", ["def f():\n    return 1\n"])  # embedded
    prompted = parse_embedder(f"st:{minilm().model_ref}?query_prompt=query: ")
    assert bundled.for_embedder(prompted) is None and bundled.for_embedder(parse_embedder("bm25")) is None


def _corrupt_bytes(src: Path, dst: Path) -> None:
    data = bytearray(src.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    dst.write_bytes(bytes(data))


def _altered_vectors(src: Path, dst: Path) -> None:
    """A well-formed file whose vectors no longer match the checksum recorded in it."""
    with np.load(src, allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files}
    arrays["vectors"] = arrays["vectors"].copy()
    arrays["vectors"][0] *= -1
    np.savez(dst, **arrays)


@pytest.mark.parametrize("corrupt", [_corrupt_bytes, _altered_vectors], ids=["bytes", "checksum"])
def test_a_corrupt_file_is_ignored_with_one_warning_and_everything_is_embedded(
    corrupt,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    fresh_bundled_state,
) -> None:
    shipped = tmp_path / "bundled"
    shipped.mkdir()
    corrupt(bundled.shipped_path("humaneval"), shipped / "humaneval.npz")
    monkeypatch.setattr(bundled, "BUNDLED_DIR", shipped)
    pool = load_pool("humaneval")
    small = pool.only(pool.queries[:2])
    caplog.set_level(logging.WARNING, logger="agentbench")
    embedder = minilm().use_cache(EmbeddingCache(tmp_path / "emb"))
    assert bundled.for_pool(pool, embedder) is None
    searcher = open_searcher(small, embedder, store_dir=tmp_path / "stores", progress=False)
    searcher.search_many([q.query for q in small.queries], 3)
    assert embedder.shipped is None
    assert embedder.encoded_texts == len(small.corpus) + len(small.queries)  # all computed, none shipped
    assert len(embedder.cache) == embedder.encoded_texts  # and the cache works as without shipped vectors
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "corrupt" in warnings[0].getMessage() and bundled.REGENERATE in warnings[0].getMessage()


# ------------------------------------------------------------------ identity with fresh vectors


def _pools() -> dict[str, object]:
    return {"humaneval": load_pool("humaneval")}


@pytest.fixture(scope="module")
def both_ways(tmp_path_factory) -> dict[str, dict]:
    """Per pool, the retrieval results and every query's full ranking with the shipped vectors and with
    vectors computed now (the same pool under another directory, so nothing is shipped; empty caches)."""
    tmp = tmp_path_factory.mktemp("bundled")
    out: dict[str, dict] = {}
    with ProcessExecutor(workers=2) as executor, ExecCache() as exec_cache:
        for name, pool in _pools().items():
            elsewhere = pool.model_copy(update={"path": str(tmp / name / "copy")})
            runs = {}
            for way, p in (("shipped", pool), ("fresh", elsewhere)):
                embedder = minilm().use_cache(EmbeddingCache(tmp / name / way / "emb"))
                settings = RetrievalSettings(store_dir=str(tmp / name / way / "stores"))
                result = evaluate_retrieval(
                    p, embedder, executor, settings, exec_cache=exec_cache, progress=False
                )
                searcher = open_searcher(p, embedder, store_dir=settings.store_dir, progress=False)
                full = searcher.search_many([q.query for q in p.queries], len(p.corpus))
                runs[way] = {"result": result, "full": full, "encoded": embedder.encoded_texts}
            runs["n_texts"] = len(pool.corpus) + len(pool.queries)
            out[name] = runs
    return out


def _without_scores(rows: list[dict]) -> tuple[list[dict], list[float]]:
    """Results-file rows with their similarities taken out, and the similarities."""
    scores = [r["similarity"] for q in rows for r in q["top_results"]]
    bare = [q | {"top_results": [r | {"similarity": None} for r in q["top_results"]]} for q in rows]
    return bare, scores


@pytest.mark.slow
@pytest.mark.parametrize("name", ["humaneval"])
def test_exec_at_k_and_every_ranking_are_identical_with_shipped_and_fresh_vectors(
    both_ways, name: str
) -> None:
    """humaneval is embedded fresh exactly as the shipped file was (the whole pool, the same batches), so
    even the similarities are bit for bit the same."""
    runs = both_ways[name]
    shipped, fresh = runs["shipped"], runs["fresh"]
    assert shipped["encoded"] == 0 and fresh["encoded"] == runs["n_texts"]  # really one of each
    a, b = shipped["result"].to_json_dict(), fresh["result"].to_json_dict()
    for key in ("metrics", "ci95", "diagnostics", "n_queries", "n_corpus"):
        assert a[key] == b[key], key  # exec@k and every other metric, intervals, diagnostics
    (rows_a, sim_a), (rows_b, sim_b) = _without_scores(a["per_query"]), _without_scores(b["per_query"])
    assert rows_a == rows_b  # every top-10 row: ids, order, labels, verdicts
    exact = name == "humaneval"
    np.testing.assert_allclose(sim_a, sim_b, rtol=0, atol=0 if exact else 1e-6)
    for q_shipped, q_fresh in zip(shipped["full"], fresh["full"], strict=True):
        assert len(q_shipped) == a["n_corpus"]
        assert [h.corpus_id for h in q_shipped] == [h.corpus_id for h in q_fresh]  # the full ranking
        scores = [h.score for h in q_shipped], [h.score for h in q_fresh]
        np.testing.assert_allclose(*scores, rtol=0, atol=0 if exact else 1e-6)
