"""`agentbench check`: gate a stored run on thresholds and on regressions against a baseline run.

The gate logic is :mod:`agentbench.analysis.gate` (thresholds) and :mod:`agentbench.analysis.noninferiority`
(paired ``--non-inferior``/``--superior`` gates); :func:`enforce` is shared with ``agentbench run``.
Exit codes: 0 when every threshold holds, 1 when one is violated, 2 for usage and input errors.
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

__all__ = [
    "check",
    "enforce",
    "parse_gate",
    "parse_paired",
    "load_baseline",
    "precheck",
    "OutputFormat",
    "GATE_HELP",
]

GATE_HELP = {
    "fail_under": "METRIC=VALUE; repeatable. Exit 1 when the metric is below VALUE (e.g. exec@1=0.5, rag.pass=0.6).",
    "fail_over": "METRIC=VALUE; repeatable. Exit 1 when the metric is above VALUE (e.g. bug_inheritance=0.3).",
    "junit": "Write JUnit XML: one test case per (query, condition) and one per threshold.",
    "non_inferior": "METRIC=MARGIN; repeatable; needs --baseline. Exit 1 unless the lower bound of the "
    "paired 95% interval of (run - baseline) on shared queries lies above -MARGIN (rag.pass, "
    "closed_book.pass, ..., exec@1, exec@10, retrieval_induced_failures: positive = run better).",
    "superior": "METRIC=MARGIN; repeatable; needs --baseline. Exit 1 unless that lower bound lies above "
    "+MARGIN.",
    "allow_inconclusive": "An inconclusive --non-inferior/--superior gate (the interval straddles the "
    "margin) passes instead of failing.",
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
NonInferiorOpt = Annotated[
    list[str] | None, typer.Option("--non-inferior", metavar="METRIC=MARGIN", help=GATE_HELP["non_inferior"])
]
SuperiorOpt = Annotated[
    list[str] | None, typer.Option("--superior", metavar="METRIC=MARGIN", help=GATE_HELP["superior"])
]
AllowInconclusiveOpt = Annotated[
    bool, typer.Option("--allow-inconclusive", help=GATE_HELP["allow_inconclusive"])
]


def parse_gate(fail_under: list[str] | None, fail_over: list[str] | None, max_drop: list[str] | None = None):
    from ..analysis.gate import parse_thresholds

    return (
        parse_thresholds(fail_under, "fail_under")
        + parse_thresholds(fail_over, "fail_over")
        + parse_thresholds(max_drop, "max_drop")
    )


def parse_paired(non_inferior: list[str] | None, superior: list[str] | None) -> list:
    """``--non-inferior`` and ``--superior`` specs as MarginSpecs (exit 2 for a malformed one).

    Without either flag nothing is imported: the gates' module pulls in the analysis stage, which a run
    needs only after its generation stage."""
    if not non_inferior and not superior:
        return []
    from ..analysis.noninferiority import parse_margins

    return parse_margins(non_inferior, "non_inferior") + parse_margins(superior, "superior")


def load_baseline(run_dir: str | Path, run_pool: str, baseline: str | Path):  # noqa: ANN201 - RunData, imported lazily
    """The baseline run directory, refused when its pool differs from the run's."""
    from ..analysis.compare import load_run
    from ..errors import ConfigError

    base = load_run(baseline)
    if base.config.pool != run_pool:
        raise ConfigError(f"{run_dir} is on pool {run_pool!r} but the baseline is on {base.config.pool!r}")
    return base


def check_scoring(run_dir: str | Path, run_retrieval: object, base: object) -> None:
    """Refuse a baseline scored on other asserts than the run (``--rerank`` runs score on held-out ones)."""
    from ..analysis.compare import scoring
    from ..errors import ConfigError

    if scoring(base.retrieval) != scoring(run_retrieval):
        raise ConfigError(
            f"{run_dir} is scored on {scoring(run_retrieval)} but the baseline on "
            f"{scoring(base.retrieval)}: their numbers are not comparable"
        )


