"""The installed llama-cpp-python is the portable build: nothing beyond AVX2 (no AVX-512, no AMX), so it
runs on every x86-64 CPU with AVX2 whatever the build host advertised."""

from __future__ import annotations

import importlib.util
import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from agentbench.llm.local import PORTABLE_CMAKE_ARGS, rebuild_command

from .test_readme import _readme_commands

# AVX-512 uses zmm registers, mask registers and xmm/ymm16-31; AMX uses tile instructions
BEYOND_AVX2 = re.compile(
    r"%zmm\d|%k[1-7]\b|%[xy]mm(1[6-9]|2\d|3[01])\b|\b(tilezero|tileloadd\w*|tilestored|tdpb\w+|ldtilecfg)\b"
)


def _libraries() -> list[Path]:
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        pytest.skip("llama-cpp-python is not installed")
    return sorted(p for p in Path(spec.origin).parent.rglob("*.so*") if p.is_file() and not p.is_symlink())


def _beyond_avx2(lib: Path) -> list[str]:
    objdump = shutil.which("objdump")
    assert objdump, "objdump (binutils) is needed to inspect the llama.cpp libraries"
    out = subprocess.run(
        [objdump, "-d", "--no-show-raw-insn", str(lib)], capture_output=True, text=True, check=True
    ).stdout
    return [line.strip() for line in out.splitlines() if BEYOND_AVX2.search(line)]


x86_only = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86-64 instructions")


@x86_only
def test_installed_llama_cpp_uses_nothing_beyond_avx2() -> None:
    libraries = _libraries()
    assert any("ggml" in p.name for p in libraries), libraries
    offending = {lib.name: hits[:3] for lib in libraries if (hits := _beyond_avx2(lib))}
    assert not offending, (
        f"instructions beyond AVX2 (a native build?); rebuild with: {rebuild_command()}\n{offending}"
    )


@x86_only
def test_the_check_sees_avx512_code(tmp_path: Path) -> None:
    """The check above can fail: a loop compiled for AVX-512 is caught, the same loop for AVX2 is not."""
    source = tmp_path / "axpy.c"
    source.write_text(
        "void axpy(float *restrict y, const float *restrict x, float a, int n) {\n"
        "    for (int i = 0; i < n; i++) y[i] += a * x[i];\n}\n"
    )
    found = {}
    for name, flags in {
        "avx512": ["-mavx512f", "-mprefer-vector-width=512"],
        "avx2": ["-mavx2", "-mfma"],
    }.items():
        lib = tmp_path / f"lib{name}.so"
        subprocess.run(["cc", "-O3", "-shared", "-fPIC", *flags, "-o", str(lib), str(source)], check=True)
        found[name] = _beyond_avx2(lib)
    assert found["avx512"] and not found["avx2"], found


def test_the_readme_installs_with_the_portable_flags_and_no_wheel_cache() -> None:
    for command in _readme_commands():
        assert f"CMAKE_ARGS='{PORTABLE_CMAKE_ARGS}'" in command
        assert "--no-cache-dir" in command  # a wheel built natively earlier is never reused
    assert "-DGGML_NATIVE=OFF" in PORTABLE_CMAKE_ARGS and "AVX512" not in PORTABLE_CMAKE_ARGS


def test_rebuild_command_names_the_installed_version() -> None:
    import importlib.metadata as md

    try:
        version = md.version("llama-cpp-python")
    except md.PackageNotFoundError:
        pytest.skip("llama-cpp-python is not installed")
    command = rebuild_command()
    assert f"llama-cpp-python=={version}" in command and "--force-reinstall" in command
    assert "--no-cache-dir" in command and PORTABLE_CMAKE_ARGS in command
