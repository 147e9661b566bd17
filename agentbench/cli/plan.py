"""`agentbench plan`: how many queries a ``--non-inferior METRIC=MARGIN`` gate needs.

The estimate is :func:`agentbench.analysis.noninferiority.plan_queries`; this module parses options and
prints what the estimate rests on, so a reader can judge it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from .check import OutputFormat

__all__ = ["plan"]


def plan(
    baseline: Annotated[Path, typer.Option(help="Baseline run directory the gate will compare with.")],
    margin: Annotated[
        float,
        typer.Option(help="The --non-inferior margin: the largest loss that still counts as not worse."),
    ],
    pilot: Annotated[
        Path | None,
        typer.Option(
            help="A pilot run of the changed system on the same queries: its discordant pairs with the baseline "
            "give the discordance rate. Without it, 2p(1-p) of the baseline's rate p is used (an upper bound)."
        ),
    ] = None,
    metric: Annotated[
        str, typer.Option(help="rag.pass, closed_book.pass, ..., exec@1, exec@10, ...")
    ] = "rag.pass",
    power: Annotated[
        float, typer.Option(help="Chance that the gate passes when the assumption holds.")
    ] = 0.8,
    difference: Annotated[
        float, typer.Option(help="Assumed true difference run - baseline (positive = run better).")
    ] = 0.0,
    output_format: Annotated[
        OutputFormat, typer.Option("--format", help="table (text) or json, on stdout.")
    ] = OutputFormat.table,
) -> None:
    """Estimate how many queries a non-inferiority gate needs, from the baseline's discordance rate."""
    from ..analysis.compare import load_run
    from ..analysis.noninferiority import plan_queries

    base = load_run(baseline)
    other = load_run(pilot) if pilot is not None else None
    p = plan_queries(base, metric, margin, power=power, pilot=other, diff=difference)
    if output_format is OutputFormat.json:
        typer.echo(json.dumps(p.to_dict(), indent=2))
        return
    flipped = " (oriented: 1 = not one)" if p.metric == "retrieval_induced_failures" else ""
    typer.echo(f"metric: {p.metric}; baseline {baseline}: rate {p.rate:.3f}{flipped} on {p.n} queries")
    if p.discordant is not None:
        typer.echo(
            f"discordance rate: {p.psi:.3f}, observed: {p.discordant} of {p.n} shared queries differ between the "
            f"baseline and the pilot {pilot}"
        )
    else:
        typer.echo(
            f"discordance rate: {p.psi:.3f} = 2p(1-p) with p = {p.rate:.3f}: the rate if the two runs' outcomes "
            "were independent, an upper bound when they agree more often than chance (as two versions of one "
            "system do); give --pilot RUN_DIR to use an observed rate"
        )
    typer.echo(f"assumed true difference: {p.diff:+.3f} (run - baseline; --difference)")
    if p.needed_n is None:
        typer.echo(
            f"queries needed: none suffices: an assumed difference of {p.diff:+.3f} is not above -{p.margin:g}"
        )
    else:
        typer.echo(
            f"queries needed: {p.needed_n} for --non-inferior {p.metric}={p.margin:g} "
            f"(one-sided alpha 0.025, power {p.power:g})"
        )
    typer.echo(
        "formula: n = (z_0.975 + z_power)^2 * (psi - d^2) / (d + margin)^2 (Connor 1987, normal approximation)"
    )
