"""The whole shipped `core` pool against what its sources build, byte for byte.

    python bench/core_rebuild.py [--cache-dir DIR]

The test suite rebuilds two domains (tests/test_core_pool.py); this rebuilds all ten, as a release check,
with an empty cache by default (about 16 minutes on 2 cores: every mutant of every task is executed). It
prints, for each file, whether the rebuilt one is identical, and ``whole_vs_two_domains``: the whole
build's wall time over the two-domain build's, measured in the same run. Exit code 1 when a file differs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentbench.pools.io import CORE_POOL_DIR, CORE_SOURCES_DIR  # noqa: E402

FILES = ("queries.jsonl", "corpus.jsonl", "distractor_metadata.jsonl")


def build(sources: Path, out: Path, cache: Path) -> float:
    """Wall seconds of ``agentbench pool build --from sources --out out`` with its own cache."""
    env = {**os.environ, "AGENTBENCH_CACHE_DIR": str(cache)}
    argv = [sys.executable, "-m", "agentbench", "pool", "build", "--from", str(sources), "--out", str(out)]
    argv.append("--no-top-up")  # core v4 was built before the top-up rule (see docs/pools.md)
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache-dir", type=Path, help="reuse this cache (default: an empty one per build)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        part = tmp_path / "two"
        part.mkdir()
        for domain in ("geometry", "validation"):
            (part / f"{domain}.toml").write_bytes((CORE_SOURCES_DIR / f"{domain}.toml").read_bytes())
        two = build(part, tmp_path / "two-out", args.cache_dir or tmp_path / "cache-two")
        whole = build(CORE_SOURCES_DIR, tmp_path / "core", args.cache_dir or tmp_path / "cache-whole")
        differ = [
            n for n in FILES if (tmp_path / "core" / n).read_bytes() != (CORE_POOL_DIR / n).read_bytes()
        ]
    for name in FILES:
        print(f"{name}: {'differs' if name in differ else 'identical'}")
    print(f"whole build {whole:.0f} s, two domains {two:.0f} s")
    print(f"whole_vs_two_domains={whole / two:.2f}")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
