"""The bundled `core` pool: size, coverage, distinct tasks, and exactly what its sources produce."""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import pytest

from agentbench.pools import DOMAINS, load_pool, pool_stats, read_sources
from agentbench.pools.io import CORE_POOL_DIR, CORE_SOURCES_DIR

from .conftest import run_cli

STOP = set("a an the of to in and or for from by with into as is are be each its it that this on at".split())


@pytest.fixture(scope="module")
def core():
    return load_pool("core")


def test_core_pool_size_and_coverage(core) -> None:
    s = pool_stats(core)
    assert s["queries"] >= 300
    assert set(s["domains"]) == set(DOMAINS)
    assert min(s["domains"].values()) >= 25
    assert s["share_with_4_distractors"] >= 0.95
    assert set(s["bug_types"]) == {
        "off_by_one",
        "off_by_one_boundary",
        "swap_arguments",
        "remove_edge_case_check",
        "wrong_comparison",
        "wrong_operator",
    }


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP}


def test_core_tasks_are_distinct(core) -> None:
    names = [q.metadata["function_name"] for q in core.queries]
    assert len(names) == len(set(names)), "function names must be unique"
    texts = [q.query for q in core.queries]
    assert len(texts) == len(set(texts))
    codes = [core.snippet(q.correct_corpus_ids[0]).code for q in core.queries]
    assert len(codes) == len(set(codes))
    words = [_words(t) for t in texts]
    for (i, a), (j, b) in itertools.combinations(enumerate(words), 2):
        jaccard = len(a & b) / len(a | b)
        assert jaccard < 0.6, f"queries look like paraphrases: {texts[i]!r} / {texts[j]!r}"


def test_core_canonicals_are_realistic(core) -> None:
    for q in core.queries:
        code = core.snippet(q.correct_corpus_ids[0]).code
        tree = ast.parse(code)
        assert sum(isinstance(n, ast.FunctionDef) for n in tree.body) == 1
        assert 4 <= len(code.strip().splitlines()) <= 40
        assert len(q.test_suite) >= 6


@pytest.mark.slow
def test_shipped_core_pool_is_what_the_sources_build(tmp_path: Path) -> None:
    out = tmp_path / "core"
    res = run_cli("pool", "build", "--from", str(CORE_SOURCES_DIR), "--out", str(out), "--json", timeout=3000)
    assert res.returncode == 0, res.stderr[-2000:]
    for name in ("queries.jsonl", "corpus.jsonl", "distractor_metadata.jsonl"):
        assert (out / name).read_bytes() == (CORE_POOL_DIR / name).read_bytes(), name


@pytest.mark.slow
def test_core_pool_validates_by_execution() -> None:
    res = run_cli("pool", "validate", "core", "--execute", timeout=3000)
    assert res.returncode == 0, res.stderr[-2000:]


def test_sources_are_readable_toml_per_domain() -> None:
    files = sorted(p.stem for p in CORE_SOURCES_DIR.glob("*.toml"))
    assert files == sorted(DOMAINS)
    assert len(read_sources(CORE_SOURCES_DIR)) >= 300
