"""`agentbench compare`: paired statistics between runs (or retrieval results files) on shared queries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from .check import OutputFormat


def _f(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def compare(
    sources: Annotated[
        list[Path],
        typer.Argument(
            help="Run directories, retrieval results files (agentbench retrieve --out) or directories of them; "
            "the first is the baseline."
        ),
    ],
    seed: Annotated[int, typer.Option(help="Seed of the paired bootstrap.")] = 0,
    resamples: Annotated[int, typer.Option(min=100, help="Bootstrap resamples.")] = 5000,
    output_format: Annotated[
        OutputFormat, typer.Option("--format", help="table or json (on stdout).")
    ] = OutputFormat.table,
) -> None:
    """Compare runs on the queries they share: difference, exact McNemar p and paired-bootstrap 95% CI."""
    from ..analysis.compare import compare_sources, format_p, load_sources

    loaded = load_sources(sources)
    rows = compare_sources(loaded, seed=seed, n_resamples=resamples)
    if output_format is OutputFormat.json:
        data = {
            "baseline": loaded[0].name,
            "seed": seed,
            "n_resamples": resamples,
            "comparisons": [r.to_dict() for r in rows],
        }
        typer.echo(json.dumps(data, indent=2))
        return
    console = Console()
    for other in loaded[1:]:
        table = Table(
            title=f"{other.name} compared with {loaded[0].name}",
            box=box.SIMPLE_HEAD,
            caption="on shared queries; diff = other - base; disc. = queries only the base / only the other gets "
            "right (for retrieval_induced_failures/_rescues: counts as one); p = exact McNemar; CI = paired "
            "bootstrap (seeded); retrieval_induced_failures: lower is better",
        )
        for col in ("metric", "n", "base", "other", "diff", "95% CI", "disc.", "p"):
            table.add_column(col, justify="left" if col == "metric" else "right", no_wrap=True)
        for r in (r for r in rows if r.other == other.name):
            ci = f"[{r.ci95[0]:+.2f}, {r.ci95[1]:+.2f}]" if r.ci95 else "-"
            table.add_row(
                r.metric,
                str(r.n),
                _f(r.baseline_rate),
                _f(r.other_rate),
                _f(r.difference, signed=True),
                ci,
                f"{r.baseline_only}/{r.other_only}",
                format_p(r.p_value),
                style="bold" if r.p_value is not None and r.p_value < 0.05 else None,
            )
        console.print(table)
