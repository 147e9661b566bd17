"""ExecRetrieval metrics: pure functions, and a tiny pool scored end to end against hand-computed values.

The tiny pool goes through the real Chroma store and the real process sandbox, with hand-set vectors so
every cosine (and so every rank) is known: it covers exact ties, a rank-1 that is another query's
canonical (fails this query's tests: a miss), a snippet from another query that passes (a hit, whatever
its label), a query without paired distractors, and k = 10 on a pool of 5 snippets.
"""

from __future__ import annotations

import hashlib
import json
from math import log2
from pathlib import Path

import numpy as np
import pytest

from agentbench.execution import ProcessExecutor
from agentbench.execution.cache import ExecCache
from agentbench.pools import load_pool
from agentbench.retrieval import EmbeddingCache, evaluate_retrieval
from agentbench.retrieval.embedders import DenseEmbedder
from agentbench.retrieval.metrics import (
    QueryRecord,
    Ranked,
    aggregate,
    bootstrap_ci,
    confidence_intervals,
    diagnostics,
    exec_at_k,
    ndcg_at_k,
    per_query_metrics,
    precision_at_k,
    reciprocal_rank,
)
from agentbench.retrieval.search import tie_key
from agentbench.retrieval.settings import RetrievalSettings

# ---------------------------------------------------------------- pure functions


def test_exec_precision_mrr() -> None:
    passes = [False, False, True, True, False]
    assert [exec_at_k(passes, k) for k in (1, 2, 3, 10)] == [0.0, 0.0, 1.0, 1.0]
    assert precision_at_k(passes, 3) == pytest.approx(1 / 3)
    assert precision_at_k(passes, 10) == pytest.approx(2 / 10)  # k beyond the list still divides by k
    assert reciprocal_rank(passes) == pytest.approx(1 / 3)
    assert reciprocal_rank([False, False]) == 0.0
    assert exec_at_k([], 5) == 0.0


def test_ndcg_binary_relevance() -> None:
    assert ndcg_at_k([True], 1, 1) == 1.0
    assert ndcg_at_k([False, True], 3, 1) == pytest.approx(1 / log2(3))
    # two relevant snippets, found at ranks 3 and 4
    passes = [False, False, True, True]
    assert ndcg_at_k(passes, 3, 2) == pytest.approx((1 / 2) / (1 + 1 / log2(3)))
    assert ndcg_at_k(passes, 10, 2) == pytest.approx((1 / 2 + 1 / log2(5)) / (1 + 1 / log2(3)))
    assert ndcg_at_k([False, False], 10, 0) == 0.0


def _item(
    cid: str, passes: bool, relation: str = "other", bug: str = "", label: str = "incorrect", score=0.5
):
    return Ranked(cid, passes, label, bug, relation, score)  # type: ignore[arg-type]


def test_gap_and_aggregate_are_unweighted_means() -> None:
    a = QueryRecord("q1", "d1", (_item("c1", True, "canonical", label="correct"),), 1)
    b = QueryRecord("q2", "d2", (_item("c2", False, "paired", "off_by_one"), _item("c3", True)), 1)
    per_b = per_query_metrics(b, (1, 3))
    assert per_b["exec@3"] == 1.0
    assert per_b["ndcg@3"] == pytest.approx(1 / log2(3))
    assert per_b["exec_ndcg_gap@3"] == pytest.approx(1 - 1 / log2(3))
    agg = aggregate([a, b], (1, 3))
    assert agg["exec@1"] == 0.5
    assert agg["mrr"] == pytest.approx((1 + 1 / 2) / 2)
    assert agg["exec_ndcg_gap@3"] == pytest.approx(agg["exec@3"] - agg["ndcg@3"])


def test_diagnostics_classify_rank1_failures() -> None:
    records = [
        QueryRecord("q1", "geo", (_item("c2", False, "paired", "off_by_one", score=0.9),), 1, True),
        QueryRecord(
            "q2", "geo", (_item("c7", False, "other", "", "correct", 0.8), _item("c3", True)), 1, False
        ),
        QueryRecord("q3", "val", (_item("c9", True, "canonical", label="correct"),), 1, None),
        QueryRecord("q4", "val", (_item("c4", False, "canonical", label="correct", score=0.7),), 1, True),
    ]
    d = diagnostics(records, (1,))
    assert d["rank1_failures"] == 3
    assert d["rank1_failures_paired"] == 1
    assert d["rank1_failure_paired_share"] == pytest.approx(1 / 3)
    assert d["canonical_below_paired_share"] == pytest.approx(2 / 3)
    assert d["canonical_below_paired_n"] == 3
    assert d["by_bug_type"] == {
        "off_by_one": {"count": 1, "share": pytest.approx(1 / 3)},
        "other_canonical": {"count": 1, "share": pytest.approx(1 / 3)},
        "own_canonical": {"count": 1, "share": pytest.approx(1 / 3)},
    }
    assert d["by_domain"]["geo"]["n_queries"] == 2
    assert d["by_domain"]["val"]["exec@1"] == 0.5


