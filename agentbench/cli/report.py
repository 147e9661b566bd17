"""`agentbench report`: the terminal summary of a run and, with --html, its self-contained HTML report."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from .options import check_output_file


class ReportFormat(StrEnum):
    table = "table"
    json = "json"
    github = "github"


def report(
    run_dir: Annotated[Path, typer.Argument(help="Run directory written by `agentbench run`.")],
    html: Annotated[
        Path | None, typer.Option("--html", help="Write a self-contained HTML report to this file.")
    ] = None,
    pool: Annotated[
        str | None, typer.Option(help="Pool to show snippets and asserts from (default: the run's pool).")
    ] = None,
    output_format: Annotated[
        ReportFormat,
        typer.Option(
            "--format",
            help="table; json: summary.json on stdout; github: compact markdown for a job summary or a "
            "pull-request comment.",
        ),
    ] = ReportFormat.table,
    checks: Annotated[
        Path | None,
        typer.Option(
            "--checks",
            help="With --format github: the saved output of `agentbench check --format json`, to add the "
            "gate verdicts.",
        ),
    ] = None,
) -> None:
    """Summarise a run in the terminal and, with --html, write its HTML report (plots, per-query browser)."""
    from ..analysis.compare import load_run
    from ..analysis.html import write_html
    from ..analysis.markdown import github_markdown, read_checks
    from ..analysis.terminal import print_run_details, print_summary
    from ..errors import ConfigError

    if html is not None:  # before reading and rendering the run: a bad path fails at once
        check_output_file(html, "--html")
    if checks is not None and output_format is not ReportFormat.github:
        raise ConfigError("--checks adds gate verdicts to the markdown: use it with --format github")
    gates = read_checks(checks) if checks is not None else None
    run = load_run(run_dir)
    if output_format is ReportFormat.json:
        typer.echo(json.dumps(run.summary.to_json_dict(), indent=2))
    elif output_format is ReportFormat.github:
        typer.echo(github_markdown(run.summary, gates))
    else:
        print_summary(run.summary)
        print_run_details(run.summary, run.records)
    if html is not None:
        out = write_html(run, html, pool=pool)
        typer.echo(f"wrote {out}", err=output_format is not ReportFormat.table)
    elif output_format is ReportFormat.table:
        typer.echo("write the HTML report with --html PATH")
