"""Repeated samples with the real offline model: local/qwen2.5-coder-0.5b, ``--samples 3`` at temperature 1.

The scripted runs of tests/test_samples.py check the arithmetic; this one checks what only a real sampler
can show: each sample of a (query, condition) gets its own seed, so the samples of one prompt differ, the
summary's pass@k comes from the records, and a rerun is answered from the response cache.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentbench.api import evaluate_config as evaluate
from agentbench.llm.weights import cache_dir, local_model_spec
from agentbench.pipeline import RunConfig

from .conftest import core_subset
from .test_pipeline_local import MODEL, _sandbox, weights  # noqa: F401  (the module-scoped fixture)

pytestmark = pytest.mark.slow

SAMPLES = 3
N_QUERIES = 2


def test_samples_of_the_real_model_differ_and_replay_from_the_cache(
    weights: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache = tmp_path / "cache"
    (cache / "models").mkdir(parents=True)
    spec = local_model_spec(MODEL)
    for name in (spec.filename, spec.filename + ".verified"):
        (cache / "models" / name).symlink_to(weights.parent / name)
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(cache))
    assert cache_dir() == cache
    pool = core_subset(N_QUERIES, tmp_path / "pool")

    def config(name: str) -> RunConfig:
        return RunConfig(
            pool=str(pool),
            llm=MODEL,
            embedder="minilm",
            conditions=["closed_book"],
            samples=SAMPLES,
            temperature=1.0,
            sandbox=_sandbox(),
            max_tokens=192,
            concurrency=2,
            run_dir=str(tmp_path / name),
            store_dir=str(tmp_path / "stores"),
        )

    first = evaluate(config("first"), show_progress=False)
    keys = sorted((r.query_id, r.sample) for r in first.records)
    queries = sorted({q for q, _ in keys})
    assert len(queries) == N_QUERIES and keys == [(q, s) for q in queries for s in range(SAMPLES)]
    assert not [r for r in first.records if r.status in ("llm_error", "infra_error")]
    for q in queries:  # temperature 1 with seeds seed+0, seed+1, seed+2: not one reply three times
        replies = {r.response for r in first.records if r.query_id == q}
        assert len(replies) > 1, f"{q}: the {SAMPLES} samples gave one reply"
    assert first.summary.llm.calls == N_QUERIES * SAMPLES

    samples = first.summary.samples
    assert samples is not None and samples.samples == SAMPLES
    cb = samples.conditions["closed_book"]
    passes = {q: sum(r.passed for r in first.records if r.query_id == q) for q in queries}
    expected_at_1 = sum(p / SAMPLES for p in passes.values()) / N_QUERIES
    expected_at_3 = sum(p > 0 for p in passes.values()) / N_QUERIES
    assert cb.pass_at_k["pass@1"] == pytest.approx(expected_at_1, abs=1e-4)
    assert cb.pass_at_k[f"pass@{SAMPLES}"] == pytest.approx(expected_at_3, abs=1e-4)
    assert cb.flaky == sum(0 < p < SAMPLES for p in passes.values())

    second = evaluate(config("second"), show_progress=False)  # every sample from the response cache
    assert second.summary.llm.calls == 0 and second.summary.llm.cache_hits == N_QUERIES * SAMPLES
    by_key = {(r.query_id, r.sample): r.response for r in first.records}
    assert {(r.query_id, r.sample): r.response for r in second.records} == by_key
