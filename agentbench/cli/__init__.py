"""Command-line interface: a thin layer that parses options and calls the stage APIs."""

from __future__ import annotations

import sys

import typer

from ..errors import AgentbenchError
from . import check, compare, pool, report, retrieve, run, sandbox

__all__ = ["app", "main"]

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


def main() -> None:
    """Entry point: user-facing errors become one line on stderr and exit code 2."""
    try:
        rc = app(standalone_mode=False)
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except AgentbenchError as exc:
        print(f"agentbench: error: {exc}", file=sys.stderr)
        sys.exit(2)
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
