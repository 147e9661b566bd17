"""The run summary as rows of text, and ``report.md``.

The rows are shared: :mod:`.terminal` prints them as tables, :func:`render_report` writes them as
markdown, and the HTML report shows the attribution rows.
"""

from __future__ import annotations

from pathlib import Path

from ..files import atomic_write_text
from .summary import (
    AgentStats,
    ConditionStats,
    CountEffect,
    Counterfactual,
    Decomposition,
    DifferenceEffect,
    Proportion,
    RunSummary,
)

__all__ = [
    "write_report",
    "render_report",
    "condition_rows",
    "propagation_rows",
    "attribution_rows",
    "agent_rows",
]


def _fmt(x: object) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def _ci(ci95: list | None) -> str:
    return f"[{ci95[0]:.2f}, {ci95[1]:.2f}]" if ci95 else "-"


def _errors(c: ConditionStats) -> str:
    """Records that errored, by source: llm and infra errors are not scored, agent and retriever errors
    (a plug-in under test failed) are scored as failures."""
    parts = [
        f"{count} {label}"
        for count, label in (
            (c.llm_errors, "llm"),
            (c.infra_errors, "sandbox"),
            (c.agent_errors, "agent"),
            (c.retriever_errors, "retriever"),
        )
        if count
    ]
    return ", ".join(parts) or "0"


def condition_rows(summary: RunSummary) -> list[tuple[str, ...]]:
    """Per condition: n, passed, pass rate, its Wilson 95% CI and the errors."""
    return [
        (name, _fmt(c.n), _fmt(c.passed), _fmt(c.pass_rate), _ci(c.ci95), _errors(c))
        for name, c in summary.conditions.items()
    ]


def propagation_rows(summary: RunSummary) -> list[tuple[str, str]]:
    """Retrieval exec@k beside what retrieval errors did to the generated code, and the LLM's usage."""
    p = summary.propagation
    m = summary.retrieval.metrics
    top1 = p.rag_pass_by_top1
    rows = [
        ("retrieval exec@1 / @3 / @5 / @10", " / ".join(_fmt(m.get(f"exec@{k}")) for k in (1, 3, 5, 10))),
        ("rag pass | top-1 canonical", _fmt(top1.canonical.pass_rate)),
        ("rag pass | top-1 own distractor", _fmt(top1.own_distractor.pass_rate)),
        ("rag pass | top-1 other snippet", _fmt(top1.other_snippet.pass_rate)),
        ("retrieval errors that became failures", _fmt(p.retrieval_errors_became_failures)),
        ("bug inheritance rate (same per-assert outcomes)", _fmt(p.bug_inheritance_rate)),
        ("mutated line reappears", _fmt(p.mutated_line_rate)),
        ("repair rate (pass with buggy context)", _fmt(p.repair_rate)),
    ]
    llm = summary.llm
    rows.append(("LLM calls / cache hits", f"{llm.calls} / {llm.cache_hits}"))
    rows.append(
        ("tokens in / out, cost", f"{llm.prompt_tokens} / {llm.completion_tokens}, ${llm.cost_usd:.4f}")
    )
    return rows


def _signed(x: float | None) -> str:
    return "-" if x is None else f"{x:+.3f}"


def _interval(ci: list | None) -> str:
    return f"[{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "-"


def _p(x: float | None) -> str:
    """The summary keeps p-values to 4 decimals, so a 0 there is below 0.0001, never an exact 0."""
    if x is None:
        return "-"
    return "p<0.0001" if x < 0.0001 else f"p={x:.3g}"


def _count_cell(c: CountEffect) -> str:
    return f"{c.count}/{c.n} = {c.rate:.3f} {_ci(c.ci95)}, McNemar {_p(c.p_value)}"


def _difference_cell(d: DifferenceEffect) -> str:
    return f"{_signed(d.difference)} {_interval(d.ci95)}, {_p(d.p_value)} (n={d.n})"


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


