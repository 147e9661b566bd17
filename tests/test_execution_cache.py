"""Execution cache: hits, misses, dedupe, infra errors, ExecRetrieval export/import, concurrency."""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Sequence
from pathlib import Path

from agentbench.execution import ExecResult, Executor, Job
from agentbench.execution.base import OUTPUT_LIMIT
from agentbench.execution.cache import ExecCache, default_cache_path, job_config, run_cached


class CountingExecutor(Executor):
    """Passes jobs whose code contains "ok"; reports an infra error for code containing "infra"."""

    name = "fake"

    def __init__(self) -> None:
        self.ran: list[Job] = []

    def run(self, jobs: Sequence[Job], progress=None) -> list[ExecResult]:
        self.ran.extend(jobs)
        out = []
        for job in jobs:
            if "infra" in job.code:
                out.append(ExecResult(["ERROR:Infra"] * len(job.tests), infra_error="container died"))
            else:
                out.append(
                    ExecResult(["pass" if "ok" in job.code else "FAIL"] * len(job.tests), stdout="out")
                )
            if progress:
                progress(1)
        return out


def test_run_cached_runs_each_distinct_job_once(tmp_path: Path) -> None:
    ex = CountingExecutor()
    jobs = [Job("ok", ("assert 1",)), Job("bad", ("assert 1",)), Job("ok", ("assert 1",))]
    seen: list[int] = []
    with ExecCache(tmp_path / "c") as cache:
        first = run_cached(ex, jobs, cache, progress=seen.append)
        second = run_cached(ex, jobs, cache)
    assert [r.results for r in first] == [["pass"], ["FAIL"], ["pass"]]
    assert [r.results for r in second] == [r.results for r in first]
    assert len(ex.ran) == 2 and sum(seen) == 3
    assert all(r.extra.get("cached") for r in second) and second[0].stdout == "out"
    first[0].results.append("mutated")
    assert first[2].results == ["pass"]  # duplicates are independent copies


def test_timeout_and_executor_settings_are_part_of_the_key(tmp_path: Path) -> None:
    ex = CountingExecutor()
    with ExecCache(tmp_path / "c") as cache:
        run_cached(ex, [Job("ok", ("assert 1",), timeout=5)], cache)
        run_cached(ex, [Job("ok", ("assert 1",), timeout=10)], cache)
        assert set(cache.configs()) == {"fake;timeout=5", "fake;timeout=10"}
    assert len(ex.ran) == 2


def test_infra_errors_are_never_cached(tmp_path: Path) -> None:
    ex = CountingExecutor()
    with ExecCache(tmp_path / "c") as cache:
        res = run_cached(ex, [Job("infra", ("assert 1",))], cache)
        run_cached(ex, [Job("infra", ("assert 1",))], cache)
        assert len(cache) == 0
    assert res[0].infra_error and len(ex.ran) == 2


def test_without_a_cache_everything_runs(tmp_path: Path) -> None:
    ex = CountingExecutor()
    run_cached(ex, [Job("ok", ("assert 1",))] * 3, None)
    assert len(ex.ran) == 1


def test_execretrieval_export_and_import(tmp_path: Path) -> None:
    ex = CountingExecutor()
    job = Job("ok", ("assert 1", "assert 2"))
    with ExecCache(tmp_path / "a") as cache:
        run_cached(ex, [job], cache)
        assert cache.export_jsonl(tmp_path / "execution_cache.jsonl") == 1
    row = json.loads((tmp_path / "execution_cache.jsonl").read_text())
    assert row == {"code_sha256": job.key[0], "tests_sha256": job.key[1], "results": ["pass", "pass"]}
    config = job_config(ex.config_key(), job.timeout)
    with ExecCache(tmp_path / "b") as other:
        assert other.import_jsonl(tmp_path / "execution_cache.jsonl", config) == 1
        assert run_cached(ex, [job], other)[0].results == ["pass", "pass"]
    assert len(ex.ran) == 1


def test_default_location_follows_the_environment(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "cachedir"))
    assert default_cache_path() == tmp_path / "cachedir" / "executions"
    with ExecCache() as cache:
        cache.put_many([(("c", "t", "cfg"), ExecResult(["pass"]))])
    assert (tmp_path / "cachedir" / "executions").is_dir()
    assert not (tmp_path / "cachedir" / "exec_cache.sqlite").exists()


def test_verdicts_survive_reopening_and_keep_output(tmp_path: Path) -> None:
    with ExecCache(tmp_path / "c") as cache:
        cache.put_many(
            [(("c", "t", "cfg"), ExecResult(["pass", "FAIL:x"], "é\udcff" + "o" * 9000, "err", None, 1.5))]
        )
    with ExecCache(tmp_path / "c") as cache:
        got = cache.get_many([("c", "t", "cfg"), ("c", "t", "other")])
    assert list(got) == [("c", "t", "cfg")]
    result = got[("c", "t", "cfg")]
    assert result.results == ["pass", "FAIL:x"] and result.stderr == "err" and result.duration == 1.5
    assert result.stdout == ("é\udcff" + "o" * 9000)[:OUTPUT_LIMIT] and result.extra == {"cached": True}


def test_export_keeps_the_newest_verdict_per_pair(tmp_path: Path) -> None:
    with ExecCache(tmp_path / "c") as cache:
        cache.put_many([(("c", "t", "old"), ExecResult(["FAIL"]))])
        cache.put_many([(("c", "t", "new"), ExecResult(["pass"]))])
        assert cache.export_jsonl(tmp_path / "all.jsonl") == 1
        assert cache.export_jsonl(tmp_path / "old.jsonl", config="old") == 1
    assert json.loads((tmp_path / "all.jsonl").read_text())["results"] == ["pass"]
    assert json.loads((tmp_path / "old.jsonl").read_text())["results"] == ["FAIL"]


def _writer(path: str, prefix: str) -> None:
    with ExecCache(path) as cache:
        for i in range(50):
            cache.put_many([((f"{prefix}{i}", "t", "cfg"), ExecResult(["pass"]))])


def test_concurrent_processes_share_one_store(tmp_path: Path) -> None:
    path = str(tmp_path / "shared")
    ExecCache(path).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, p)) for p in ("a", "b", "c")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert all(p.exitcode == 0 for p in procs)
    with ExecCache(path) as cache:
        assert len(cache) == 150
