"""Bad input and bad places to write (issue 32): each is one line on stderr and exit code 2, found before
any work, with nothing already on disk changed; a corrupt or full cache is a warning and the command goes
on. Commands run through the real CLI (``agentbench.cli.main`` in this process, or a subprocess)."""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import diskcache
import pytest

from agentbench.api import run_config
from agentbench.cache import JSONCache
from agentbench.errors import ConfigError, PoolError
from agentbench.execution.cache import ExecCache
from agentbench.llm.cache import ResponseCache
from agentbench.pools import load_pool
from agentbench.retrieval.embcache import EmbeddingCache

from .conftest import core_subset, run_cli, tiny_rows, write_rows

OFFLINE = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
GARBAGE = b"this is not an SQLite database\x00\xff" * 200


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    for key, value in OFFLINE.items():
        monkeypatch.setenv(key, value)


def cli(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    """``agentbench ARGS`` through the CLI's entry point in this process: exit code, stdout, stderr."""
    from agentbench.cli import main

    capsys.readouterr()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "argv", ["agentbench", *args])
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


def messages(stderr: str) -> list[str]:
    """The lines of stderr that are not a progress bar (rich draws those with ━)."""
    return [line for line in stderr.splitlines() if line.strip() and "━" not in line]


def assert_one_line_error(code: int, stderr: str, *needles: str) -> str:
    assert code == 2, stderr
    assert "Traceback" not in stderr, stderr
    lines = messages(stderr)
    assert len(lines) == 1, lines
    assert lines[0].startswith("agentbench: error: "), lines
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (None for a directory)."""
    if not root.exists():
        return {}
    out: dict[str, bytes | None] = {str(root): None if root.is_dir() else root.read_bytes()}
    for path in sorted(root.rglob("*")) if root.is_dir() else []:
        out[str(path)] = None if path.is_dir() else path.read_bytes()
    return out


@contextmanager
def tmpfs(path: Path, size: str = "1m") -> Iterator[Path]:
    """A small tmpfs at ``path`` (needs root and mount rights; skips the test otherwise)."""
    path.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True
    )
    if proc.returncode:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip()}); the fault-injection tests cover it")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(directory: Path) -> None:
    """Fill the file system of ``directory`` to the last block."""
    with open(directory / "filler", "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    assert shutil.disk_usage(directory).free == 0


def echo_agent(task):  # a plug-in agent for runs that must fail before any generation
    raise AssertionError("the run must fail before any generation")


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return write_rows(tmp_path / "tiny", tiny_rows())


# ----------------------------------------------------------------------------- 1. report --html


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from .test_report import make_run

    root = tmp_path_factory.mktemp("faults-report")
    pool = write_rows(root / "tiny", tiny_rows())
    return make_run(root, "run", pool=str(pool), limit=None)


def test_report_html_to_a_directory_fails_before_rendering(
    run_dir: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agentbench.analysis.html as html

    def render_html(*args, **kwargs):
        raise AssertionError("rendered before the path was checked")

    monkeypatch.setattr(html, "render_html", render_html)
    target = tmp_path / "reports"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    before, run_before = snapshot(target), snapshot(run_dir)
    code, _, err = cli(capsys, "report", str(run_dir), "--html", str(target))
    assert_one_line_error(code, err, str(target), "is a directory", "report.html")
    assert snapshot(target) == before and snapshot(run_dir) == run_before
    # the library call refuses it too, before rendering
    with pytest.raises(ConfigError, match="is a directory"):
        html.write_html(run_dir, target)


def test_report_html_on_a_read_only_location(run_dir: Path, tmp_path: Path, capsys) -> None:
    ro = tmp_path / "ro"
    with tmpfs(ro):
        (ro / "report.html").write_text("the previous report")
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        before = snapshot(ro)
        for target in (ro / "report.html", ro / "new" / "report.html"):
            code, _, err = cli(capsys, "report", str(run_dir), "--html", str(target))
            assert_one_line_error(code, err, str(target), "cannot write in", "writable")
        assert snapshot(ro) == before


def test_report_html_below_a_file(run_dir: Path, tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    code, _, err = cli(capsys, "report", str(run_dir), "--html", str(blocker / "report.html"))
    assert_one_line_error(code, err, f"{blocker} is a file, not a directory")
    assert blocker.read_text() == "x"
    # a good path still works, and writes the report
    good = tmp_path / "out" / "report.html"
    code, _, err = cli(capsys, "report", str(run_dir), "--html", str(good))
    assert code == 0, err
    assert good.read_text().startswith("<!DOCTYPE html>")


# ----------------------------------------------------------------------------- 2. retrieve --out


def test_retrieve_out_below_a_file_fails_before_any_execution(tiny: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "results"
    blocker.write_text("not a directory")
    cache = tmp_path / "cache"
    args = ["retrieve", "--pool", str(tiny), "--embedder", "bm25", "--sandbox", "process"]
    args += ["--store-dir", str(tmp_path / "stores"), "--out", str(blocker / "run1")]
    proc = run_cli(*args, env={**OFFLINE, "AGENTBENCH_CACHE_DIR": str(cache)})
    assert_one_line_error(proc.returncode, proc.stderr, f"{blocker} is a file", "--out")
    assert blocker.read_text() == "not a directory"
    assert not (cache / "executions").exists()  # no snippet was executed
    assert not (tmp_path / "stores").exists()  # nothing was indexed


def test_retrieve_results_write_failure_is_one_line(
    tiny: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agentbench.cli.retrieve as retrieve_cli

    def full_disk(path, data, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(retrieve_cli, "atomic_write_json", full_disk)
    out = tmp_path / "out"
    args = ["retrieve", "--pool", str(tiny), "--embedder", "bm25", "--sandbox", "process"]
    code, _, err = cli(capsys, *args, "--store-dir", str(tmp_path / "stores"), "--out", str(out))
    line = assert_one_line_error(
        code, err, "cannot write the retrieval results", str(out), "the disk is full"
    )
    assert " free)" in line
    assert list(out.iterdir()) == []


# ----------------------------------------------------------------------------- 3. out-of-range options


@pytest.mark.parametrize(
    ("command", "args", "needles"),
    [
        ("run", ["--k", "1000000"], ["--k must be between 1 and 10", "1000000"]),
        ("run", ["--k", "0"], ["--k must be between 1 and 10"]),
        ("run", ["--max-tokens", "0"], ["--max-tokens must be at least 1, got 0"]),
        ("run", ["--concurrency", "100000"], ["--concurrency must be between 1 and 1024"]),
        ("run", ["--concurrency", "4", "--llm-processes", "9"], ["--llm-processes", "--concurrency (4)"]),
        ("run", ["--seed", "-1"], ["--seed must be between 0 and 4294967295, got -1"]),
        ("retrieve", ["--seed", "-1"], ["--seed must be between 0 and 4294967295"]),
        ("run", ["--timeout", "inf"], ["--timeout must be between 0.1 and 3600"]),
        ("retrieve", ["--timeout", "1e9"], ["--timeout must be between 0.1 and 3600"]),
        ("run", ["--rerank-k", "1000"], ["--rerank-k must be between 1 and 100"]),
        ("retrieve", ["--rerank-k", "1000"], ["--rerank-k must be between 1 and 100"]),
        ("run", ["--sandbox-workers", "1000000"], ["--sandbox-workers must be between 1 and 1024"]),
        ("retrieve", ["--sandbox-workers", "1000000"], ["--sandbox-workers must be between 1 and 1024"]),
    ],
)
def test_out_of_range_options_are_one_line_errors(
    command: str, args: list[str], needles: list[str], tiny: Path, tmp_path: Path, capsys
) -> None:
    where = tmp_path / "out"
    place = ["--run-dir", str(where)] if command == "run" else ["--out", str(where)]
    code, _, err = cli(capsys, command, "--pool", str(tiny), *place, *args)
    assert_one_line_error(code, err, *needles)
    assert not where.exists()
    assert not (tmp_path / "cache" / "executions").exists()


def test_temperature_out_of_range_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="temperature must be between 0 and 2"):
        run_config(temperature=-0.5)
    assert run_config(temperature=0.7).temperature == 0.7  # a value in range is kept


@pytest.mark.parametrize("command", ["run", "retrieve"])
def test_sample_larger_than_the_pool_names_both_numbers(command: str, tmp_path: Path, capsys) -> None:
    pool = core_subset(6, tmp_path / "pool")
    where = tmp_path / "out"
    if command == "run":
        base = [command, "--pool", str(pool), "--agent", f"{__name__}:echo_agent", "--run-dir", str(where)]
    else:
        base = [command, "--pool", str(pool), "--embedder", "bm25", "--out", str(where)]
    base += ["--sandbox", "process", "--store-dir", str(tmp_path / "stores")]
    code, _, err = cli(capsys, *base, "--sample", "50")
    assert_one_line_error(code, err, "--sample 50", "the pool's 6 queries", "--sample 6 or less")
    code, _, err = cli(capsys, *base, "--limit", "3", "--sample", "5")
    assert_one_line_error(code, err, "--sample 5", "3 queries left by --limit 3")
    assert not where.exists()
    assert not (tmp_path / "cache" / "executions").exists()


def test_sample_within_the_pool_still_samples(tmp_path: Path) -> None:
    from agentbench.api import retrieval_settings

    queries = list(range(6))
    assert retrieval_settings(sample=6).select(queries) == queries
    picked = retrieval_settings(sample=3, seed=1).select(queries)
    assert len(picked) == 3 and set(picked) <= set(queries)
    assert retrieval_settings(limit=50).select(queries) == queries  # --limit is "at most N"


# ----------------------------------------------------------------------------- 4. empty pools


def test_validate_an_empty_pool_is_an_error(tmp_path: Path, capsys) -> None:
    rows = tiny_rows()
    empty = write_rows(tmp_path / "empty", {"queries.jsonl": [], "corpus.jsonl": rows["corpus.jsonl"]})
    before = snapshot(empty)
    code, out, err = cli(capsys, "pool", "validate", str(empty))
    assert_one_line_error(code, err, f"pool {empty} holds no queries", "add at least one query")
    assert "ok" not in out
    assert snapshot(empty) == before
    with pytest.raises(PoolError, match="holds no queries"):  # and nothing runs on it
        load_pool(empty)


FAILING_TASK = {
    "id": "broken/add_one",
    "query": "add one to a number",
    "code": "def add_one(x):\n    return x + 2\n",
    "tests": ["assert add_one(1) == 2", "assert add_one(2) == 3"],
}


def test_build_that_drops_every_task_writes_nothing(tiny: Path, tmp_path: Path, capsys) -> None:
    src = tmp_path / "src.jsonl"
    src.write_text(json.dumps(FAILING_TASK) + "\n")
    existing = tiny  # a good pool already at --out stays as it was
    before = snapshot(existing)
    fresh = tmp_path / "fresh"
    for out in (existing, fresh):
        args = ["pool", "build", "--from", str(src), "--out", str(out), "--sandbox", "process"]
        code, _, err = cli(capsys, *args)
        assert_one_line_error(
            code, err, "every task was dropped (1 of 1", "broken/add_one", "canonical fails"
        )
    assert snapshot(existing) == before
    assert not fresh.exists()


def test_build_out_below_a_file_fails_before_executing(tmp_path: Path, capsys) -> None:
    src = tmp_path / "src.jsonl"
    src.write_text(json.dumps(FAILING_TASK) + "\n")
    blocker = tmp_path / "f"
    blocker.write_text("x")
    code, _, err = cli(capsys, "pool", "build", "--from", str(src), "--out", str(blocker / "pool"))
    assert_one_line_error(code, err, "--out", f"{blocker} is a file")
    assert not (tmp_path / "cache" / "executions").exists()


# ----------------------------------------------------------------------------- 5. corrupt caches


def test_corrupt_execution_cache_is_moved_aside_and_rebuilt(tiny: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    db = cache / "executions" / "cache.db"
    db.parent.mkdir(parents=True)
    db.write_bytes(GARBAGE)
    env = {**OFFLINE, "AGENTBENCH_CACHE_DIR": str(cache)}
    proc = run_cli("pool", "validate", str(tiny), "--execute", "--sandbox", "process", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "ok: 1 queries" in proc.stdout
    warnings = [line for line in messages(proc.stderr) if "was corrupt" in line]
    assert len(warnings) == 1, proc.stderr
    assert warnings[0].startswith("agentbench: the execution cache") and "moved it aside" in warnings[0]
    aside = list(db.parent.glob("cache.db.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == GARBAGE  # kept, byte for byte
    with ExecCache(db.parent) as rebuilt:
        assert len(rebuilt) == 2  # the two verdicts of this run
    # the next run reads them back: no second warning, nothing moved again
    proc = run_cli("pool", "validate", str(tiny), "--execute", "--sandbox", "process", env=env)
    assert proc.returncode == 0 and "corrupt" not in proc.stderr
    assert len(list(db.parent.glob("cache.db.corrupt-*"))) == 1


@pytest.mark.parametrize("kind", ["embeddings", "llm-responses"])
def test_other_corrupt_caches_recover_with_one_warning(
    kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import numpy as np

    directory = tmp_path / kind
    directory.mkdir()
    (directory / "cache.db").write_bytes(GARBAGE)
    caplog.set_level(logging.WARNING, logger="agentbench")
    for _ in range(2):  # opened twice in one command: one warning
        if kind == "embeddings":
            store = EmbeddingCache(directory)
            store.put_many("cfg", "query", ["a"], np.ones((1, 3), dtype=np.float32))
            assert store.get_many("cfg", "query", ["a"])[0].tolist() == [1.0, 1.0, 1.0]
        else:
            store = ResponseCache(directory)
            store.put("k", "m", {"text": "hi"})
            assert store.get("k") == {"text": "hi"}
        store.close()
    warned = [r for r in caplog.records if "was corrupt" in r.getMessage()]
    assert len(warned) == 1 and "\n" not in warned[0].getMessage()
    assert [p.read_bytes() for p in directory.glob("cache.db.corrupt-*")] == [GARBAGE]


# ----------------------------------------------------------------------------- 6. a full disk


def test_full_disk_at_a_cache_write_warns_once_and_the_command_goes_on(
    tiny: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fault injection: every write of the cache layer fails with ENOSPC."""

    def no_space(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(diskcache.Cache, "set", no_space)
    for _ in range(2):  # the second run in this process is not warned again
        code, out, err = cli(capsys, "pool", "validate", str(tiny), "--execute", "--sandbox", "process")
        assert code == 0, err
        assert "ok: 1 queries" in out and "Traceback" not in err
        if _ == 0:
            [warning] = [line for line in messages(err) if "cannot be written" in line]
            assert str(tmp_path / "cache" / "executions") in warning
            assert "the disk is full (" in warning and " free)" in warning
        else:
            assert "cannot be written" not in err
    monkeypatch.undo()
    with ExecCache(tmp_path / "cache" / "executions") as cache:
        assert len(cache) == 0  # nothing half-written


def test_full_tmpfs_at_open_and_at_write(
    tiny: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A real full file system (1 MiB tmpfs): a cache that cannot be opened or written is skipped with
    one warning naming the free space; the command's result is the same."""
    with tmpfs(tmp_path / "fs") as fs:
        # at write: the store was opened with room, then the disk filled up
        caplog.set_level(logging.WARNING, logger="agentbench")
        store = JSONCache(fs / "store", label="test")
        store.set("kept", 1)
        fill(fs)
        assert store.set_many([(str(i), "x" * 100_000) for i in range(3)]) == 0
        assert store.set_many([("more", "y" * 100_000)]) == 0
        assert store.get("kept") == 1 and store.get("0") is None
        warned = [r.getMessage() for r in caplog.records if "cannot be written" in r.getMessage()]
        assert len(warned) == 1 and "the disk is full (" in warned[0] and " free)" in warned[0]
        store.close()
        # at open: a command whose cache directory is on the full disk
        env = {**OFFLINE, "AGENTBENCH_CACHE_DIR": str(fs / "cache")}
        proc = run_cli("pool", "validate", str(tiny), "--execute", "--sandbox", "process", env=env)
        assert proc.returncode == 0, proc.stderr
        assert "ok: 1 queries" in proc.stdout and "Traceback" not in proc.stderr
        [warning] = [line for line in messages(proc.stderr) if "cache" in line]
        assert "cannot be used: the disk is full (" in warning and str(fs / "cache") in warning
        os.unlink(fs / "filler")
