"""The HTML report's plots, drawn with matplotlib into SVG data URIs (deterministic: no dates, fixed hash
salt), and the propagation counts the terminal report shares with them."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterable

from ..pipeline.records import RunRecord
from ..retrieval.results import RetrievalResult
from .summary import RunSummary

TOP1_CATEGORIES = ("canonical", "other, passes tests", "own distractor", "other, fails tests", "none")

_PASS, _FAIL, _ERR = "#2f9e44", "#e03131", "#868e96"


def _svg(fig) -> str:
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "agentbench", "svg.fonttype": "path"}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    data = base64.b64encode(buf.getvalue().encode()).decode()
    return f"data:image/svg+xml;base64,{data}"


def _figure(width: float = 5.6, height: float = 3.4):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    ax = fig.add_subplot()
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="y", alpha=0.3)
    return fig, ax


def _plot_exec_curve(
    summary: RunSummary, k_context: int, retrieval: RetrievalResult | None = None
) -> str | None:
    metrics = summary.retrieval.metrics
    ci95 = summary.retrieval.ci95
    ks = sorted(int(name.split("@")[1]) for name in metrics if name.startswith("exec@"))
    if not ks:
        return None
    fig, ax = _figure()
    ys = [metrics[f"exec@{k}"] for k in ks]
    ax.plot(ks, ys, marker="o", color="#1971c2", label="exec@k")
    if all(ci95.get(f"exec@{k}") for k in ks):
        ax.fill_between(
            ks,
            [ci95[f"exec@{k}"][0] for k in ks],
            [ci95[f"exec@{k}"][1] for k in ks],
            color="#1971c2",
            alpha=0.15,
            label="95% bootstrap CI",
        )
    if all(f"ndcg@{k}" in metrics for k in ks):
        ax.plot(ks, [metrics[f"ndcg@{k}"] for k in ks], marker="s", ls="--", color="#868e96", label="nDCG@k")
    rr = retrieval.rerank if retrieval is not None else None
    rr_metrics = rr.metrics if rr is not None else {}
    if rr is not None and rr.name and all(f"exec@{k}" in rr_metrics for k in ks):
        ax.plot(
            ks,
            [rr_metrics[f"exec@{k}"] for k in ks],
            marker="D",
            color="#e8590c",
            label=f"exec@k after reranking ({rr.name})",
        )
    rag = summary.conditions["rag"].pass_rate if "rag" in summary.conditions else None
    if rag is not None:
        ax.plot(
            [k_context],
            [rag],
            marker="*",
            ms=14,
            ls="none",
            color=_PASS,
            label=f"rag pass (top-{k_context} as context)",
        )
    for k, y in zip(ks, ys, strict=True):
        ax.annotate(f"{y:.2f}", (k, y), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=8)
    ax.set_xticks(ks)
    ax.set_xlabel("k (retrieved snippets)")
    ax.set_ylabel("share of queries")
    ax.set_ylim(0, 1.08)
    ax.set_title("exec@k: a passing snippet in the top k")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2, frameon=False)
    return _svg(fig)


def _plot_conditions(summary: RunSummary) -> str | None:
    conds = [(name, c) for name, c in summary.conditions.items() if c.pass_rate is not None]
    if not conds:
        return None
    fig, ax = _figure()
    names = [n for n, _ in conds]
    rates = [c.pass_rate for _, c in conds]
    cis = [c.ci95 for _, c in conds]
    lo = [r - ci[0] if ci else 0 for r, ci in zip(rates, cis, strict=True)]
    hi = [ci[1] - r if ci else 0 for r, ci in zip(rates, cis, strict=True)]
    colors = {"closed_book": "#868e96", "rag": "#1971c2", "oracle": _PASS, "distractor": _FAIL}
    ax.bar(names, rates, yerr=[lo, hi], capsize=5, color=[colors.get(n, "#5c7cfa") for n in names])
    for i, (r, (_, c)) in enumerate(zip(rates, conds, strict=True)):
        ax.annotate(f"{r:.2f}\nn={c.n}", (i, r), textcoords="offset points", xytext=(14, 2), fontsize=8)
    exec1 = summary.retrieval.metrics.get("exec@1")
    if exec1 is not None:
        ax.axhline(exec1, color="#1971c2", ls=":", lw=1, label=f"retrieval exec@1 = {exec1:.2f}")
        ax.legend(fontsize=8, loc="upper left")
    ax.set_ylim(0, 1.12)
    ax.set_ylabel("pass rate")
    ax.set_title("pass rate per condition, 95% Wilson CI")
    return _svg(fig)


def top1_category(rec: RunRecord) -> str:
    """What the first context snippet of a record was, for the propagation view."""
    if rec.context_kind == "canonical":
        return "canonical"
    if rec.context_kind == "own_distractor":
        return "own distractor"
    if rec.context_kind == "other_snippet":
        return "other, passes tests" if rec.context_passes else "other, fails tests"
    return "none"


def propagation_counts(records: Iterable[RunRecord]) -> dict[str, tuple[int, int]]:
    counts: dict[str, list[int]] = {c: [0, 0] for c in TOP1_CATEGORIES}
    for r in records:
        if r.condition == "rag" and r.scored:
            counts[top1_category(r)][0 if r.passed else 1] += 1
    return {c: (p, f) for c, (p, f) in counts.items() if p + f}


def _plot_propagation(records: list[RunRecord]) -> str | None:
    counts = propagation_counts(records)
    if not counts:
        return None
    fig, ax = _figure()
    cats = list(counts)
    passed = [counts[c][0] for c in cats]
    failed = [counts[c][1] for c in cats]
    ax.bar(cats, passed, color=_PASS, label="passed after generation")
    ax.bar(cats, failed, bottom=passed, color=_FAIL, label="failed after generation")
    for i, (p, f) in enumerate(zip(passed, failed, strict=True)):
        ax.annotate(
            f"{p}/{p + f}", (i, p + f), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=8
        )
    ax.set_ylabel("rag records")
    ax.set_xlabel("top-1 retrieved snippet")
    ax.set_ylim(0, max(p + f for p, f in zip(passed, failed, strict=True)) * 1.12 + 0.5)
    ax.set_title("propagation: top-1 retrieved -> generated code")
    ax.tick_params(axis="x", labelsize=8)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)
    return _svg(fig)


def _plot_bug_types(summary: RunSummary) -> str | None:
    by_bug = summary.propagation.by_bug_type
    if not by_bug:
        return None
    import numpy as np

    names = list(by_bug)
    fig, ax = _figure(5.6, 0.5 * len(names) + 1.6)
    ax.grid(axis="x", alpha=0.3)
    ax.grid(axis="y", visible=False)
    y = np.arange(len(names))
    inherit = [by_bug[n].bug_inheritance_rate for n in names]
    repair = [by_bug[n].repair_rate for n in names]
    ax.barh(y - 0.2, [v or 0 for v in inherit], height=0.4, color=_FAIL, label="bug inheritance")
    ax.barh(y + 0.2, [v or 0 for v in repair], height=0.4, color=_PASS, label="repair")
    for i, n in enumerate(names):
        ax.annotate(f"n={by_bug[n].n}", (1.0, y[i]), xytext=(4, -3), textcoords="offset points", fontsize=8)
    ax.set_yticks(y, [f"{n}" for n in names], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.0)
    ax.set_xlabel("rate (generations given buggy context)")
    ax.set_title("bug inheritance and repair by bug type")
    ax.legend(
        fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.4 / len(names)), ncol=2, frameon=False
    )
    return _svg(fig)
