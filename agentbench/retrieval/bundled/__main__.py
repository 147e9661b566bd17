"""``python -m agentbench.retrieval.bundled [--pool NAME] [--check]``: regenerate (or check) the vectors
shipped for the bundled pools; see :mod:`agentbench.retrieval.bundled`."""

from __future__ import annotations

import argparse
import sys

from . import SHIPPED_POOLS, load
from .build import build, problems, verify


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentbench.retrieval.bundled", description=__doc__)
    parser.add_argument(
        "--pool",
        action="append",
        choices=sorted(SHIPPED_POOLS),
        help="default: every pool whose vectors ship",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="only check that the files cover the pools and rank as verified (exit 1 if not)",
    )
    args = parser.parse_args(argv)
    failed = False
    for name in args.pool or list(SHIPPED_POOLS):
        if args.check:
            found = problems(name) or verify(name)
            failed |= bool(found)
            print("\n".join(found) or f"{name}: ok")
        else:
            path = build(name)
            shipped = load(path)
            kept = shipped.meta.get("selection", {}) if shipped is not None else {}
            exact = f", {kept['exact_rows']} rows exact, the rest int16" if kept else ""
            print(f"{name}: wrote {path} ({path.stat().st_size:,} bytes{exact})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
