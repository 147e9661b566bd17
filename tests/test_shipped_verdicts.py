"""Sandbox verdicts shipped for the bundled pools (issue 33 item 1, :mod:`agentbench.execution.bundled`).

- the shipped files cover what a default run on each bundled pool executes (a pool edited without
  regenerating fails here, naming the command);
- a seeded sample of shipped verdicts, passing and failing, is what the Docker sandbox gives now;
- a retrieval on a core subset with an empty cache directory executes nothing the file covers, and scores
  exactly as with the file switched off (everything executed);
- another job config (timeout, memory, the process executor) or no cache at all is never served;
- a corrupt or mismatching file is ignored with one warning, and everything executes.

Executions are counted, never timed.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from agentbench.execution import bundled
from agentbench.execution.base import ExecResult, Executor, Job, ProgressCallback
from agentbench.execution.cache import ExecCache, job_config, run_cached
from agentbench.execution.container import DockerExecutor, docker_config_key
from agentbench.execution.engine import image_tag
from agentbench.pools import load_pool
from agentbench.pools.io import BUNDLED_POOLS
from agentbench.retrieval import verdicts
from agentbench.retrieval.settings import RetrievalSettings

from .conftest import require_docker

SAMPLE_PASSING, SAMPLE_FAILING = 12, 28


@pytest.fixture
def fresh_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """No file read or warning remembered from an earlier test; serving on."""
    monkeypatch.setattr(bundled, "_LOADED", {})
    monkeypatch.setattr(bundled, "_WARNED", set())
    monkeypatch.delenv(bundled.ENV_SWITCH, raising=False)


class Canned(Executor):
    """Counts the jobs it is asked to run; answers FAIL for each, under any config key."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.ran: list[Job] = []

    def config_key(self) -> str:
        return self.key

    def run(self, jobs: Sequence[Job], progress: ProgressCallback | None = None) -> list[ExecResult]:
        self.ran.extend(jobs)
        if progress:
            progress(len(jobs))
        return [ExecResult(["FAIL"] * len(j.tests)) for j in jobs]


def _own_jobs(pool_name: str, n_queries: int, timeout: float = 10.0) -> list[Job]:
    pool = load_pool(pool_name)
    pool = pool.only(pool.queries[:n_queries])
    return list(verdicts.required_jobs(pool, retrievers=())["own"].values())


# ------------------------------------------------------------------ coverage


@pytest.mark.parametrize("name", sorted(BUNDLED_POOLS))
def test_shipped_verdicts_cover_what_a_default_run_executes(name: str) -> None:
    found = verdicts.problems(name, retrievers=verdicts.RETRIEVERS)
    assert not found, "\n".join(found)
    shipped = bundled.load(bundled.shipped_path(name))
    assert shipped is not None and shipped.config == verdicts.default_config()


def test_an_edited_pool_is_reported_with_the_regeneration_command() -> None:
    pool = load_pool("humaneval")
    edited = pool.model_copy(deep=True)
    edited.corpus[0].code += "# edited\n"
    edited.queries[1].test_suite.append("assert True")
    found = verdicts.problems("humaneval", edited, retrievers=())
    assert found and all(bundled.REGENERATE in line for line in found), found
    assert "own snippets" in found[0]


# ------------------------------------------------------------------ faithful to the sandbox


def _sample_jobs() -> list[tuple[Job, list[str]]]:
    """A seeded sample of shipped pairs (core and humaneval own snippets, humaneval minilm hits) with their
    shipped outcomes: passing ones and failing ones (FAIL and ERROR:*). TIMEOUT verdicts are left out:
    each costs the full 10 s of CPU time."""
    candidates: list[tuple[Job, list[str]]] = []
    for name, retrievers in (("core", ()), ("humaneval", ("minilm",))):
        shipped = bundled.load(bundled.shipped_path(name))
        assert shipped is not None
        for jobs in verdicts.required_jobs(load_pool(name), retrievers=retrievers).values():
            for key, job in jobs.items():
                served = shipped.get(*key)
                assert served is not None
                if "TIMEOUT" not in served.results:
                    candidates.append((job, served.results))
    rng = random.Random(33)
    passing = [c for c in candidates if all(r == "pass" for r in c[1])]
    errors = [c for c in candidates if any(r.startswith("ERROR:") for r in c[1])]
    failing = [c for c in candidates if c not in passing and c not in errors]
    half = SAMPLE_FAILING // 2
    return rng.sample(passing, SAMPLE_PASSING) + rng.sample(errors, half) + rng.sample(failing, half)


@pytest.mark.slow
def test_a_sample_of_shipped_verdicts_is_what_the_docker_sandbox_gives_now() -> None:
    require_docker()
    sample = _sample_jobs()
    with DockerExecutor(workers=2) as executor:
        assert job_config(executor.config_key(), 10.0) == verdicts.default_config()
        fresh = executor.run([job for job, _ in sample])
    assert all(r.infra_error is None for r in fresh), [r.infra_error for r in fresh if r.infra_error]
    assert [r.results for r in fresh] == [results for _, results in sample]