def attribution_rows(summary: RunSummary) -> list[tuple[str, str]]:
    """Paired per-query effects of retrieval (``summary.attribution``); a reason where one cannot be had."""
    a = summary.attribution
    if a is None:
        return []
    rows = []
    for key, label, fmt in _ATTRIBUTION_ROWS:
        effect = getattr(a, key)
        rows.append((label, fmt(effect) if effect.n else getattr(effect, "reason", "-")))
    g = a.retrieval_share_of_oracle_gain
    share = getattr(g, "share", None)
    cell = "-" if share is None else f"{share:.3f} {_ci(getattr(g, 'ci95', None))}"
    rows.append(
        ("share of the closed_book → oracle gain retrieval delivers", getattr(g, "reason", None) or cell)
    )
    dec = a.decomposition
    if isinstance(dec, Decomposition) and dec.n:
        terms = " + ".join(f"{k} {v.share:.2f}×{v.pass_rate:.2f}" for k, v in dec.by_top1_kind.items())
        rows.append(("rag pass = Σ P(top-1 kind) × P(pass | kind)", f"{terms} = {dec.rag_pass_rate:.3f}"))
        cf = dec.counterfactual
        if isinstance(cf, Counterfactual) and cf.n:
            rows.append(
                (
                    "rag pass if exec@1 were 1 (oracle where the top-1 is wrong)",
                    f"{cf.rag_pass_rate_if_exec1_were_1:.3f}: ranking costs {cf.ranking_cost:.3f}, "
                    f"context use {cf.context_use_gap:.3f} more to oracle {cf.oracle_pass_rate:.3f}",
                )
            )
        else:
            rows.append(("rag pass if exec@1 were 1", getattr(cf, "reason", "-")))
    else:
        rows.append(("rag pass by top-1 kind", getattr(dec, "reason", "-")))
    return rows


def _rate_ci(p: Proportion) -> str:
    if p.pass_rate is None or p.ci95 is None:
        return "-"
    lo, hi = p.ci95
    return f"{p.pass_rate:.3f} [{lo:.2f}, {hi:.2f}] ({p.passed}/{p.n})"


def agent_rows(summary: RunSummary) -> tuple[list[str], list[list[str]]]:
    """The tool conditions side by side (header, rows); empty without them."""
    agent: dict[str, AgentStats] = summary.agent or {}
    if not agent:
        return [], []
    names = list(agent)
    header = ["", *names]

    def num(key: str, fmt: str = "{:.2f}") -> list[str]:
        values = [getattr(agent[c], key) for c in names]
        return [fmt.format(v) if v is not None else "-" for v in values]

    def valid(s: AgentStats) -> str:
        if s.valid_tool_call_rate is None:
            return "-"
        return f"{s.valid_tool_call_rate:.3f} ({s.tagged_tool_call_rate:.3f})"

    stats = [agent[c] for c in names]
    rows = [
        ["tool calls per task", *num("tool_calls_per_task")],
        ["replies per task", *num("turns_per_task")],
        [
            "searches / test runs per task",
            *[f"{s.searches_per_task:.2f} / {s.test_runs_per_task:.2f}" for s in stats],
        ],
        ["tasks that ran the tests", *[_count_of(s.tasks_running_tests, s.n) for s in stats]],
        ["answers refused before a test run", *[_count_of(s.refused_untested) for s in stats]],
        [
            "searches after a failing run_tests",
            *[
                f"{s.searches_after_failing_tests} ({s.tasks_searching_after_failing_tests} tasks)"
                for s in stats
            ],
        ],
        ["valid tool calls (in the exact format)", *[valid(s) for s in stats]],
        ["submitted / out of budget", *[f"{s.submitted} / {s.budget_exhausted}" for s in stats]],
        ["tokens per task", *num("tokens_per_task", "{:.0f}")],
        ["cost per task (USD)", *num("cost_usd_per_task", "{:.4f}")],
        ["repair under buggy context", *[_rate_ci(s.repair) for s in stats]],
        ["bug inheritance of its failures", *[_rate_ci(s.bug_inheritance) for s in stats]],
    ]
    return header, rows


def _count_of(count: int | None, n: int | None = None) -> str:
    if count is None:
        return "-"  # a summary written before this was counted
    return f"{count} of {n}" if n is not None else str(count)


def render_report(summary: RunSummary) -> str:
    """The summary as markdown (``report.md``)."""
    run = summary.run
    lines = [
        f"# agentbench run: {run.llm} with {run.embedder} on {run.pool}",
        "",
        "| condition | n | passed | pass rate | 95% CI | errors |",
        "|---|---|---|---|---|---|",
        *("| " + " | ".join(r) + " |" for r in condition_rows(summary)),
        "",
        "| retrieval → generation | |",
        "|---|---|",
        *(f"| {a} | {b} |" for a, b in propagation_rows(summary)),
        "",
    ]
    if rows := attribution_rows(summary):
        lines += [
            "| what retrieval did (paired per query, 95% bootstrap CI) | |",
            "|---|---|",
            *(f"| {a} | {b} |" for a, b in rows),
            "",
        ]
    header, tool_rows = agent_rows(summary)
    if tool_rows:
        lines += [
            "| " + " | ".join(header or ["agents with tools"]) + " |",
            "|" + "---|" * len(header),
            *("| " + " | ".join(r) + " |" for r in tool_rows),
            "",
        ]
    return "\n".join(lines)


def write_report(path: Path, summary: RunSummary) -> None:
    atomic_write_text(path, render_report(summary))
