"""The one cache layer (agentbench.cache): directory rule, error translation, JSON storage, concurrency.

Real diskcache stores in temporary directories throughout; processes are spawned, not forked.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import diskcache
import numpy as np
import pytest

from agentbench.cache import EMBEDDINGS, EXECUTIONS, LLM_RESPONSES, JSONCache, cache_dir, store_dir
from agentbench.errors import ConfigError
from agentbench.execution import ExecResult
from agentbench.execution.cache import ExecCache
from agentbench.execution.cache import default_cache_dir as execution_cache_dir
from agentbench.llm.cache import ResponseCache
from agentbench.retrieval.embcache import EmbeddingCache

STORES = {"execution": EXECUTIONS, "embedding": EMBEDDINGS, "LLM response": LLM_RESPONSES}


@pytest.fixture(autouse=True)
def _environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """HOME, XDG_CACHE_HOME and AGENTBENCH_CACHE_DIR all point into tmp_path (tests delete what they test)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "mine"))


def _write_one(kind: str) -> None:
    """Open ``kind``'s cache at its default location and store one entry."""
    if kind == "execution":
        with ExecCache() as cache:
            cache.put_many([(("code", "tests", "cfg"), ExecResult(["pass"]))])
            assert len(cache) == 1
    elif kind == "embedding":
        with EmbeddingCache() as cache:
            cache.put_many("cfg", "query", ["text"], np.ones((1, 3), dtype=np.float32))
            assert len(cache) == 1
    else:
        cache = ResponseCache()
        cache.put("key", "model", {"text": "hi"})
        assert len(cache) == 1 and cache.get("key") == {"text": "hi"}
        cache.close()


# ------------------------------------------------------------------------------------ the directory rule


@pytest.mark.parametrize("kind", list(STORES))
@pytest.mark.parametrize("winner", ["AGENTBENCH_CACHE_DIR", "XDG_CACHE_HOME", "HOME"])
def test_every_cache_follows_the_one_directory_rule(
    kind: str, winner: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = {
        "AGENTBENCH_CACHE_DIR": tmp_path / "mine",
        "XDG_CACHE_HOME": tmp_path / "xdg" / "agentbench",
        "HOME": tmp_path / "home" / ".cache" / "agentbench",
    }[winner]
    if winner != "AGENTBENCH_CACHE_DIR":
        monkeypatch.delenv("AGENTBENCH_CACHE_DIR")
    if winner == "HOME":
        monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == execution_cache_dir() == expected
    _write_one(kind)
    assert (expected / STORES[kind]).is_dir()
    everything = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert everything and all(expected / STORES[kind] in p.parents for p in everything)


def test_empty_variables_count_as_unset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", "")
    assert cache_dir() == tmp_path / "xdg" / "agentbench"
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    assert cache_dir() == tmp_path / "home" / ".cache" / "agentbench"


def test_store_directories_and_default_paths(tmp_path: Path) -> None:
    from agentbench.execution.cache import default_cache_path as exec_path
    from agentbench.llm.cache import default_cache_path as llm_path
    from agentbench.retrieval.embcache import default_embedding_cache_path

    root = tmp_path / "mine"
    assert exec_path() == store_dir(EXECUTIONS) == root / "executions"
    assert default_embedding_cache_path() == store_dir(EMBEDDINGS) == root / "embeddings"
    assert llm_path() == store_dir(LLM_RESPONSES) == root / "llm-responses"


def test_old_sqlite_files_are_ignored(tmp_path: Path) -> None:
    root = tmp_path / "mine"
    root.mkdir()
    for name in ("exec_cache.sqlite", "embeddings.sqlite", "llm-cache.sqlite"):
        (root / name).write_bytes(b"an old cache")
    for kind in STORES:
        _write_one(kind)
    names = ("exec_cache.sqlite", "embeddings.sqlite", "llm-cache.sqlite")
    assert all((root / name).read_bytes() == b"an old cache" for name in names)
    assert sorted(p.name for p in root.iterdir()) == sorted([*names, *STORES.values()])


# ------------------------------------------------------------------------------ unusable directories


def _open(kind: str, path: Path | None = None) -> object:
    return {"execution": ExecCache, "embedding": EmbeddingCache, "LLM response": ResponseCache}[kind](path)


def _assert_one_line(info: pytest.ExceptionInfo[ConfigError], kind: str, directory: Path) -> None:
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"cannot open the {kind} cache {directory}: ")
    assert message.endswith("set AGENTBENCH_CACHE_DIR to a writable directory")


@pytest.mark.parametrize("kind", list(STORES))
def test_a_directory_that_cannot_be_created_is_a_config_error(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(blocker / "cache"))
    with pytest.raises(ConfigError) as info:
        _open(kind)
    _assert_one_line(info, kind, blocker / "cache" / STORES[kind])
    assert "Not a directory" in str(info.value)


@pytest.mark.parametrize("kind", list(STORES))
def test_a_store_path_that_is_a_file_is_a_config_error(kind: str, tmp_path: Path) -> None:
    old = tmp_path / "old.sqlite"
    old.write_bytes(b"SQLite format 3\x00")
    with pytest.raises(ConfigError) as info:
        _open(kind, old)
    _assert_one_line(info, kind, old)