def test_bootstrap_is_seeded_and_handles_degenerate_samples() -> None:
    values = [1, 0, 0, 1, 1, 0, 0, 0, 1, 0] * 5
    a = bootstrap_ci(values, seed=3, n_resamples=2000)
    assert a == bootstrap_ci(values, seed=3, n_resamples=2000)
    assert a[0] < np.mean(values) < a[1]
    assert bootstrap_ci([1.0] * 8) == [1.0, 1.0]
    assert bootstrap_ci([0.25]) == [0.25, 0.25]
    ci = confidence_intervals([QueryRecord("q", "d", (_item("c", True),), 1)], (1,))
    assert ci["exec@1"] == [1.0, 1.0]


# ---------------------------------------------------------------- a tiny pool, end to end

ADD_ONE = "def add_one(x):\n    if x is None:\n        return 0\n    return x + 1\n"
ADD_ONE_BUG = "def add_one(x):\n    if x is None:\n        return 0\n    return x - 1\n"
DOUBLE = "def double(x):\n    return x * 2\n"
DOUBLE_BUG = "def double(x):\n    return x ** 2\n"
INCREMENT = "def add_one(x):\n    return 0 if x is None else x + 1\n"

# Unit vectors: every cosine below is exact, and equal cosines are exact float ties.
DOC_VECTORS = {
    ADD_ONE: [0.6, 0.0, 0.8],  # c_0001
    ADD_ONE_BUG: [0.6, 0.8, 0.0],  # c_0002
    DOUBLE: [1.0, 0.0, 0.0],  # c_0003
    DOUBLE_BUG: [0.0, 0.6, 0.8],  # c_0004
    INCREMENT: [0.28, 0.96, 0.0],  # c_0005
}
QUERY_VECTORS = {
    "add one to a number": [1.0, 0.0, 0.0],
    "double a number": [0.0, 0.6, 0.8],
    "increment a number": [0.0, 0.0, 1.0],
}


class FixedEmbedder(DenseEmbedder):
    """Hand-set vectors: makes ranks computable by hand while using the real store."""

    def __init__(self) -> None:
        super().__init__("fixed")

    def config_key(self) -> str:
        blob = json.dumps([DOC_VECTORS, QUERY_VECTORS], sort_keys=True)
        return "fixed:" + hashlib.sha256(blob.encode()).hexdigest()[:16]

    def _encode(self, texts, kind):
        table = QUERY_VECTORS if kind == "query" else DOC_VECTORS
        return np.array([table[t] for t in texts], dtype=np.float32)


