"""Compact markdown of a run for CI: ``agentbench report --format github``, the GitHub Action's job summary
and pull-request comment, and the comparison table of a failed paired gate in the pytest plugin.

Why a separate renderer from ``report.md``: a comment has to be short enough to read in a pull request,
so it holds only the pass rate of each condition with its 95% interval, exec@k and, when
``agentbench check --format json`` was run, the gate verdicts. The output depends only on its inputs (no
timings, dates or paths), so the same run gives the same bytes, and a comment can be updated in place.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .summary import RunSummary

__all__ = ["github_markdown", "paired_table", "read_checks", "table"]

EXEC_KS = (1, 3, 5, 10)


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A markdown table with padded columns, so it also reads as plain text (pytest's report)."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def _rate(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _ci(ci: Sequence[float | None] | None, signed: bool = False) -> str:
    if not ci or ci[0] is None or ci[1] is None:
        return "-"
    return f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if signed else f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def _signed(x: float | None) -> str:
    return "-" if x is None else f"{x:+.3f}"


def paired_table(gates: Sequence[Mapping[str, Any]]) -> str:
    """The ``--non-inferior``/``--superior`` gates (``PairedResult.to_dict()`` or ``paired_gates`` of
    ``agentbench check --format json``): difference, interval, n, discordant pairs and verdict."""
    rows = []
    for g in gates:
        b, c = g.get("b", 0), g.get("c", 0)
        verdict = g.get("verdict", "-")
        if g.get("missing"):
            verdict += f"; {len(g['missing'])} record(s) lost to errors"
        rows.append(
            [
                f"{g.get('flag', '')} {g['metric']}={g['margin']:g}",
                _signed(g.get("diff")),
                _ci([g.get("lo"), g.get("hi")], signed=True),
                str(g.get("n", 0)),
                f"{b + c} ({b} run, {c} baseline)",
                verdict,
                "pass" if g.get("ok") else "FAIL",
            ]
        )
    header = ["gate", "difference", "95% CI", "n", "discordant pairs", "verdict", "result"]
    return table(header, rows)


def _threshold_table(results: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for r in results:
        t = r["threshold"]
        rows.append(
            [
                f"{t.get('flag', '')} {t['metric']}={t['value']:g}",
                _rate(r.get("value")),
                _rate(r.get("baseline")),
                "pass" if r.get("ok") else "FAIL",
            ]
        )
    return table(["threshold", "value", "baseline", "result"], rows)


def _gates_section(checks: Mapping[str, Any]) -> list[str]:
    results, paired = checks.get("results") or [], checks.get("paired_gates") or []
    failed = sum(not r.get("ok") for r in [*results, *paired])
    total = len(results) + len(paired)
    head = "**Gates: all passed**" if not failed else f"**Gates: {failed} of {total} failed**"
    lines = [head, ""]
    if paired:
        lines += [paired_table(paired), ""]
    if results:
        lines += [_threshold_table(results), ""]
    return lines


def github_markdown(summary: RunSummary, checks: Mapping[str, Any] | None = None) -> str:
    """The run as a short markdown comment: pass rates with Wilson 95% intervals, exec@k and, with
    ``checks`` (the JSON of ``agentbench check --format json``), the gates' verdicts."""
    run = summary.run
    rows = [
        [name, f"{c.passed}/{c.n}", _rate(c.pass_rate), _ci(c.ci95)] for name, c in summary.conditions.items()
    ]
    lines = [
        f"### agentbench: {run.llm} with {run.embedder} on {run.pool}",
        "",
        f"{summary.n_queries} queries, seed {run.seed}.",
        "",
        table(["condition", "passed", "pass rate", "95% CI"], rows),
        "",
    ]
    metrics, cis = summary.retrieval.metrics, summary.retrieval.ci95
    exec_rows = [
        [f"exec@{k}", _rate(metrics.get(f"exec@{k}")), _ci(cis.get(f"exec@{k}"))]
        for k in EXEC_KS
        if f"exec@{k}" in metrics
    ]
    if exec_rows:
        lines += [table(["retrieval", "rate", "95% CI"], exec_rows), ""]
    if checks is not None:
        lines += _gates_section(checks)
    return "\n".join(lines)


def read_checks(path: str | Path) -> dict[str, Any]:
    """The JSON ``agentbench check --format json`` printed, saved to ``path``; a ConfigError (exit 2) when
    it is missing or is not that output."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"--checks {p}: no such file; save it with agentbench check ... --format json > {p}"
        ) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"--checks {p}: not readable as JSON ({exc}); give the output of agentbench check --format json"
        ) from None
    if not isinstance(data, dict) or "ok" not in data or not isinstance(data.get("results", []), list):
        raise ConfigError(f"--checks {p}: not the output of agentbench check --format json")
    return data