@pytest.mark.parametrize("kind", list(STORES))
def test_a_database_that_cannot_be_opened_is_a_config_error(kind: str, tmp_path: Path) -> None:
    store = tmp_path / "store"
    (store / "cache.db").mkdir(parents=True)  # diskcache's database path is taken: sqlite cannot open it
    with pytest.raises(ConfigError) as info:
        _open(kind, store)
    _assert_one_line(info, kind, store)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through permission bits")
@pytest.mark.parametrize("kind", list(STORES))
def test_a_read_only_directory_is_a_config_error(kind: str, tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "ro"
    root.mkdir()
    root.chmod(0o500)
    try:
        monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(root))
        with pytest.raises(ConfigError) as info:
            _open(kind)
        _assert_one_line(info, kind, root / STORES[kind])
    finally:
        root.chmod(0o700)


_READ_ONLY_PROBE = """
import sys
from agentbench.llm.cache import ResponseCache
from agentbench.errors import ConfigError
from agentbench.execution.cache import ExecCache
from agentbench.retrieval.embcache import EmbeddingCache
for kind in (ExecCache, EmbeddingCache, ResponseCache):
    try:
        kind()
    except ConfigError as exc:
        print(exc)
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare")
def test_a_read_only_file_system_is_a_config_error(tmp_path: Path) -> None:
    """As root, permission bits do not stop writes; a read-only bind mount (in a private mount namespace) does,
    for a new store and for one that already exists."""
    root = tmp_path / "ro"
    ExecCache(root / EXECUTIONS).close()  # exists before the mount; the other two do not
    script = (
        f'mount --bind "{root}" "{root}" && mount -o remount,ro,bind "{root}" || exit 77; '
        f'exec "{sys.executable}" -c "$0"'
    )
    env = {**os.environ, "AGENTBENCH_CACHE_DIR": str(root)}
    out = subprocess.run(
        ["unshare", "--mount", "sh", "-c", script, _READ_ONLY_PROBE],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if out.returncode == 77:
        pytest.skip(f"cannot mount read-only here: {out.stderr.strip()}")
    lines = out.stdout.splitlines()
    assert len(lines) == 3, out.stderr
    for line, kind in zip(lines, STORES, strict=True):
        assert line.startswith(f"cannot open the {kind} cache {root / STORES[kind]}: ")
        assert line.endswith("; set AGENTBENCH_CACHE_DIR to a writable directory")
    assert "Read-only file system" in lines[1] and "Read-only file system" in lines[2]


def test_the_message_names_the_directory_and_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(blocker))
    with pytest.raises(ConfigError) as info:
        ExecCache()
    assert str(info.value) == (
        f"cannot open the execution cache {blocker / 'executions'}: Not a directory; "
        "set AGENTBENCH_CACHE_DIR to a writable directory"
    )


# ------------------------------------------------------------------------------------------ the layer


def test_json_values_and_tuple_keys_round_trip(tmp_path: Path) -> None:
    value = {"text": "é \udcff", "n": [1, 2.5, None, True], "big": "x" * 100_000}
    with JSONCache(tmp_path / "s") as store:
        store.set(("a", "b"), value)
        store.set("plain", [1])
        assert store.set_many([(("k", str(i)), i) for i in range(3)]) == 3
        assert store.set_many([]) == 0
    with JSONCache(tmp_path / "s") as store:
        assert store.get(("a", "b")) == value and store.get("plain") == [1]
        assert store.get(("a", "c")) is None and store.get(("a", "c"), "default") == "default"
        assert store.get_many([("k", "0"), ("k", "9"), ("k", "2")]) == {("k", "0"): 0, ("k", "2"): 2}
        assert dict(store.items()) == {
            ("a", "b"): value,
            "plain": [1],
            **{("k", str(i)): i for i in range(3)},
        }
        assert len(store) == 5


def test_values_are_json_text_never_pickles(tmp_path: Path) -> None:
    with JSONCache(tmp_path / "s") as store:
        store.set(("code", "tests"), {"results": ["pass"]})
        with pytest.raises(TypeError):
            store.set("k", {1, 2})  # not JSON: refused rather than pickled
        assert len(store) == 1
    with sqlite3.connect(tmp_path / "s" / "cache.db") as db:
        rows = db.execute("SELECT key, raw, mode, value FROM Cache").fetchall()
    assert rows == [('["code","tests"]', 1, diskcache.core.MODE_RAW, '{"results":["pass"]}')]


def test_rows_written_by_other_code_are_misses(tmp_path: Path) -> None:
    with diskcache.Cache(str(tmp_path / "s")) as foreign:  # the default Disk pickles these
        foreign.set(("a", "b"), {"x": 1})
        foreign.set("k", {1, 2})
    with JSONCache(tmp_path / "s") as store:
        assert store.get("k") is None and store.get(("a", "b")) is None
        store.set("mine", 1)
        assert dict(store.items()) == {"mine": 1}


def test_threads_share_one_cache_object(tmp_path: Path) -> None:
    with JSONCache(tmp_path / "s") as store:

        def work(t: int) -> None:
            for i in range(50):
                store.set_many([((str(t), str(i), "a"), i), ((str(t), str(i), "b"), -i)])
                assert store.get((str(t), str(i), "a")) == i

        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(store) == 8 * 50 * 2


# ------------------------------------------------------------------------------------------- processes


def _exec_writer(path: str, prefix: str, start: multiprocessing.synchronize.Event) -> None:
    start.wait(30)
    with ExecCache(path) as cache:
        for i in range(100):
            shared = (f"shared{i}", "t", "cfg")  # the other writer stores the same verdict
            mine = (f"{prefix}{i}", "t", "cfg")
            cache.put_many(
                [(shared, ExecResult(["pass"])), (mine, ExecResult([prefix, str(i)], stdout=prefix))]
            )
            assert cache.get_many([mine])[mine].results == [prefix, str(i)]


def _embedding_writer(path: str, prefix: str, start: multiprocessing.synchronize.Event) -> None:
    start.wait(30)
    with EmbeddingCache(path) as cache:
        for i in range(100):
            texts = [f"shared {i}", f"{prefix} {i}"]
            cache.put_many("cfg", "document", texts, np.array([[i, 0.5], [i, ord(prefix)]], dtype=np.float32))


def _llm_writer(path: str, prefix: str, start: multiprocessing.synchronize.Event) -> None:
    start.wait(30)
    cache = ResponseCache(path)
    for i in range(100):
        cache.put(f"shared{i}", "m", {"text": f"shared {i}"})
        cache.put(f"{prefix}{i}", "m", {"text": f"{prefix} {i}"})
    cache.close()


WRITERS = {"execution": _exec_writer, "embedding": _embedding_writer, "LLM response": _llm_writer}


@pytest.mark.parametrize("kind", list(STORES))
def test_two_processes_writing_at_once_lose_nothing(kind: str, tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=WRITERS[kind], args=(path, p, start)) for p in ("a", "b")]
    for p in procs:
        p.start()
    start.set()  # both begin together, so their transactions interleave
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    if kind == "execution":
        with ExecCache(path) as cache:
            assert len(cache) == 300
            keys = [(f"{p}{i}", "t", "cfg") for p in ("a", "b", "shared") for i in range(100)]
            found = cache.get_many(keys)
            assert set(found) == set(keys)
            assert all(found[(f"a{i}", "t", "cfg")].results == ["a", str(i)] for i in range(100))
            assert found[("b7", "t", "cfg")].stdout == "b"
    elif kind == "embedding":
        with EmbeddingCache(path) as cache:
            assert len(cache) == 300
            texts = [f"{p} {i}" for p in ("a", "b", "shared") for i in range(100)]
            vectors = cache.get_many("cfg", "document", texts)
            assert sorted(vectors) == list(range(300))
            assert vectors[5].tolist() == [5.0, float(ord("a"))] and vectors[250].tolist() == [50.0, 0.5]
    else:
        cache = ResponseCache(path)
        assert len(cache) == 300
        for p in ("a", "b", "shared"):
            assert all(cache.get(f"{p}{i}") == {"text": f"{p} {i}"} for i in range(100))
        cache.close()


def _endless_writer(path: str) -> None:
    with JSONCache(path) as store:
        batch = 0
        while True:
            store.set_many(
                [((str(batch), str(i)), {"batch": batch, "i": i, "pad": "x" * 500}) for i in range(10)]
            )
            batch += 1


def test_a_killed_writer_leaves_whole_batches_and_a_usable_store(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    JSONCache(path).close()
    proc = multiprocessing.get_context("spawn").Process(target=_endless_writer, args=(path,))
    proc.start()
    try:
        deadline = time.time() + 60
        with JSONCache(path) as watcher:
            while len(watcher) < 200 and time.time() < deadline:
                time.sleep(0.01)
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # mid-transaction, most likely
        proc.join(30)
    with JSONCache(path) as store:
        entries = dict(store.items())
        assert len(store) == len(entries) >= 200
        batches: dict[str, int] = {}
        for (batch, i), value in entries.items():
            assert value == {"batch": int(batch), "i": int(i), "pad": "x" * 500}
            batches[batch] = batches.get(batch, 0) + 1
        assert set(batches.values()) == {10}, "a batch is stored whole or not at all"
        assert sorted(int(b) for b in batches) == list(range(len(batches)))
        store.set(("after", "kill"), 1)  # and the store takes writes again
        assert store.get(("after", "kill")) == 1


def test_responses_are_stored_as_json(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "r")
    cache.put("k", "gpt-x", {"text": "hello", "cost_usd": 0.5})
    cache.close()
    with sqlite3.connect(tmp_path / "r" / "cache.db") as db:
        ((key, value),) = db.execute("SELECT key, value FROM Cache").fetchall()
    assert key == '"k"' and json.loads(value)["model"] == "gpt-x"
    assert json.loads(value)["value"] == {"text": "hello", "cost_usd": 0.5}
