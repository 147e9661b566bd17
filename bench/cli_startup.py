"""Start-up time of ``agentbench --help`` (and each command's ``--help``) against a bare interpreter.

    python bench/cli_startup.py [--repeat 7] [--all]

Runs ``python -c pass`` and ``python -m agentbench --help`` alternately, ``--repeat`` times each, in
fresh processes, and prints the medians and their ratio ``cli_help_vs_python=<ratio>``: the ratio is
what the CLI adds, measured in the same run so that a busy or slow machine scales both. With ``--all``,
every command's and subcommand's ``--help`` (discovered from the typer app) is timed too. Target: every
help within 1 s (issue 33); exit code 1 when one is slower. The load average is printed because a busy
machine slows every number. Which modules a help may import is checked in tests/test_cli_startup.py.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 1.0


def wall(argv: list[str]) -> float:
    """Wall time of one run of ``argv`` (in the repository, output discarded); it must exit 0."""
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def command_paths() -> list[tuple[str, ...]]:
    """Every command path of the CLI, top level first."""
    import typer.main

    from agentbench.cli import app

    def walk(command: object, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
        paths = [prefix]
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            paths += walk(sub, (*prefix, name))
        return paths

    return walk(typer.main.get_command(app), ())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="Runs of each command (the median is kept).")
    parser.add_argument("--all", action="store_true", help="Also time every command's --help.")
    args = parser.parse_args()

    python = [sys.executable]
    paths = command_paths() if args.all else [()]
    times: dict[tuple[str, ...], list[float]] = {path: [] for path in paths}
    bare: list[float] = []
    wall([*python, "-m", "agentbench", "--help"])  # warm the file-system cache and the .pyc files
    for _ in range(args.repeat):
        bare.append(wall([*python, "-c", "pass"]))
        for path in paths:
            times[path].append(wall([*python, "-m", "agentbench", *path, "--help"]))

    base = statistics.median(bare)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    print(f"python -c pass: {base:.3f} s (median of {args.repeat})")
    slow = []
    for path, values in times.items():
        median = statistics.median(values)
        name = " ".join(("agentbench", *path))
        print(f"{name} --help: {median:.3f} s ({median / base:.1f}x python -c pass)")
        if median > TARGET_S:
            slow.append(name)
    help_s = statistics.median(times[()])
    print(f"cli_help_vs_python={help_s / base:.2f}")
    if slow:
        print(f"slower than {TARGET_S:.0f} s: {', '.join(slow)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
