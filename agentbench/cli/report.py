"""`agentbench report`: the terminal summary of a run and, with --html, its self-contained HTML report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from .check import OutputFormat
from .options import check_output_file


def report(
    run_dir: Annotated[Path, typer.Argument(help="Run directory written by `agentbench run`.")],
    html: Annotated[
        Path | None, typer.Option("--html", help="Write a self-contained HTML report to this file.")
    ] = None,
    pool: Annotated[
        str | None, typer.Option(help="Pool to show snippets and asserts from (default: the run's pool).")
    ] = None,
    output_format: Annotated[
        OutputFormat, typer.Option("--format", help="table, or json: summary.json on stdout.")
    ] = OutputFormat.table,
) -> None:
    """Summarise a run in the terminal and, with --html, write its HTML report (plots, per-query browser)."""
    from ..analysis.compare import load_run
    from ..analysis.html import write_html
    from ..analysis.terminal import print_run_details, print_summary

    if html is not None:  # before reading and rendering the run: a bad path fails at once
        check_output_file(html, "--html")
    run = load_run(run_dir)
    if output_format is OutputFormat.json:
        typer.echo(json.dumps(run.summary.to_json_dict(), indent=2))
    else:
        print_summary(run.summary)
        print_run_details(run.summary, run.records)
    if html is not None:
        out = write_html(run, html, pool=pool)
        typer.echo(f"wrote {out}", err=output_format is OutputFormat.json)
    elif output_format is OutputFormat.table:
        typer.echo("write the HTML report with --html PATH")
