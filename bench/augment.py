"""Time and effect of ``pool augment`` on the bundled pools, cold (empty execution cache) and warm.

    python bench/augment.py [--pool humaneval --pool core] [--inputs 200] [--sandbox auto] [--limit N]
                            [--held-out-seed N]

Each pool is augmented twice through the same executor: first with an execution cache that starts empty
(``cold``: every canonical probe and mutant runs in the sandbox), then again with that cache (``warm``:
every verdict is a cache hit, what rebuilding a pool after an unrelated change costs). The pools are read,
never written: the augmented copies go to a temporary directory. Prints, per pool and in total, the tasks,
the surviving non-equivalent mutants before and after (and the reduction), the dropped inputs, both wall
times and ``warm_vs_cold``, plus the load average (a busy machine slows the cold pass). With
``--held-out-seed``, the augmented asserts are then scored on inputs drawn with that seed
(:mod:`agentbench.pools.augment.heldout`): ``held_out_reduction`` is the share of the surviving mutants
those fresh inputs show non-equivalent that the augmented asserts kill (not timed).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", action="append", help="Pool to augment (repeatable; default humaneval).")
    parser.add_argument("--inputs", type=int, default=200, help="Generated inputs per task.")
    parser.add_argument("--sandbox", default="auto", help="Executor: auto, docker or process.")
    parser.add_argument("--workers", type=int, default=None, help="Sandbox workers (default: cores).")
    parser.add_argument("--limit", type=int, default=None, help="Only the first N tasks of each pool.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--held-out-seed", type=int, default=None, help="Also score the added asserts on this seed's inputs."
    )
    parser.add_argument(
        "--keep", type=Path, default=None, help="Write the augmented pools under this directory."
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="agentbench-augment-") as tmp:
        return _bench(args, Path(tmp))


def _bench(args: argparse.Namespace, root: Path) -> int:
    os.environ["AGENTBENCH_CACHE_DIR"] = str(root / "cache")  # cold: a cache nobody has filled

    from agentbench.execution import ExecCache, make_executor, run_cached
    from agentbench.pools import load_pool, write_pool
    from agentbench.pools.augment import augment_pool
    from agentbench.pools.augment.heldout import held_out

    totals = {
        "cold": 0.0,
        "warm": 0.0,
        "before": 0,
        "after": 0,
        "tasks": 0,
        "held_before": 0,
        "held_after": 0,
    }
    with (
        make_executor(args.sandbox, args.workers) as executor,
        ExecCache(root / "cache" / "executions") as cache,
    ):

        def run(jobs):  # noqa: ANN001, ANN202
            return run_cached(executor, jobs, cache)

        for name in args.pool or ["humaneval"]:
            pool = load_pool(name)
            if args.limit:
                pool = pool.only(pool.queries[: args.limit])
            times = {}
            for label in ("cold", "warm"):
                start = time.perf_counter()
                augmented, report = augment_pool(pool, run, seed=args.seed, inputs=args.inputs)
                times[label] = time.perf_counter() - start
            s = report.summary()
            if args.keep:
                write_pool(augmented, args.keep / name)
            totals["cold"] += times["cold"]
            totals["warm"] += times["warm"]
            totals["before"] += s["surviving_non_equivalent_before"]
            totals["after"] += s["surviving_non_equivalent_after"]
            totals["tasks"] += s["tasks"]
            print(
                f"{name}: tasks={s['tasks']} augmented={s['tasks_augmented']} inputs={s['inputs']} "
                f"usable={s['usable_inputs']} added_asserts={s['added_asserts']} mutants={s['mutants']} "
                f"surviving_non_equivalent={s['surviving_non_equivalent_before']}->"
                f"{s['surviving_non_equivalent_after']} reduction={s['reduction']} "
                f"mutation_score={s['mutation_score_before']}->{s['mutation_score_after']} "
                f"dropped={s['dropped_inputs']}",
                flush=True,
            )
            print(
                f"{name}: cold={times['cold']:.1f}s warm={times['warm']:.1f}s "
                f"warm_vs_cold={times['warm'] / max(times['cold'], 1e-9):.3f}",
                flush=True,
            )
            if args.held_out_seed is not None:
                h = held_out(augmented, run, seed=args.held_out_seed, inputs=args.inputs).summary()
                totals["held_before"] += h["held_out_non_equivalent_before"]
                totals["held_after"] += h["held_out_non_equivalent_after"]
                print(
                    f"{name}: held_out_seed={args.held_out_seed} held_out_non_equivalent="
                    f"{h['held_out_non_equivalent_before']}->{h['held_out_non_equivalent_after']} "
                    f"held_out_reduction={h['held_out_reduction']}",
                    flush=True,
                )
    before, after = totals["before"], totals["after"]
    print(
        f"total: tasks={totals['tasks']} surviving_non_equivalent={before}->{after} "
        f"reduction={(1 - after / before) if before else float('nan'):.3f} cold={totals['cold']:.1f}s "
        f"warm={totals['warm']:.1f}s warm_vs_cold={totals['warm'] / max(totals['cold'], 1e-9):.3f} "
        f"loadavg={os.getloadavg()[0]:.1f} cores={os.cpu_count()}"
    )
    if args.held_out_seed is not None:
        hb, ha = totals["held_before"], totals["held_after"]
        print(
            f"held_out: surviving_non_equivalent={hb}->{ha} held_out_reduction={(1 - ha / hb) if hb else float('nan'):.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