def _tiny_pool(path: Path) -> Path:
    def q(n, text, tests, canon, paired, domain):
        return {
            "query_id": f"q_000{n}",
            "query": text,
            "test_suite": tests,
            "correct_corpus_ids": [canon],
            "paired_distractor_corpus_ids": paired,
            "entry_id": f"e{n}",
            "metadata": {"domain": domain},
        }

    queries = [
        q(
            1,
            "add one to a number",
            ["assert add_one(1) == 2", "assert add_one(None) == 0"],
            "c_0001",
            ["c_0002"],
            "math_numerical",
        ),
        q(
            2,
            "double a number",
            ["assert double(2) == 4", "assert double(3) == 6"],
            "c_0003",
            ["c_0004"],
            "math_numerical",
        ),
        q(
            3,
            "increment a number",
            ["assert add_one(5) == 6", "assert add_one(None) == 0"],
            "c_0005",
            [],
            "collections",
        ),
    ]
    corpus = [
        {"corpus_id": "c_0001", "code": ADD_ONE, "label": "correct", "source_entry_id": "e1"},
        {
            "corpus_id": "c_0002",
            "code": ADD_ONE_BUG,
            "label": "incorrect",
            "bug_type": "wrong_operator",
            "source_entry_id": "e1",
        },
        {"corpus_id": "c_0003", "code": DOUBLE, "label": "correct", "source_entry_id": "e2"},
        {
            "corpus_id": "c_0004",
            "code": DOUBLE_BUG,
            "label": "incorrect",
            "bug_type": "wrong_operator",
            "source_entry_id": "e2",
        },
        {"corpus_id": "c_0005", "code": INCREMENT, "label": "correct", "source_entry_id": "e3"},
    ]
    path.mkdir(parents=True)
    for name, rows in (("queries.jsonl", queries), ("corpus.jsonl", corpus)):
        (path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def tiny_results(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("tiny")
    pool = load_pool(_tiny_pool(root / "pool"))
    with (
        ProcessExecutor(workers=2) as executor,
        ExecCache(root / "exec.sqlite") as cache,
        EmbeddingCache(root / "vectors.sqlite") as vectors,
    ):
        result = evaluate_retrieval(
            pool,
            FixedEmbedder(),
            executor,
            RetrievalSettings(store_dir=root / "stores"),
            exec_cache=cache,
            embed_cache=vectors,
            progress=False,
            n_resamples=500,
        )
    return result.to_json_dict()  # checked in the form the results file has


def test_tiny_pool_tie_order_precondition() -> None:
    # Exact ties are broken by sha256(corpus_id): c_0004 < c_0005 < c_0003 < c_0002 < c_0001.
    order = sorted(["c_0001", "c_0002", "c_0003", "c_0004", "c_0005"], key=tie_key)
    assert order == ["c_0004", "c_0005", "c_0003", "c_0002", "c_0001"]


def test_tiny_pool_rankings_and_verdicts(tiny_results) -> None:
    ranks = {
        pq["query_id"]: [(r["corpus_id"], r["passes_all_tests"]) for r in pq["top_results"]]
        for pq in tiny_results["per_query"]
    }
    # q1: another query's canonical first (fails: NameError), then a 0.6 tie, then a passing snippet of q3
    assert ranks["q_0001"] == [
        ("c_0003", False),
        ("c_0002", False),
        ("c_0001", True),
        ("c_0005", True),
        ("c_0004", False),
    ]
    # q2: its own paired distractor first; its canonical last (cosine 0)
    assert ranks["q_0002"] == [
        ("c_0004", False),
        ("c_0001", False),
        ("c_0005", False),
        ("c_0002", False),
        ("c_0003", True),
    ]
    # q3: a 0.8 tie, then a three-way tie at 0
    assert ranks["q_0003"] == [
        ("c_0004", False),
        ("c_0001", True),
        ("c_0005", True),
        ("c_0003", False),
        ("c_0002", False),
    ]
    top = tiny_results["per_query"][0]["top_results"][0]
    assert top["label"] == "correct" and top["bug_type"] == "" and top["similarity"] == pytest.approx(1.0)
    assert top["test_results"] == ["ERROR:NameError", "ERROR:NameError"]
    assert tiny_results["per_query"][0]["top_results"][1]["bug_type"] == "wrong_operator"


def test_tiny_pool_metrics_by_hand(tiny_results) -> None:
    m = tiny_results["metrics"]
    assert tiny_results["ks"] == [1, 3, 5, 10]
    assert (tiny_results["n_queries"], tiny_results["n_corpus"]) == (3, 5)
    assert [m[f"exec@{k}"] for k in (1, 3, 5, 10)] == [0.0, pytest.approx(2 / 3), 1.0, 1.0]
    assert m["precision@3"] == pytest.approx((1 / 3 + 0 + 2 / 3) / 3)
    assert m["precision@10"] == pytest.approx((2 / 10 + 1 / 10 + 2 / 10) / 3)  # k=10 > 5 snippets
    idcg2 = 1 + 1 / log2(3)
    q1_ndcg5 = (1 / 2 + 1 / log2(5)) / idcg2
    q2_ndcg5 = 1 / log2(6)
    q3_ndcg5 = (1 / log2(3) + 1 / 2) / idcg2
    assert m["ndcg@1"] == 0.0
    assert m["ndcg@3"] == pytest.approx(((1 / 2) / idcg2 + 0 + q3_ndcg5) / 3)
    assert m["ndcg@5"] == pytest.approx((q1_ndcg5 + q2_ndcg5 + q3_ndcg5) / 3)
    assert m["ndcg@10"] == pytest.approx(m["ndcg@5"])
    assert m["exec_ndcg_gap@5"] == pytest.approx(1 - m["ndcg@5"])
    assert m["mrr"] == pytest.approx((1 / 3 + 1 / 5 + 1 / 2) / 3)


def test_tiny_pool_diagnostics(tiny_results) -> None:
    d = tiny_results["diagnostics"]
    assert d["rank1_failures"] == 3
    assert d["rank1_failures_paired"] == 1  # only q2's rank 1 is its own paired distractor
    assert d["rank1_failure_paired_share"] == pytest.approx(1 / 3)
    # q1: canonical ties its distractor (not below); q2: below; q3 has no paired distractor
    assert d["canonical_below_paired_share"] == 0.5 and d["canonical_below_paired_n"] == 2
    assert d["rank1_tied_share"] == pytest.approx(1 / 3)  # q3's rank 1 and 2 tie at 0.8
    assert d["by_bug_type"] == {
        "other_canonical": {"count": 1, "share": pytest.approx(1 / 3)},
        "wrong_operator": {"count": 2, "share": pytest.approx(2 / 3)},
    }
    assert d["by_domain"]["collections"]["n_queries"] == 1
    assert d["by_domain"]["math_numerical"]["exec@3"] == 0.5
    assert tiny_results["ci95"]["exec@1"] == [0.0, 0.0]
    lo, hi = tiny_results["ci95"]["mrr"]
    assert lo <= tiny_results["metrics"]["mrr"] <= hi
    json.dumps(tiny_results, allow_nan=False)  # the results file is strict JSON


def test_gate_metric_names_come_from_the_metrics_module():
    from agentbench.retrieval.metrics import is_metric_name, metric_names

    assert all(is_metric_name(name) for name in metric_names((1, 3, 25)))
    assert not any(is_metric_name(n) for n in ("exec@0", "exec@01", "recall@1", "exec@", "mrr@1"))
