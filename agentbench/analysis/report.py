"""Human-readable summaries: the printed table and report.md."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..files import atomic_write_text

__all__ = ["write_report", "print_summary", "attribution_rows"]


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


def _signed(x: float | None) -> str:
    return "-" if x is None else f"{x:+.3f}"


def _interval(ci: list[float] | None) -> str:
    return f"[{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "-"


def _p(x: float | None) -> str:
    return "-" if x is None else f"p={x:.3g}"


def _count_cell(c: dict) -> str:
    return f"{c['count']}/{c['n']} = {c['rate']:.3f} {_ci(c)}, McNemar {_p(c['p_value'])}"


def _difference_cell(d: dict) -> str:
    return f"{_signed(d['difference'])} {_interval(d['ci95'])}, {_p(d['p_value'])} (n={d['n']})"


_ATTRIBUTION_ROWS = (
    (
        "retrieval_induced_failures",
        "retrieval-induced failures (closed_book pass, rag fail, buggy top-1)",
        _count_cell,
    ),
    ("retrieval_rescues", "retrieval rescues (closed_book fail, rag pass)", _count_cell),
    ("net_effect_of_retrieval", "net effect of retrieval (rag − closed_book)", _difference_cell),
    ("cost_of_buggy_context", "cost of a buggy context (distractor − closed_book)", _difference_cell),
    ("value_of_right_context", "value of the right context (oracle − closed_book)", _difference_cell),
)


def attribution_rows(summary: dict) -> list[tuple[str, str]]:
    """Paired per-query effects of retrieval (summary["attribution"]); a reason where one cannot be had."""
    a = summary.get("attribution")
    if not a:
        return []
    rows = [
        (label, fmt(a[key]) if a[key].get("n") else a[key].get("reason", "-"))
        for key, label, fmt in _ATTRIBUTION_ROWS
    ]
    g = a["retrieval_share_of_oracle_gain"]
    share = "-" if g.get("share") is None else f"{g['share']:.3f} {_ci(g)}"
    rows.append(("share of the closed_book → oracle gain retrieval delivers", g.get("reason") or share))
    dec = a["decomposition"]
    if dec.get("n"):
        terms = " + ".join(
            f"{k} {v['share']:.2f}×{v['pass_rate']:.2f}" for k, v in dec["by_top1_kind"].items()
        )
        rows.append(("rag pass = Σ P(top-1 kind) × P(pass | kind)", f"{terms} = {dec['rag_pass_rate']:.3f}"))
        cf = dec["counterfactual"]
        if cf.get("n"):
            rows.append(
                (
                    "rag pass if exec@1 were 1 (oracle where the top-1 is wrong)",
                    f"{cf['rag_pass_rate_if_exec@1_were_1']:.3f}: ranking costs {cf['ranking_cost']:.3f}, "
                    f"context use {cf['context_use_gap']:.3f} more to oracle {cf['oracle_pass_rate']:.3f}",
                )
            )
        else:
            rows.append(("rag pass if exec@1 were 1", cf.get("reason", "-")))
    else:
        rows.append(("rag pass by top-1 kind", dec.get("reason", "-")))
    return rows


def _rate_ci(p: dict) -> str:
    if not p or p.get("pass_rate") is None:
        return "-"
    lo, hi = p["ci95"]
    return f"{p['pass_rate']:.3f} [{lo:.2f}, {hi:.2f}] ({p['passed']}/{p['n']})"


def agent_rows(summary: dict) -> tuple[list[str], list[list[str]]]:
    """The tool conditions side by side (header, rows); empty without them."""
    agent = summary.get("agent") or {}
    if not agent:
        return [], []
    names = list(agent)
    header = ["", *names]

    def num(key: str, fmt: str = "{:.2f}") -> list[str]:
        return [fmt.format(agent[c][key]) if agent[c].get(key) is not None else "-" for c in names]

    rows = [
        ["tool calls per task", *num("tool_calls_per_task")],
        ["replies per task", *num("turns_per_task")],
        [
            "searches / test runs per task",
            *[f"{agent[c]['searches_per_task']:.2f} / {agent[c]['test_runs_per_task']:.2f}" for c in names],
        ],
        [
            "searches after a failing run_tests",
            *[
                f"{agent[c]['searches_after_failing_tests']} ({agent[c]['tasks_searching_after_failing_tests']} tasks)"
                for c in names
            ],
        ],
        [
            "valid tool calls (in the exact format)",
            *[
                f"{agent[c]['valid_tool_call_rate']:.3f} ({agent[c]['tagged_tool_call_rate']:.3f})"
                if agent[c].get("valid_tool_call_rate") is not None
                else "-"
                for c in names
            ],
        ],
        [
            "submitted / out of budget",
            *[f"{agent[c]['submitted']} / {agent[c]['budget_exhausted']}" for c in names],
        ],
        ["tokens per task", *num("tokens_per_task", "{:.0f}")],
        ["cost per task (USD)", *num("cost_usd_per_task", "{:.4f}")],
        ["repair under buggy context", *[_rate_ci(agent[c]["repair"]) for c in names]],
        ["bug inheritance of its failures", *[_rate_ci(agent[c]["bug_inheritance"]) for c in names]],
    ]
    return header, rows


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
    rows = attribution_rows(summary)
    if rows:
        attr = Table(
            title="what retrieval did to this agent (paired per query, 95% bootstrap CI)", show_header=False
        )
        for row in rows:
            attr.add_row(*row)
        console.print(attr)
    header, rows = agent_rows(summary)
    if rows:
        tools = Table(title="agents with tools (held-out asserts)")
        for col in header:
            tools.add_column(col)
        for row in rows:
            tools.add_row(*row)
        console.print(tools)


def render_report(summary: dict) -> str:
    """The summary as markdown (``report.md``)."""
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
    if rows := attribution_rows(summary):
        lines += [
            "| what retrieval did (paired per query, 95% bootstrap CI) | |",
            "|---|---|",
            *(f"| {a} | {b} |" for a, b in rows),
            "",
        ]
    header, rows = agent_rows(summary)
    if rows:
        lines += [
            "| " + " | ".join(header or ["agents with tools"]) + " |",
            "|" + "---|" * len(header),
            *("| " + " | ".join(r) + " |" for r in rows),
            "",
        ]
    return "\n".join(lines)


def write_report(path: Path, summary: dict) -> None:
    atomic_write_text(path, render_report(summary))
