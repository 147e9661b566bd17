"""The HTML report of a run: one self-contained file (plots embedded as SVG data URIs, no network needed).

Sections: headline numbers; exec@k curve; pass rate per condition with 95% CIs; the propagation view (what
the rag condition's top-1 was -> pass/fail after generation); bug inheritance and repair by bug type; a
per-domain table; and a browsable per-query section (query, retrieved snippets with the mutated line of a
distractor highlighted, generated code, per-assert verdicts).

Everything in a run (queries, snippets, LLM output, error messages) is untrusted text: it only enters the
page through :func:`html.escape`, and a Content-Security-Policy allows no network access and no script but
the report's own (pinned by hash), so a missed escape still could not run code or phone home.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import re
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from ..errors import PoolError
from ..pipeline.records import RunRecord
from ..pools.models import DistractorMeta, Pool
from .compare import RunData, load_run, scoring

__all__ = ["render_html", "write_html", "top1_category", "propagation_counts", "TOP1_CATEGORIES"]

TOP1_CATEGORIES = ("canonical", "other, passes tests", "own distractor", "other, fails tests", "none")

_PASS, _FAIL, _ERR = "#2f9e44", "#e03131", "#868e96"

_CSS = """
:root { --fg:#1d2125; --muted:#5c6670; --bg:#fff; --card:#f4f6f8; --line:#dde1e6; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg);
       margin: 0 auto; max-width: 1200px; padding: 16px 24px 64px; }
