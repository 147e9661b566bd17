"""Command-line interface: a thin layer that parses options and calls the stage APIs.

Library code reports through :mod:`logging` (loggers under ``agentbench``); the CLI decides what to print:
records at INFO and above, one line each on stderr, as ``agentbench: <message>``.
"""

from __future__ import annotations

import signal
import sys
import threading

import typer

from .._env import prepare_environment
from ..errors import AgentbenchError, Interrupted
from ..logs import StderrLineHandler, log_to_stderr
from . import check, compare, plan, pool, report, retrieve, run, sandbox, workers

__all__ = ["app", "main", "StderrLineHandler", "log_to_stderr"]

app = typer.Typer(
    name="agentbench",
    help="Evaluate retrieval-augmented coding agents on execution-verified code pools.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(pool.app, name="pool")
app.add_typer(sandbox.app, name="sandbox")
app.command("retrieve")(retrieve.retrieve)
app.command("run")(run.run)
app.command("report")(report.report)
app.command("compare")(compare.compare)
app.command("check")(check.check)
app.command("plan")(plan.plan)
app.command("workers")(workers.workers)


def main() -> None:
    """Entry point: user-facing errors become one line on stderr and exit code 2."""
    prepare_environment()  # the offline defaults, before any command imports a heavy library
    main_thread = threading.current_thread() is threading.main_thread()
    # a stopped CI job or `kill`: the same clean stop as Ctrl-C (records kept, one line, jobs killed)
    previous = signal.signal(signal.SIGTERM, _terminate) if main_thread else None
    try:
        with log_to_stderr():
            _main()
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _main() -> None:
    try:
        rc = app(standalone_mode=False)
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except Interrupted as exc:
        print(f"agentbench: interrupted: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except AgentbenchError as exc:
        print(f"agentbench: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        print("agentbench: aborted", file=sys.stderr)
        sys.exit(130)
    except KeyboardInterrupt:
        print("agentbench: interrupted", file=sys.stderr)
        sys.exit(130)
    except typer.TyperException as exc:  # usage errors (bad flag, bad value) from typer's click
        exc.show()  # type: ignore[attr-defined]
        sys.exit(2)