def warn_query_counts(run: object, base: object) -> None:
    """A warning (not an error) when the baseline has another number of queries than the run."""
    if base.summary.n_queries != run.summary.n_queries:
        print(
            f"agentbench: warning: the baseline has {base.summary.n_queries} queries and the run "
            f"{run.summary.n_queries}; rates over different query sets are compared (paired gates use the "
            "queries both share)",
            file=sys.stderr,
        )


def precheck(config, thresholds: list) -> None:
    """Before `agentbench run` does any work: thresholds must name conditions the run will evaluate."""
    if thresholds:
        from ..analysis.gate import check_available

        check_available(thresholds, config.conditions)


def enforce(
    summary: dict,
    thresholds: list,
    *,
    records: list | None = None,
    junit: Path | None = None,
    baseline: dict | None = None,
    as_json: bool = False,
    paired: list | None = None,
) -> None:
    """Check thresholds, write JUnit, report them and the ``paired`` gates' results (already computed, see
    :func:`agentbench.analysis.noninferiority.gate_runs`) on stderr (or JSON on stdout); typer.Exit(1) when
    one fails."""
    from ..analysis.gate import gate_results, missing_records, write_junit

    paired = paired or []
    if not thresholds and not paired and junit is None:
        return
    results = missing_records(gate_results(summary, thresholds, baseline), records)
    if junit is not None:
        write_junit(junit, records or [], [*results, *paired])  # a paired gate is one test case too
    failed = [r for r in [*results, *paired] if not r.ok]
    if as_json:
        data = {
            "ok": not failed,
            "results": [r.to_dict() for r in results],
            "paired_gates": [r.to_dict() for r in paired],
        }
        typer.echo(json.dumps(data, indent=2))
    for r in [*results, *paired]:
        word = "ok" if r.ok else "threshold violated"
        print(f"agentbench: {word}: {r.message}", file=sys.stderr)
    if failed:
        raise typer.Exit(1)


def check(
    run_dir: Annotated[Path, typer.Argument(help="Run directory to check.")],
    baseline: Annotated[
        Path | None,
        typer.Option(
            help="Baseline run directory that --max-drop, --non-inferior and --superior compare with."
        ),
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
    non_inferior: NonInferiorOpt = None,
    superior: SuperiorOpt = None,
    allow_inconclusive: AllowInconclusiveOpt = False,
    fail_under: FailUnderOpt = None,
    fail_over: FailOverOpt = None,
    junit: JunitOpt = None,
    output_format: Annotated[
        OutputFormat, typer.Option("--format", help="table: messages on stderr; json: results on stdout.")
    ] = OutputFormat.table,
) -> None:
    """Gate a stored run: thresholds, regressions and non-inferiority against a baseline (exit 0 ok, 1 violated,
    2 bad input)."""
    from ..analysis.compare import load_run
    from ..analysis.noninferiority import gate_runs
    from ..errors import ConfigError

    thresholds = parse_gate(fail_under, fail_over, max_drop)
    specs = parse_paired(non_inferior, superior)
    if not thresholds and not specs:
        raise ConfigError(
            "nothing to check: give --fail-under, --fail-over, or --baseline with --max-drop, --non-inferior "
            "or --superior"
        )
    if (max_drop or specs) and baseline is None:
        flag = "--max-drop" if max_drop else specs[0].label.split()[0]
        raise ConfigError(f"{flag} compares with a baseline: add --baseline RUN_DIR")
    run = load_run(run_dir)
    base = paired = None
    if baseline is not None:
        base = load_baseline(run_dir, run.config.pool, baseline)
        check_scoring(run_dir, run.retrieval, base)
        paired = gate_runs(run, base, specs, allow_inconclusive=allow_inconclusive) if specs else None
        warn_query_counts(run, base)
    enforce(
        run.summary,
        thresholds,
        records=run.records,
        junit=junit,
        baseline=base.summary if base else None,
        as_json=output_format is OutputFormat.json,
        paired=paired,
    )
