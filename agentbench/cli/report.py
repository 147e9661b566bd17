"""`agentbench report`: the terminal summary of a run and, with --html, its self-contained HTML report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from .check import OutputFormat
from .options import check_output_file


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _details(summary: dict, records: list, console: Console) -> None:
    from ..analysis.html import propagation_counts

    counts = propagation_counts(records)
    if counts:
        table = Table(title="rag: top-1 retrieved → generated code")
        for col in ("top-1 snippet", "passed", "failed", "pass rate"):
            table.add_column(col, justify="left" if col == "top-1 snippet" else "right")
        for cat, (p, f) in counts.items():
            table.add_row(cat, str(p), str(f), _f(p / (p + f)))
        console.print(table)
    by_bug = summary.get("propagation", {}).get("by_bug_type", {})
    if by_bug:
        table = Table(title="buggy context by bug type")
        for col in ("bug type", "n", "repair rate", "bug inheritance"):
            table.add_column(col, justify="left" if col == "bug type" else "right")
        for name, b in by_bug.items():
            table.add_row(name, str(b["n"]), _f(b.get("repair_rate")), _f(b.get("bug_inheritance_rate")))
        console.print(table)
    by_domain = summary.get("by_domain", {})
    retr = summary.get("retrieval", {}).get("diagnostics", {}).get("by_domain", {})
    conds = list(summary.get("conditions", {}))
    if by_domain or retr:
        table = Table(title="by domain (pass rates)")
        table.add_column("domain")
        table.add_column("exec@1", justify="right")
        for c in conds:
            table.add_column(c, justify="right")
        for d in sorted(set(by_domain) | set(retr)):
            cells = [_f(by_domain.get(d, {}).get(c, {}).get("pass_rate")) for c in conds]
            table.add_row(d, _f(retr.get(d, {}).get("exec@1")), *cells)
        console.print(table)


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
    from ..analysis import print_summary
    from ..analysis.compare import load_run
    from ..analysis.html import write_html

    if html is not None:  # before reading and rendering the run: a bad path fails at once
        check_output_file(html, "--html")
    run = load_run(run_dir)
    if output_format is OutputFormat.json:
        typer.echo(json.dumps(run.summary.to_json_dict(), indent=2))
    else:
        console = Console()
        print_summary(run.summary, console)
        _details(run.summary, run.records, console)
    if html is not None:
        out = write_html(run, html, pool=pool)
        typer.echo(f"wrote {out}", err=output_format is OutputFormat.json)
    elif output_format is OutputFormat.table:
        typer.echo("write the HTML report with --html PATH")
