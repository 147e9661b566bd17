"""`agentbench check`: gate a stored run on thresholds and on regressions against a baseline run.

The gate logic is :mod:`agentbench.analysis.gate`; :func:`enforce` is shared with ``agentbench run``.
Exit codes: 0 when every threshold holds, 1 when one is violated, 2 for usage and input errors.
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["check", "enforce", "parse_gate", "precheck", "OutputFormat", "GATE_HELP"]

GATE_HELP = {
    "fail_under": "METRIC=VALUE; repeatable. Exit 1 when the metric is below VALUE (e.g. exec@1=0.5, rag.pass=0.6).",
    "fail_over": "METRIC=VALUE; repeatable. Exit 1 when the metric is above VALUE (e.g. bug_inheritance=0.3).",
    "junit": "Write JUnit XML: one test case per (query, condition) and one per threshold.",
}


class OutputFormat(StrEnum):
    table = "table"
    json = "json"


FailUnderOpt = Annotated[
    list[str] | None, typer.Option("--fail-under", metavar="METRIC=VALUE", help=GATE_HELP["fail_under"])
]
FailOverOpt = Annotated[
    list[str] | None, typer.Option("--fail-over", metavar="METRIC=VALUE", help=GATE_HELP["fail_over"])
]
JunitOpt = Annotated[Path | None, typer.Option(help=GATE_HELP["junit"])]


def parse_gate(fail_under: list[str] | None, fail_over: list[str] | None, max_drop: list[str] | None = None):
    from ..analysis.gate import parse_thresholds

    return (
        parse_thresholds(fail_under, "fail_under")
        + parse_thresholds(fail_over, "fail_over")
        + parse_thresholds(max_drop, "max_drop")
    )


def precheck(config, thresholds: list) -> None:
    """Before `agentbench run` does any work: thresholds must name conditions the run will evaluate."""
    from ..analysis.gate import check_available

    if thresholds:
        check_available(thresholds, config.conditions)


def enforce(
    summary: dict,
    thresholds: list,
    *,
    records: list | None = None,
    junit: Path | None = None,
    baseline: dict | None = None,
    as_json: bool = False,
) -> None:
    """Check thresholds, write JUnit, report on stderr (or JSON on stdout); typer.Exit(1) on a violation."""
    from ..analysis.gate import gate_results, missing_records, write_junit

    if not thresholds and junit is None:
        return
    results = missing_records(gate_results(summary, thresholds, baseline), records)
    if junit is not None:
        write_junit(junit, records or [], results)
    failed = [r for r in results if not r.ok]
    if as_json:
        typer.echo(json.dumps({"ok": not failed, "results": [r.to_dict() for r in results]}, indent=2))
    for r in results:
        word = "ok" if r.ok else "threshold violated"
        print(f"agentbench: {word}: {r.message}", file=sys.stderr)
    if failed:
        raise typer.Exit(1)


def check(
    run_dir: Annotated[Path, typer.Argument(help="Run directory to check.")],
    baseline: Annotated[
        Path | None, typer.Option(help="Baseline run directory that --max-drop compares with.")
    ] = None,
    max_drop: Annotated[
        list[str] | None,
        typer.Option(
            "--max-drop",
            metavar="METRIC=VALUE",
            help="METRIC=VALUE; repeatable. Exit 1 when the metric got worse than in --baseline by more than "
            "VALUE (for bug_inheritance-like metrics, worse means higher).",
        ),
    ] = None,
    fail_under: FailUnderOpt = None,
    fail_over: FailOverOpt = None,
    junit: JunitOpt = None,
    output_format: Annotated[
        OutputFormat, typer.Option("--format", help="table: messages on stderr; json: results on stdout.")
    ] = OutputFormat.table,
) -> None:
    """Gate a stored run: thresholds and regressions against a baseline (exit 0 ok, 1 violated, 2 bad input)."""
    from ..analysis.compare import load_run, scoring
    from ..errors import ConfigError

    thresholds = parse_gate(fail_under, fail_over, max_drop)
    if not thresholds:
        raise ConfigError("nothing to check: give --fail-under, --fail-over or --baseline with --max-drop")
    if max_drop and baseline is None:
        raise ConfigError("--max-drop compares with a baseline: add --baseline RUN_DIR")
    run = load_run(run_dir)
    base = None
    if baseline is not None:
        base = load_run(baseline)
        if base.config.pool != run.config.pool:
            raise ConfigError(
                f"{run_dir} is on pool {run.config.pool!r} but the baseline is on {base.config.pool!r}"
            )
        if scoring(base.retrieval) != scoring(run.retrieval):
            raise ConfigError(
                f"{run_dir} is scored on {scoring(run.retrieval)} but the baseline on "
                f"{scoring(base.retrieval)}: their numbers are not comparable"
            )
        if base.summary.n_queries != run.summary.n_queries:
            print(
                f"agentbench: warning: the baseline has {base.summary.n_queries} queries and the run "
                f"{run.summary.n_queries}; rates over different query sets are compared",
                file=sys.stderr,
            )
    enforce(
        run.summary,
        thresholds,
        records=run.records,
        junit=junit,
        baseline=base.summary if base else None,
        as_json=output_format is OutputFormat.json,
    )
