"""`pool mine` on real packages: discovery time and sandbox time, separately, and what was mined.

For each SRC (a project directory or an sdist archive, e.g. from
``pip download --no-deps --no-binary :all: more-itertools``): the lines of Python read, the discovery time
(files, functions, every assert read and classified, code assembled: static, nothing runs), the sandbox
time (verification of every candidate assert, then the builder's canonicals and mutants), tasks verified
and the share keeping two or more distractors. With ``--out DIR`` each pool is written to
``DIR/<name>``. Ends with totals and ``discovery_s_per_10k_lines=<s>`` (the issue's bound: 60 s).

    .venv/bin/python bench/pool_mine.py SRC [SRC ...] [--sandbox auto|docker|process] [--out DIR]
        [--discovery-only] [--rounds N]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import time
from pathlib import Path

from agentbench.errors import AgentbenchError
from agentbench.execution import make_executor
from agentbench.execution.cache import ExecCache, run_cached
from agentbench.pools.mine import check_usable, discover_project, mine_pool, open_source, write_mined
from agentbench.pools.mine.source import project_files


def _name(src: Path) -> str:
    return re.sub(r"(\.tar\.gz|\.tgz|\.zip|\.tar\.bz2|\.tar\.xz|\.tar)$", "", src.name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", nargs="+", type=Path)
    ap.add_argument("--sandbox", default="auto")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--out", type=Path, default=None, help="write each pool to OUT/<name>")
    ap.add_argument("--discovery-only", action="store_true", help="time discovery only (no sandbox)")
    ap.add_argument("--rounds", type=int, default=1, help="discovery rounds per source (the minimum is kept)")
    args = ap.parse_args()

    totals = {"lines": 0, "discovery_s": 0.0, "sandbox_s": 0.0, "tasks": 0, "two_plus": 0}
    executor = None if args.discovery_only else make_executor(args.sandbox, args.workers)
    try:
        for src in args.src:
            name = _name(src)
            with open_source(src) as root:
                lines = sum(
                    len(f.path.read_text(encoding="utf-8", errors="replace").splitlines())
                    for f in project_files(root)
                )
                best = None
                for _ in range(max(1, args.rounds)):
                    began = time.perf_counter()
                    report = discover_project(root, src.name)
                    took = time.perf_counter() - began
                    best = took if best is None else min(best, took)
                assert best is not None
                row = {"source": name, "python_lines": lines, "discovery_s": round(best, 2)}
                if executor is not None:
                    try:
                        check_usable(report)
                        cache = ExecCache()
                        began = time.perf_counter()
                        pool, report = mine_pool(
                            root,
                            lambda jobs, c=cache: run_cached(executor, jobs, c),
                            name=name,
                            report=report,
                        )
                        row["sandbox_s"] = round(time.perf_counter() - began, 1)
                        s = report.summary()
                        row |= {
                            "tasks": s["tasks"],
                            "tasks_2plus_distractors": s["tasks_with_2_or_more_distractors"],
                            "share_2plus": s["share_with_2_or_more_distractors"],
                            "asserts_kept": s["asserts_kept"],
                            "other_snippets": s["other_snippets"],
                        }
                        totals["sandbox_s"] += row["sandbox_s"]
                        totals["tasks"] += s["tasks"]
                        totals["two_plus"] += s["tasks_with_2_or_more_distractors"]
                        if args.out is not None:
                            write_mined(pool, report, args.out / name)
                    except AgentbenchError as exc:
                        row["error"] = str(exc)
                totals["lines"] += lines
                totals["discovery_s"] += best
                print(json.dumps(row), flush=True)
    finally:
        if executor is not None:
            executor.close()
    print(f"python_lines={totals['lines']}")
    print(f"discovery_s={totals['discovery_s']:.2f}")
    print(f"discovery_s_per_10k_lines={totals['discovery_s'] / max(totals['lines'], 1) * 10_000:.2f}")
    if executor is not None:
        share = totals["two_plus"] / totals["tasks"] if totals["tasks"] else 0.0
        print(f"sandbox_s={totals['sandbox_s']:.1f}")
        print(f"tasks={totals['tasks']}")
        print(f"share_with_2plus_distractors={share:.3f}")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
