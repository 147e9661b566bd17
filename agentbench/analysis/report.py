"""Human-readable summaries: the printed table and report.md."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

__all__ = ["write_report", "print_summary"]


def _fmt(x) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def _ci(c: dict) -> str:
    return f"[{c['ci95'][0]:.2f}, {c['ci95'][1]:.2f}]" if c.get("ci95") else "-"


def _errors(c: dict) -> str:
    """Records that errored, by source: llm and infra errors are not scored, agent and retriever errors
    (a plug-in under test failed) are scored as failures."""
    parts = [
        f"{c[key]} {label}"
        for key, label in (
            ("llm_errors", "llm"),
            ("infra_errors", "sandbox"),
            ("agent_errors", "agent"),
            ("retriever_errors", "retriever"),
        )
        if c.get(key)
    ]
    return ", ".join(parts) or "0"


def _condition_rows(summary: dict) -> list[tuple[str, ...]]:
    return [
        (name, _fmt(c["n"]), _fmt(c["passed"]), _fmt(c["pass_rate"]), _ci(c), _errors(c))
        for name, c in summary["conditions"].items()
    ]


def _propagation_rows(summary: dict) -> list[tuple[str, str]]:
    p = summary["propagation"]
    m = summary["retrieval"]["metrics"]
    rows = [
        ("retrieval exec@1 / @3 / @5 / @10", " / ".join(_fmt(m.get(f"exec@{k}")) for k in (1, 3, 5, 10))),
        ("rag pass | top-1 canonical", _fmt(p["rag_pass_by_top1"]["canonical"]["pass_rate"])),
        ("rag pass | top-1 own distractor", _fmt(p["rag_pass_by_top1"]["own_distractor"]["pass_rate"])),
        ("rag pass | top-1 other snippet", _fmt(p["rag_pass_by_top1"]["other_snippet"]["pass_rate"])),
        ("retrieval errors that became failures", _fmt(p["retrieval_errors_became_failures"])),
        ("bug inheritance rate (same per-assert outcomes)", _fmt(p["bug_inheritance_rate"])),
        ("mutated line reappears", _fmt(p["mutated_line_rate"])),
        ("repair rate (pass with buggy context)", _fmt(p["repair_rate"])),
    ]
    llm = summary["llm"]
    rows.append(("LLM calls / cache hits", f"{llm['calls']} / {llm['cache_hits']}"))
    rows.append(
        (
            "tokens in / out, cost",
            f"{llm['prompt_tokens']} / {llm['completion_tokens']}, ${llm['cost_usd']:.4f}",
        )
    )
    return rows


def print_summary(summary: dict, console: Console | None = None) -> None:
    console = console or Console()
    table = Table(
        title=f"{summary['run']['llm']} with {summary['run']['embedder']} on {summary['run']['pool']}"
    )
    for col in ("condition", "n", "passed", "pass rate", "95% CI", "errors"):
        table.add_column(col)
    for row in _condition_rows(summary):
        table.add_row(*row)
    console.print(table)
    prop = Table(title="retrieval → generation", show_header=False)
    for row in _propagation_rows(summary):
        prop.add_row(*row)
    console.print(prop)


def write_report(path: Path, summary: dict) -> None:
    run = summary["run"]
    lines = [
        f"# agentbench run: {run['llm']} with {run['embedder']} on {run['pool']}",
        "",
        "| condition | n | passed | pass rate | 95% CI | errors |",
        "|---|---|---|---|---|---|",
        *("| " + " | ".join(r) + " |" for r in _condition_rows(summary)),
        "",
        "| retrieval → generation | |",
        "|---|---|",
        *(f"| {a} | {b} |" for a, b in _propagation_rows(summary)),
        "",
    ]
    path.write_text("\n".join(lines))