h1 { font-size: 22px; margin: 8px 0 4px; } h2 { font-size: 18px; margin: 32px 0 8px; border-bottom: 1px solid var(--line); }
h4 { margin: 14px 0 4px; }
.meta { color: var(--muted); margin: 0 0 12px; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; }
.card { background: var(--card); border-radius: 6px; padding: 8px 14px; min-width: 140px; }
.card .v { font-size: 22px; font-weight: 600; } .card .k, .card .ci { color: var(--muted); font-size: 12px; }
table { border-collapse: collapse; margin: 6px 0; } th, td { border: 1px solid var(--line); padding: 3px 8px; text-align: left; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.plots { display: flex; flex-wrap: wrap; gap: 12px; } .plots figure { margin: 0; }
.plots img { max-width: 100%; height: auto; border: 1px solid var(--line); border-radius: 4px; }
figcaption { color: var(--muted); font-size: 12px; max-width: 560px; }
pre.code { background: #f8f9fa; border: 1px solid var(--line); border-radius: 4px; padding: 6px 0; overflow-x: auto;
           font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; counter-reset: ln; margin: 4px 0; }
pre.code .l { display: block; padding: 0 10px 0 0; white-space: pre; }
pre.code .l::before { counter-increment: ln; content: counter(ln); display: inline-block; width: 3em; padding-right: 8px;
                      text-align: right; color: #adb5bd; }
pre.code .mut { background: #ffe066; } pre.code .del { background: #ffc9c9; text-decoration: line-through; }
pre.code .del::before { content: "\\2212"; counter-increment: none; }
.badge { display: inline-block; border-radius: 3px; padding: 0 6px; color: #fff; font-size: 12px; margin-left: 4px; }
.pass { background: #2f9e44; } .fail { background: #e03131; } .err { background: #868e96; }
.v-pass { color: #2f9e44; font-weight: 600; } .v-fail { color: #e03131; font-weight: 600; } .v-other { color: #868e96; }
details.q { border: 1px solid var(--line); border-radius: 4px; margin: 4px 0; padding: 2px 8px; }
details.q > summary { cursor: pointer; } details.q[open] { background: #fcfcfd; }
.qtext { white-space: pre-wrap; }
.cond { border-left: 3px solid var(--line); padding-left: 10px; margin: 10px 0; }
.filters { display: flex; gap: 16px; align-items: center; margin: 8px 0; }
.note { color: var(--muted); }
.transitions td { vertical-align: top; max-width: 520px; }
.chip { display: inline-block; border-radius: 3px; padding: 0 5px; margin: 1px; color: #fff; font-size: 12px;
         text-decoration: none; font-family: ui-monospace, Menlo, Consolas, monospace; }
.k-canonical { background: #2f9e44; } .k-own_distractor { background: #e03131; }
.k-other_snippet { background: #f08c00; } .k-none { background: #868e96; }
"""

_SCRIPT = """
(function () {
  var box = document.getElementById("q-filter"), only = document.getElementById("q-failed");
  var count = document.getElementById("q-count"), items = document.querySelectorAll("details.q");
  function apply() {
    var text = box.value.toLowerCase(), failedOnly = only.checked, shown = 0;
    for (var i = 0; i < items.length; i++) {
      var d = items[i];
      var show = (!text || d.getAttribute("data-search").indexOf(text) >= 0) &&
                 (!failedOnly || d.getAttribute("data-failed") === "1");
      d.hidden = !show;
      if (show) { shown++; }
    }
    count.textContent = shown + " of " + items.length + " queries";
  }
  box.addEventListener("input", apply);
  only.addEventListener("change", apply);
  apply();
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1)), d = id && document.getElementById(id);
    if (d && d.tagName === "DETAILS") { d.hidden = false; d.open = true; d.scrollIntoView(); }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
})();
"""


_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def e(text: object) -> str:
    """Escape untrusted text for HTML element content and quoted attributes (control characters, which
    HTML cannot carry, become U+FFFD)."""
    return html.escape(_CONTROL.sub("\ufffd", str(text)), quote=True)


def _f(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "-"
    return f"{x:.{digits}f}" if isinstance(x, int | float) else e(x)


def _ci(ci: list[float] | None) -> str:
    try:
        return f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""
    except (TypeError, ValueError, IndexError, KeyError):
        return ""


# ----------------------------------------------------------------------------------------------- plots


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


def _plot_exec_curve(summary: dict, k_context: int, retrieval: dict | None = None) -> str | None:
    metrics = summary.get("retrieval", {}).get("metrics", {})
    ci95 = summary.get("retrieval", {}).get("ci95", {})
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
    rr = (retrieval or {}).get("rerank") or {}
    rr_metrics = rr.get("metrics") or {}
    if rr.get("name") and all(f"exec@{k}" in rr_metrics for k in ks):
        ax.plot(
            ks,
            [rr_metrics[f"exec@{k}"] for k in ks],
            marker="D",
            color="#e8590c",
            label=f"exec@k after reranking ({rr['name']})",
        )
    rag = summary.get("conditions", {}).get("rag", {}).get("pass_rate")
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


def _plot_conditions(summary: dict) -> str | None:
    conds = [(name, c) for name, c in summary.get("conditions", {}).items() if c.get("pass_rate") is not None]
    if not conds:
        return None
    fig, ax = _figure()
    names = [n for n, _ in conds]
    rates = [c["pass_rate"] for _, c in conds]
    lo = [r - c["ci95"][0] if c.get("ci95") else 0 for r, (_, c) in zip(rates, conds, strict=True)]
    hi = [c["ci95"][1] - r if c.get("ci95") else 0 for r, (_, c) in zip(rates, conds, strict=True)]
    colors = {"closed_book": "#868e96", "rag": "#1971c2", "oracle": _PASS, "distractor": _FAIL}
    ax.bar(names, rates, yerr=[lo, hi], capsize=5, color=[colors.get(n, "#5c7cfa") for n in names])
    for i, (r, (_, c)) in enumerate(zip(rates, conds, strict=True)):
        ax.annotate(f"{r:.2f}\nn={c['n']}", (i, r), textcoords="offset points", xytext=(14, 2), fontsize=8)
    exec1 = summary.get("retrieval", {}).get("metrics", {}).get("exec@1")
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


def _plot_bug_types(summary: dict) -> str | None:
    by_bug = summary.get("propagation", {}).get("by_bug_type", {})
    if not by_bug:
        return None
    import numpy as np

    names = list(by_bug)
    fig, ax = _figure(5.6, 0.5 * len(names) + 1.6)
    ax.grid(axis="x", alpha=0.3)
    ax.grid(axis="y", visible=False)
    y = np.arange(len(names))
    inherit = [by_bug[n]["bug_inheritance_rate"] for n in names]
    repair = [by_bug[n]["repair_rate"] for n in names]
    ax.barh(y - 0.2, [v or 0 for v in inherit], height=0.4, color=_FAIL, label="bug inheritance")
    ax.barh(y + 0.2, [v or 0 for v in repair], height=0.4, color=_PASS, label="repair")
    for i, n in enumerate(names):
        ax.annotate(
            f"n={by_bug[n]['n']}", (1.0, y[i]), xytext=(4, -3), textcoords="offset points", fontsize=8
        )
    ax.set_yticks(y, [f"{n}" for n in names], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.0)
    ax.set_xlabel("rate (generations given buggy context)")
    ax.set_title("bug inheritance and repair by bug type")
    ax.legend(
        fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.4 / len(names)), ncol=2, frameon=False
    )
    return _svg(fig)


# ------------------------------------------------------------------------------------------- sections


def _table(headers: list[str], rows: list[list[str]], numeric_from: int = 1) -> str:
    """Headers and cells are already-escaped HTML."""
    head = "".join(
        f'<th class="{"num" if i >= numeric_from else ""}">{h}</th>' for i, h in enumerate(headers)
    )
    body = "".join(
        "<tr>"
        + "".join(f'<td class="{"num" if i >= numeric_from else ""}">{c}</td>' for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _headline(summary: dict) -> str:
    metrics = summary.get("retrieval", {}).get("metrics", {})
    ci95 = summary.get("retrieval", {}).get("ci95", {})
    conds = summary.get("conditions", {})
    prop = summary.get("propagation", {})
    cards = [("retrieval exec@1", metrics.get("exec@1"), ci95.get("exec@1"))]
    for name, c in conds.items():
        cards.append((f"{name} pass rate", c.get("pass_rate"), c.get("ci95")))
    cards.append(("bug inheritance", prop.get("bug_inheritance_rate"), None))
    cards.append(("repair rate", prop.get("repair_rate"), None))
    cards.append(("retrieval errors -> failures", prop.get("retrieval_errors_became_failures"), None))
    html_cards = "".join(
        f'<div class="card"><div class="k">{e(k)}</div><div class="v">{_f(v)}</div>'
        f'<div class="ci">{e(_ci(ci)) or "&nbsp;"}</div></div>'
        for k, v, ci in cards
    )
    return f'<div class="cards" id="headline">{html_cards}</div>'


def _conditions_table(summary: dict) -> str:
    rows = [
        [
            e(name),
            e(c.get("n", 0)),
            e(c.get("passed", 0)),
            _f(c.get("pass_rate")),
            e(_ci(c.get("ci95"))),
            e(c.get("no_code", 0)),
            e(c.get("llm_errors", 0)),
            e(c.get("infra_errors", 0)),
            e(c.get("agent_errors", 0) + c.get("retriever_errors", 0)),
        ]
        for name, c in summary.get("conditions", {}).items()
    ]
    headers = [
        "condition",
        "n scored",
        "passed",
        "pass rate",
        "95% CI",
        "no code",
        "LLM errors",
        "infra errors",
        "plug-in errors (scored)",
    ]
    return _table(headers, rows)


def _propagation_table(summary: dict, records: list[RunRecord]) -> str:
    p = summary.get("propagation", {})
    inh = p.get("bug_inheritance", {})
    rows = [
        [
            "retrieval errors (rag top-1 fails the tests) that became failures",
            f"{_f(p.get('retrieval_errors_became_failures'))} of {e(p.get('retrieval_errors', 0))}",
        ],
        [
            "bug inheritance (failure with the context's per-assert pattern)",
            f"{_f(p.get('bug_inheritance_rate'))} ({e(inh.get('inherited', 0))}/{e(inh.get('failures_with_buggy_context', 0))})",
        ],
        ["mutated line reappears in the failed generation", _f(p.get("mutated_line_rate"))],
        ["repair rate (pass despite buggy context)", _f(p.get("repair_rate"))],
    ]
    for cond, v in p.get("repair_rate_by_condition", {}).items():
        rows.append([f"repair rate, {e(cond)}", _f(v)])
    counts = propagation_counts(records)
    for cat, (passed, failed) in counts.items():
        rows.append(
            [
                f"rag with top-1 {e(cat)}: passed",
                f"{passed}/{passed + failed} = {_f(passed / (passed + failed))}",
            ]
        )
    return _table(["", "value"], rows)


_KIND_LABEL = {
    "canonical": "its canonical",
    "own_distractor": "one of its own distractors",
    "other_snippet": "another query's snippet",
    "none": "nothing",
}


def _attribution_section(summary: dict) -> str:
    """The paired effects table and the closed_book → rag transition view, each query a link into the
    per-query browser, coloured by what the rag top-1 was."""
    from .report import attribution_rows

    rows = attribution_rows(summary)
    if not rows:
        return '<p class="note">This summary predates per-query attribution; rerun `agentbench report`.</p>'
    table = _table(["", "value"], [[e(a), e(b)] for a, b in rows])
    per_query = summary.get("per_query", [])
    cells: dict[tuple[bool, bool], list[str]] = defaultdict(list)
    for row in per_query:
        out = row.get("outcomes", {})
        if out.get("closed_book") is None or out.get("rag") is None:
            continue
        kind = row.get("top1_kind") or "none"
        qid = row["query_id"]
        title = f"{qid}: rag top-1 was {_KIND_LABEL.get(kind, kind)}"
        cells[(out["closed_book"], out["rag"])].append(
            f'<a class="chip k-{e(kind)}" href="#{e("q-" + qid)}" title="{e(title)}">{e(qid)}</a>'
        )
    if not cells:
        return table + '<p class="note">No query has both closed_book and rag scored.</p>'

    def cell(cb: bool, rag: bool) -> str:
        chips = cells.get((cb, rag), [])
        return f"<b>{len(chips)}</b><br>" + "".join(chips)

    grid = _table(
        ["closed_book \\ rag", "rag passes", "rag fails"],
        [
            ["closed_book passes", cell(True, True), cell(True, False)],
            ["closed_book fails", cell(False, True), cell(False, False)],
        ],
        numeric_from=99,
    ).replace("<table>", '<table class="transitions">', 1)
    legend = " ".join(f'<span class="chip k-{k}">{e(label)}</span>' for k, label in _KIND_LABEL.items())
    return (
        table
        + "<h4>closed_book → rag, per query</h4>"
        + f'<p class="note">Each query once, coloured by the rag top-1: {legend}. Red chips in '
        '"closed_book passes, rag fails" are retrieval-induced failures; click a query to open it below.</p>'
        + grid
    )


def _bug_table(summary: dict) -> str:
    by_bug = summary.get("propagation", {}).get("by_bug_type", {})
    if not by_bug:
        return '<p class="note">No generation was given buggy context.</p>'
    rows = [
        [e(name), e(b["n"]), _f(b.get("repair_rate")), _f(b.get("bug_inheritance_rate"))]
        for name, b in by_bug.items()
    ]
    return _table(["bug type of the context", "n", "repair rate", "bug inheritance"], rows)


def _domain_table(summary: dict) -> str:
    by_domain = summary.get("by_domain", {})
    retr = summary.get("retrieval", {}).get("diagnostics", {}).get("by_domain", {})
    conds = list(summary.get("conditions", {}))
    domains = sorted(set(by_domain) | set(retr))
    if not domains:
        return '<p class="note">No per-domain numbers.</p>'
    rows = []
    for d in domains:
        r = retr.get(d, {})
        row = [e(d), e(r.get("n_queries", "-")), _f(r.get("exec@1"))]
        for c in conds:
            cell = by_domain.get(d, {}).get(c, {})
            rate = cell.get("pass_rate")
            row.append(
                f"{_f(rate)} <span class=note>n={e(cell.get('n', 0))}</span>" if rate is not None else "-"
            )
        rows.append(row)
    return _table(["domain", "queries", "exec@1", *(f"{e(c)} pass" for c in conds)], rows)


def _code(
    code: str, highlight: set[int] | None = None, removed: dict[int, list[str]] | None = None, note: str = ""
) -> str:
    """Numbered code; ``highlight`` holds 0-based lines to mark, ``removed`` maps a 0-based line to deleted
    lines shown before it."""
    highlight = highlight or set()
    removed = removed or {}
    lines = code.splitlines() or [""]
    out = []
    for i, line in enumerate(lines + [None]):
        for gone in removed.get(i, []):
            out.append(f'<span class="l del" title="{e(note)}">{e(gone)}</span>')
        if line is None:
            break
        cls = "l mut" if i in highlight else "l"
        title = f' title="{e(note)}"' if i in highlight and note else ""
        out.append(f'<span class="{cls}"{title}>{e(line)}</span>')
    return '<pre class="code"><code>' + "".join(out) + "</code></pre>"


def _distractor_marks(code: str, meta: DistractorMeta) -> tuple[set[int], dict[int, list[str]], str]:
    """Where the mutation is in a distractor's code: highlighted lines, or the removed lines' position."""
    lines = code.splitlines()
    at = max((meta.line_number or 1) - 1, 0)
    if not meta.line_after.strip():
        note = f"{meta.bug_type}: these lines were removed"
        return set(), {min(at, len(lines)): meta.line_before.splitlines()}, note
    after = [x.strip() for x in meta.line_after.splitlines() if x.strip()]
    note = f"{meta.bug_type}: was {meta.line_before.strip()}"
    n = len(after)
    if [x.strip() for x in lines[at : at + n]] == after:
        return set(range(at, at + n)), {}, note
    for i in range(len(lines)):
        if [x.strip() for x in lines[i : i + n]] == after:
            return set(range(i, i + n)), {}, note
    return set(), {}, note


def _verdict(v: str) -> str:
    cls = {"pass": "v-pass", "fail": "v-fail"}.get(v.lower(), "v-other")
    return f'<span class="{cls}">{e(v)}</span>'


def _badge(rec: RunRecord, named: bool = True) -> str:
    name = f"{e(rec.condition)} " if named else ""
    if not rec.scored:
        return f'<span class="badge err" title="{e(rec.status)}">{name}{e(rec.status)}</span>'
    cls = "pass" if rec.passed else "fail"
    return f'<span class="badge {cls}">{name}{cls}</span>'


class _QueryRenderer:
    def __init__(self, run: RunData, pool: Pool | None) -> None:
        self.run = run
        self.pool = pool
        self.queries = {q.query_id: q for q in pool.queries} if pool else {}
        self.metas = pool.distractor_meta() if pool else {}
        self.retrieved = {q["query_id"]: q for q in run.retrieval.get("per_query", [])}

    def snippet(self, corpus_id: str, for_query: str) -> str:
        meta = self.metas.get(corpus_id)
        try:
            snip = self.pool.snippet(corpus_id) if self.pool else None
        except KeyError:
            snip = None
        if snip is None:
            return f'<p class="note">Snippet {e(corpus_id)} is not in the pool available to this report.</p>'
        query = self.queries.get(for_query)
        if query is not None and corpus_id in query.correct_corpus_ids:
            desc = "this query's canonical"
        elif snip.label == "correct":
            desc = "correct code for another task"
        else:
            desc = f"incorrect ({snip.bug_type})" if snip.bug_type else "incorrect"
        if meta is not None:
            desc += f", distractor of {meta.query_id}" + (
                " (this query)" if meta.query_id == for_query else ""
            )
            highlight, removed, note = _distractor_marks(snip.code, meta)
            code = _code(snip.code, highlight, removed, note)
        else:
            code = _code(snip.code)
        return f'<div class="note">snippet <code>{e(corpus_id)}</code>: {e(desc)}</div>{code}'

    def generated(self, rec: RunRecord) -> str:
        if not rec.code:
            if rec.response:
                return '<div class="note">no code extracted; the response was:</div>' + _code(rec.response)
            return '<p class="note">no response</p>'
        highlight: set[int] = set()
        note = ""
        meta = self.metas.get(rec.context_ids[0]) if rec.context_ids else None
        if rec.mutated_line_reappears and meta is not None and meta.line_after.strip():
            wanted = {x.strip() for x in meta.line_after.splitlines() if x.strip()}
            highlight = {i for i, line in enumerate(rec.code.splitlines()) if line.strip() in wanted}
            note = f"the distractor's mutated line ({meta.bug_type})"
        return _code(rec.code, highlight, None, note)

    def scored_tests(self, qid: str) -> list[str]:
        """The asserts the records' verdicts refer to: the whole suite, or with --rerank the held-out part."""
        query = self.queries.get(qid)
        if query is None:
            return []
        config = self.run.config
        if not getattr(config, "rerank", None):
            return list(query.test_suite)
        try:
            from ..retrieval.rerank import VisibleTests, split_tests

            visible = VisibleTests.parse(config.visible_tests)
            return list(split_tests(query.test_suite, visible, config.seed, qid).held_out)
        except Exception:  # an older or newer rerank module: show verdicts without assert texts
            return []

    def asserts(self, qid: str, recs: list[RunRecord]) -> str:
        tests = self.scored_tests(qid)
        n = max([len(tests)] + [len(r.results) for r in recs] + [len(r.context_results) for r in recs])
        if n == 0:
            return '<p class="note">No per-assert verdicts.</p>'
        if any(r.results and len(r.results) != len(tests) for r in recs):
            tests = []  # verdicts that do not line up with the suite: numbers only, never a wrong assert text
        ctx = next((r for r in recs if r.condition == "rag" and r.context_results), None)
        headers = ["#", "assert"] + [e(r.condition) for r in recs]
        if ctx is not None:
            headers.append("rag top-1 snippet")
        rows = []
        for i in range(n):
            row = [str(i + 1), f"<code>{e(tests[i])}</code>" if i < len(tests) else "-"]
            row += [_verdict(r.results[i]) if i < len(r.results) else "-" for r in recs]
            if ctx is not None:
                row.append(_verdict(ctx.context_results[i]) if i < len(ctx.context_results) else "-")
            rows.append(row)
        return _table(headers, rows, numeric_from=99)

    def top_results(self, qid: str) -> str:
        q = self.retrieved.get(qid)
        if not q or not q.get("top_results"):
            return ""
        rows = []
        for r in q["top_results"][:5]:
            rows.append(
                [
                    e(r.get("rank")),
                    f"<code>{e(r.get('corpus_id'))}</code>",
                    e(r.get("label", "")),
                    e(r.get("bug_type", "")),
                    _f(r.get("similarity")),
                    _verdict("pass" if r.get("passes_all_tests") else "fail"),
                ]
            )
        return "<h4>retrieved (top 5)</h4>" + _table(
            ["rank", "snippet", "label", "bug type", "score", "all tests"], rows, numeric_from=99
        )

    def condition(self, rec: RunRecord) -> str:
        head = f"<h4>{e(rec.condition)} {_badge(rec, named=False)}</h4>"
        parts = [head]
        if rec.context_ids:
            kind = f"context: {rec.context_kind}" + (
                ""
                if rec.context_passes is None
                else (", passes its tests" if rec.context_passes else ", fails its tests")
            )
            parts.append(f'<div class="note">{e(kind)}</div>')
            for cid in rec.context_ids:
                parts.append(self.snippet(cid, rec.query_id))
        else:
            parts.append('<div class="note">no context</div>')
        if rec.error:
            parts.append(f'<div class="note">error: {e(rec.error)}</div>')
        parts.append('<div class="note">generated code:</div>' + self.generated(rec))
        return '<div class="cond">' + "".join(parts) + "</div>"

    def query(self, qid: str, recs: list[RunRecord]) -> str:
        query = self.queries.get(qid)
        text = query.query if query else ""
        domain = recs[0].domain if recs else ""
        failed = any(not r.passed for r in recs)
        search = " ".join([qid, domain, text, *(r.condition for r in recs if not r.passed)]).lower()
        short = text if len(text) <= 110 else text[:107] + "..."
        summary = (
            f"<summary><code>{e(qid)}</code> <span class=note>{e(domain)}</span> {e(short)} "
            + "".join(_badge(r) for r in recs)
            + "</summary>"
        )
        body = (
            f'<p class="qtext">{e(text)}</p>'
            + "<h4>per-assert verdicts</h4>"
            + self.asserts(qid, recs)
            + self.top_results(qid)
            + "".join(self.condition(r) for r in recs)
        )
        return (
            f'<details class="q" id="{e("q-" + qid)}" data-search="{e(search)}" data-failed="{int(failed)}">'
            f"{summary}{body}</details>"
        )


def _per_query(run: RunData, pool: Pool | None) -> str:
    renderer = _QueryRenderer(run, pool)
    by_query: dict[str, list[RunRecord]] = defaultdict(list)
    for r in run.records:
        by_query[r.query_id].append(r)
    order = {c: i for i, c in enumerate(run.config.conditions)}
    items = [
        renderer.query(qid, sorted(recs, key=lambda r: order.get(r.condition, 99)))
        for qid, recs in by_query.items()
    ]
    filters = (
        '<div class="filters"><label>filter <input id="q-filter" type="search" '
        'placeholder="query id, domain, words, or a condition that failed"></label>'
        '<label><input id="q-failed" type="checkbox"> only queries with a failure</label>'
        '<span id="q-count" class="note"></span></div>'
    )
    note = (
        ""
        if pool
        else '<p class="note">The pool could not be loaded: snippets and asserts are not shown.</p>'
    )
    return filters + note + "".join(items)


def _figure_html(src: str | None, alt: str, caption: str) -> str:
    if src is None:
        return ""
    return f'<figure><img src="{src}" alt="{e(alt)}"><figcaption>{e(caption)}</figcaption></figure>'


def render_html(run: RunData, pool: Pool | None = None) -> str:
    """The report as one HTML string."""
    summary = run.summary
    info = summary.get("run", {})
    title = (
        f"agentbench run: {info.get('llm', run.config.llm)} with {info.get('embedder', run.config.embedder)}"
    )
    meta = (
        f"pool {info.get('pool', run.config.pool)} · {summary.get('n_queries') or '?'} queries · "
        f"conditions {', '.join(run.config.conditions)} · rag context top-{run.config.k} · seed {run.config.seed} · "
        f"{len(run.records)} records · scored on {scoring(run.retrieval)} · run directory {run.path}"
    )
    llm = summary.get("llm", {})
    llm_line = (
        f"LLM calls {llm.get('calls', 0)}, cache hits {llm.get('cache_hits', 0)}, errors {llm.get('errors', 0)}; "
        f"tokens in/out {llm.get('prompt_tokens', 0)}/{llm.get('completion_tokens', 0)}; "
        f"cost ${llm.get('cost_usd', 0.0):.4f}"
    )
    plots = "".join(
        [
            _figure_html(
                _plot_exec_curve(summary, run.config.k, run.retrieval),
                "exec@k curve",
                "Share of queries with a snippet that passes all asserts in the top k; the star is the rag "
                "condition's end-to-end pass rate.",
            ),
            _figure_html(
                _plot_conditions(summary),
                "pass rate per condition",
                "closed_book: no context; rag: retrieved top-k; oracle: the canonical; distractor: a paired buggy "
                "variant. Records with LLM or infrastructure errors are excluded.",
            ),
        ]
    )
    propagation_plots = "".join(
        [
            _figure_html(
                _plot_propagation(run.records),
                "propagation view",
                "rag records grouped by the top-1 retrieved snippet (the query's canonical, another snippet that "
                "passes or fails the query's tests, or one of its own distractors) and whether the generated code "
                "passed.",
            ),
            _figure_html(
                _plot_bug_types(summary),
                "bug inheritance and repair by bug type",
                "Generations given a context snippet that fails the tests, by that snippet's bug type: repair = "
                "the generation passes; inheritance = it fails with the snippet's per-assert pattern.",
            ),
        ]
    )
    body = f"""
<h1>{e(title)}</h1>
<p class="meta">{e(meta)}</p>
{_headline(summary)}
<p class="note">{e(llm_line)}</p>
<h2>Retrieval and generation</h2>
<div class="plots">{plots}</div>
{_conditions_table(summary)}
<h2>Propagation: how retrieval errors reach the generated code</h2>
<div class="plots">{propagation_plots}</div>
{_propagation_table(summary, run.records)}
<h2 id="attribution">What retrieval did to this agent: paired per query</h2>
{_attribution_section(summary)}
<h2>By bug type</h2>
{_bug_table(summary)}
<h2>By domain</h2>
{_domain_table(summary)}
<h2>Queries</h2>
{_per_query(run, pool)}
"""
    digest = base64.b64encode(hashlib.sha256(_SCRIPT.encode()).digest()).decode()
    csp = f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'sha256-{digest}'"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{e(csp)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="generator" content="agentbench">'
        f"<title>{e(title)}</title><style>{_CSS}</style></head>"
        f"<body>{body}<script>{_SCRIPT}</script></body></html>\n"
    )


def write_html(run: RunData | str | Path, path: str | Path, pool: Pool | str | None = None) -> Path:
    """Write the report of ``run`` (a RunData or run directory) to ``path``.

    ``pool`` defaults to the run's pool; when it cannot be loaded the report leaves out snippets and asserts.
    """
    from ..pools import load_pool

    data = run if isinstance(run, RunData) else load_run(run)
    if isinstance(pool, str):  # asked for explicitly: its errors are the user's to see
        pool = load_pool(pool)
    elif pool is None:
        try:
            pool = load_pool(data.config.pool)
        except PoolError:
            pool = None
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(render_html(data, pool), encoding="utf-8")
    tmp.replace(out)
    return out
