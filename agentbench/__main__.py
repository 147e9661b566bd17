"""``python -m agentbench`` and the ``agentbench`` command.

The command's modules take a quarter of a second to import. ``agentbench run`` against one API model at
high concurrency starts its LiteLLM worker processes (:mod:`agentbench.llm.processes`) first, so their own
start (importing LiteLLM: seconds) overlaps those imports and the run's set-up. At exit the heap is
frozen (:func:`agentbench.heap.freeze_at_exit`).
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["main"]


class _Unclear(Exception):
    pass


class _Peek(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _Unclear(message)  # the command itself reports it


def start_llm_workers(argv: list[str]) -> None:
    """Start the worker processes an ``agentbench run`` command line will use, when it says so plainly:
    one ``--llm``, no ``--agent``, and ``--concurrency`` or ``--llm-processes`` given. Anything else is
    left to the command, which starts them itself after its imports; a command that then fails a check
    stops them at exit."""
    if not argv or argv[0] != "run" or any(a in ("--help", "-h") for a in argv):
        return
    parser = _Peek(add_help=False, allow_abbrev=False)
    parser.add_argument("--llm", action="append", default=[])
    parser.add_argument("--agent", action="append", default=[])
    parser.add_argument("--concurrency", type=int)
    parser.add_argument("--llm-processes", type=int)
    try:
        known, _ = parser.parse_known_args(argv[1:])
    except _Unclear:
        return
    if len(known.llm) != 1 or known.agent or (known.concurrency is None and known.llm_processes is None):
        return
    from .errors import AgentbenchError
    from .llm._litellm import in_process_provider
    from .llm.processes import process_pool, worker_count

    try:
        count = worker_count(known.concurrency or 1, known.llm_processes)
        if count > 0 and not in_process_provider(known.llm[0]):  # as the run's client will decide
            process_pool(count)  # the client finds it started
    except AgentbenchError:  # a setting the command reports itself (AGENTBENCH_KEEP_WORKERS)
        return


def main() -> None:
    from .heap import freeze_at_exit

    freeze_at_exit()
    from ._env import prepare_environment
    from .logs import log_to_stderr

    prepare_environment()  # as the CLI will: workers started now must serve the same environment
    with log_to_stderr():
        start_llm_workers(sys.argv[1:])
    from .cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