# ------------------------------------------------------------------ served only under its config


@pytest.mark.parametrize(
    ("executor_key", "timeout", "served"),
    [
        (docker_config_key(image_tag()), 10.0, True),
        (docker_config_key(image_tag()), 9.0, False),  # another timeout
        (docker_config_key(image_tag(), memory_mb=4096), 10.0, False),  # another memory limit
        (docker_config_key("agentbench-sandbox:000000000000"), 10.0, False),  # another image
        ("process:mem=1024:ns=1:uid=1:harness=58ed197b86f4", 10.0, False),  # the process executor
    ],
    ids=["default", "timeout", "memory", "image", "process"],
)
def test_verdicts_are_served_only_under_the_job_config_they_were_made_under(
    executor_key: str, timeout: float, served: bool, tmp_path: Path, fresh_state
) -> None:
    jobs = [Job(j.code, j.tests, timeout, j.setup) for j in _own_jobs("core", 5)]
    executor = Canned(executor_key)
    with ExecCache(tmp_path / "executions") as cache:
        results = run_cached(executor, jobs, cache)
        assert len(executor.ran) == (0 if served else len(jobs))
        assert all(bool(r.extra.get("shipped")) == served for r in results)
        if served:  # the canonicals pass, the distractors fail, as the sandbox said
            assert sum(r.passed for r in results) == 5 and all(r.extra["cached"] for r in results)
            assert len(cache) == 0  # served from the package, not copied into the cache


def test_no_cache_or_the_switch_executes_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_state
) -> None:
    jobs = _own_jobs("humaneval", 3)
    executor = Canned(docker_config_key(image_tag()))
    run_cached(executor, jobs, None)  # no cache: fresh verdicts asked for
    assert len(executor.ran) == len(jobs)
    monkeypatch.setenv(bundled.ENV_SWITCH, "0")
    with ExecCache(tmp_path / "executions") as cache:
        run_cached(executor, jobs, cache)
    assert len(executor.ran) == 2 * len(jobs)


# ------------------------------------------------------------------ bad files


def _corrupt_bytes(src: Path, dst: Path) -> None:
    data = bytearray(src.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(64)
    dst.write_bytes(bytes(data))


def _altered_outcomes(src: Path, dst: Path) -> None:
    """A well-formed file whose verdicts no longer hash to the recorded data_sha256 (one flipped)."""
    with np.load(src, allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files}
    arrays["outcomes"] = arrays["outcomes"].copy()
    arrays["outcomes"][0] = (arrays["outcomes"][0] + 1) % len(arrays["outcome_names"])
    np.savez_compressed(dst, **arrays)


@pytest.mark.parametrize("corrupt", [_corrupt_bytes, _altered_outcomes], ids=["bytes", "checksum"])
def test_a_corrupt_file_is_ignored_with_one_warning_and_everything_executes(
    corrupt,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    fresh_state,
) -> None:
    shipped = tmp_path / "bundled"
    shipped.mkdir()
    corrupt(bundled.shipped_path("core"), shipped / "core.npz")
    monkeypatch.setattr(bundled, "BUNDLED_DIR", shipped)
    caplog.set_level(logging.WARNING, logger="agentbench")
    jobs = _own_jobs("core", 4)
    executor = Canned(docker_config_key(image_tag()))
    with ExecCache(tmp_path / "executions") as cache:
        run_cached(executor, jobs[:10], cache)
        run_cached(executor, jobs[10:], cache)  # the file is not read (nor reported) again
    assert len(executor.ran) == len(jobs)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "corrupt" in warnings[0].getMessage() and bundled.REGENERATE in warnings[0].getMessage()


# ------------------------------------------------------------------ a first retrieve


@pytest.mark.slow
def test_a_first_retrieve_on_a_core_subset_executes_nothing_and_scores_as_executing_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_state
) -> None:
    """``retrieve --pool core --limit 25 --sandbox docker`` (the API form) with an empty cache directory,
    then with the shipped verdicts switched off and another empty cache directory."""
    require_docker()
    import agentbench

    ran: list[int] = []
    real_run = DockerExecutor.run

    def counting(self, jobs, progress=None):
        ran.append(len(jobs))
        return real_run(self, jobs, progress)

    monkeypatch.setattr(DockerExecutor, "run", counting)
    settings = RetrievalSettings(limit=25, sandbox="docker", store_dir=str(tmp_path / "stores"))
    results = {}
    for way in ("shipped", "executed"):
        monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / f"cache-{way}"))
        if way == "executed":
            monkeypatch.setenv(bundled.ENV_SWITCH, "0")
        ran.clear()
        (result,) = agentbench.retrieve_all("core", embedders=["minilm"], settings=settings)
        results[way] = (result.to_json_dict(), sum(ran))
    (shipped, n_shipped), (executed, n_executed) = results["shipped"], results["executed"]
    assert n_shipped == 0
    assert 0 < n_executed <= 25 * verdicts.DEPTH  # each distinct (snippet, tests) pair once
    for key in ("metrics", "ci95", "diagnostics", "per_query"):
        assert shipped[key] == executed[key], key
