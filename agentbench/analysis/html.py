"""The HTML report of a run: one self-contained file (plots embedded as SVG data URIs, no network needed).

Sections: headline numbers; exec@k curve; pass rate per condition with 95% CIs; the propagation view (what
the rag condition's top-1 was -> pass/fail after generation); bug inheritance and repair by bug type; a
per-domain table; and a browsable per-query section (query, retrieved snippets with the mutated line of a
distractor highlighted, generated code, per-assert verdicts).

The page is rendered from the Jinja2 templates in ``analysis/templates`` (``report.html.j2`` and the pieces
it includes); this module prepares the data they show. Everything in a run (queries, snippets, LLM output,
error messages) is untrusted text: autoescape escapes every value the templates print (control characters,
which HTML cannot carry, become U+FFFD first), and a Content-Security-Policy allows no network access and no
script but the report's own (pinned by hash), so a missed escape still could not run code or phone home.

The run summary and the retrieval results reach the templates as the typed records they are
(:class:`~.summary.RunSummary`, :class:`~agentbench.retrieval.results.RetrievalResult`).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, PoolError
from ..files import atomic_write_text
from ..pipeline.records import RunRecord
from ..pools.models import DistractorMeta, Pool
from ..retrieval.results import TopResult
from .compare import RunData, load_run, scoring
from .plots import (
    TOP1_CATEGORIES,
    _plot_bug_types,
    _plot_conditions,
    _plot_exec_curve,
    _plot_propagation,
    propagation_counts,
    top1_category,
)
from .summary import RunSummary

if TYPE_CHECKING:
    import jinja2

__all__ = ["render_html", "write_html", "top1_category", "propagation_counts", "TOP1_CATEGORIES"]


_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


# ------------------------------------------------------------------------------------------- templates


def _finalize(value: Any) -> Any:
    """Applied to every ``{{ value }}`` before autoescape: control characters in plain text become U+FFFD
    (markup made by the templates themselves is left alone)."""
    if isinstance(value, str) and not hasattr(value, "__html__"):
        return _CONTROL.sub("\ufffd", value)
    return value


def _num(x: Any, digits: int = 3) -> str:
    """The ``num`` filter: a rate or score with ``digits`` decimals, ``-`` for None, other values as text."""
    if x is None:
        return "-"
    return f"{x:.{digits}f}" if isinstance(x, int | float) else str(x)


def _ci(ci: Any) -> str:
    """The ``ci`` filter: a 95% interval as ``[lo, hi]``, ``""`` when there is none."""
    try:
        return f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""
    except (TypeError, ValueError, IndexError, KeyError):
        return ""


@functools.cache
def _env() -> jinja2.Environment:
    """The report's template environment: autoescape on, and a missing variable is an error."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("agentbench.analysis", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["num"] = _num
    env.filters["ci"] = _ci
    return env


@functools.cache
def _script() -> tuple[str, str]:
    """The report's script (templates/report.js.j2) and its CSP source, ``'sha256-...'``."""
    text = _env().get_template("report.js.j2").render()
    digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
    return text, f"'sha256-{digest}'"


# ------------------------------------------------------------------------------------- section data

_KIND_LABEL = {
    "canonical": "its canonical",
    "own_distractor": "one of its own distractors",
    "other_snippet": "another query's snippet",
    "none": "nothing",
}


def _top1_rows(records: list[RunRecord]) -> list[dict]:
    """The rag pass rate by what its top-1 was, for the propagation table."""
    return [
        {"category": cat, "passed": p, "n": p + f, "rate": p / (p + f)}
        for cat, (p, f) in propagation_counts(records).items()
    ]


def _attribution_view(summary: RunSummary) -> dict:
    """The paired effects table and the closed_book → rag transition grid: per cell, the queries (chips
    linking to ``#q-<query id>``) coloured by what the rag top-1 was."""
    from .report import attribution_rows

    rows = attribution_rows(summary)
    kinds = list(_KIND_LABEL.items())
    if not rows:  # a summary from before attribution
        return {"rows": [], "grid": [], "kinds": kinds}
    cells: dict[tuple[bool, bool], list[dict]] = defaultdict(list)
    for row in summary.per_query:
        cb, rag = row.outcomes.get("closed_book"), row.outcomes.get("rag")
        if cb is None or rag is None:
            continue
        kind = row.top1_kind or "none"
        qid = row.query_id
        title = f"{qid}: rag top-1 was {_KIND_LABEL.get(kind, kind)}"
        cells[(cb, rag)].append({"qid": qid, "kind": kind, "title": title})
    grid = [
        {"label": "closed_book passes", "cells": [cells[(True, True)], cells[(True, False)]]},
        {"label": "closed_book fails", "cells": [cells[(False, True)], cells[(False, False)]]},
    ]
    return {"rows": rows, "grid": grid if any(cells.values()) else [], "kinds": kinds}


def _domain_view(summary: RunSummary) -> dict:
    """Per domain: retrieval exec@1 and each condition's pass rate."""
    by_domain = summary.by_domain
    retr = summary.retrieval.diagnostics.get("by_domain") or {}
    conds = list(summary.conditions)
    rows = []
    for d in sorted(set(by_domain) | set(retr)):
        r = retr.get(d) or {}
        cells = []
        for c in conds:
            cell = by_domain.get(d, {}).get(c)
            cells.append({"rate": cell.pass_rate if cell else None, "n": cell.n if cell else 0})
        rows.append(
            {"domain": d, "n_queries": r.get("n_queries", "-"), "exec1": r.get("exec@1"), "cells": cells}
        )
    return {"conditions": conds, "rows": rows}


def _trajectory(rec: RunRecord) -> list[dict] | None:
    """A tool condition's steps for the page: each reply with its calls and tokens, each tool result."""
    if not rec.trajectory:
        return None
    steps = []
    for step in rec.trajectory:
        if step.get("type") == "assistant":
            calls = (
                ", ".join(c.get("name") or "(unparsed)" for c in step.get("tool_calls") or []) or "no call"
            )
            tokens = f"{step.get('prompt_tokens', 0)}+{step.get('completion_tokens', 0)} tokens"
            steps.append(
                {"head": f"reply: {calls} ({tokens})", "lines": _code_lines(step.get("content") or "")}
            )
        elif step.get("type") == "tool":
            valid = "" if step.get("valid", True) else ", invalid"
            args = step.get("arguments")
            body = (f"{args}\n\n" if isinstance(args, str) and args else "") + str(step.get("result", ""))
            steps.append({"head": f"{step.get('name')}{valid}", "lines": _code_lines(body)})
        else:
            steps.append(
                {"head": step.get("type", "step"), "lines": _code_lines(str(step.get("content", "")))}
            )
    stats = rec.tool_stats.to_json_dict() if rec.tool_stats is not None else {}
    summary = ", ".join(
        f"{k.replace('_', ' ')} {v}"
        for k, v in stats.items()
        if k not in ("protocol",) and v not in (None, False)
    )
    return [{"head": f"trajectory ({stats.get('protocol', 'plug-in')}): {summary}", "lines": None}, *steps]


def _code_lines(
    code: str, highlight: set[int] | None = None, removed: dict[int, list[str]] | None = None, note: str = ""
) -> list[dict]:
    """Lines of code to number (``cls`` "l", "l mut" or "l del"; ``title`` or None): ``highlight`` holds
    0-based lines to mark, ``removed`` maps a 0-based line to deleted lines shown before it."""
    highlight = highlight or set()
    removed = removed or {}
    lines = code.splitlines() or [""]
    out = []
    for i, line in enumerate([*lines, None]):
        for gone in removed.get(i, []):
            out.append({"cls": "l del", "text": gone, "title": note})
        if line is None:
            break
        marked = i in highlight
        out.append(
            {"cls": "l mut" if marked else "l", "text": line, "title": note if marked and note else None}
        )
    return out


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


class _QueryViews:
    """The per-query browser's data: per query its text, per-assert verdicts, retrieved top 5 and, per
    condition, the context snippets (a distractor's mutation marked) and the generated code."""

    def __init__(self, run: RunData, pool: Pool | None) -> None:
        self.run = run
        self.pool = pool
        self.queries = {q.query_id: q for q in pool.queries} if pool else {}
        self.metas = pool.distractor_meta() if pool else {}
        self.retrieved = {q.query_id: q for q in run.retrieval.per_query} if run.retrieval else {}

    def snippet(self, corpus_id: str, for_query: str) -> dict:
        meta = self.metas.get(corpus_id)
        try:
            snip = self.pool.snippet(corpus_id) if self.pool else None
        except KeyError:
            snip = None
        if snip is None:
            return {"corpus_id": corpus_id, "missing": True}
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
            lines = _code_lines(snip.code, *_distractor_marks(snip.code, meta))
        else:
            lines = _code_lines(snip.code)
        return {"corpus_id": corpus_id, "missing": False, "desc": desc, "lines": lines}

    def generated(self, rec: RunRecord) -> list[dict] | None:
        """The generated code, its reappearing distractor line marked; None when no code was extracted."""
        if not rec.code:
            return None
        highlight: set[int] = set()
        note = ""
        meta = self.metas.get(rec.context_ids[0]) if rec.context_ids else None
        if rec.mutated_line_reappears and meta is not None and meta.line_after.strip():
            wanted = {x.strip() for x in meta.line_after.splitlines() if x.strip()}
            highlight = {i for i, line in enumerate(rec.code.splitlines()) if line.strip() in wanted}
            note = f"the distractor's mutated line ({meta.bug_type})"
        return _code_lines(rec.code, highlight, None, note)

    def scored_tests(self, qid: str) -> list[str]:
        """The asserts the records' verdicts refer to: the whole suite, or with --rerank the held-out part."""
        query = self.queries.get(qid)
        if query is None:
            return []
        config = self.run.config
        if not getattr(config, "rerank", None):
            return list(query.test_suite)
        try:
            from ..pools.split import VisibleTests, split_tests

            visible = VisibleTests.parse(config.visible_tests)
            return list(split_tests(query.test_suite, visible, config.seed, qid).held_out)
        except Exception:  # an older or newer rerank module: show verdicts without assert texts
            return []

    def asserts(self, qid: str, recs: list[RunRecord]) -> dict | None:
        """Per assert, each condition's verdict (and the rag top-1 snippet's); None when there are none."""
        tests = self.scored_tests(qid)
        n = max([len(tests)] + [len(r.results) for r in recs] + [len(r.context_results) for r in recs])
        if n == 0:
            return None
        if any(r.results and len(r.results) != len(tests) for r in recs):
            tests = []  # verdicts that do not line up with the suite: numbers only, never a wrong assert text
        ctx = next((r for r in recs if r.condition == "rag" and r.context_results), None)

        def at(values: list[str], i: int) -> str | None:
            return values[i] if i < len(values) else None

        rows = [
            {
                "n": i + 1,
                "test": at(tests, i),
                "verdicts": [at(r.results, i) for r in recs],
                "context": at(ctx.context_results, i) if ctx is not None else None,
            }
            for i in range(n)
        ]
        return {"conditions": [r.condition for r in recs], "with_context": ctx is not None, "rows": rows}

    def top_results(self, qid: str) -> list[TopResult]:
        """The query's first five retrieved snippets, as the retrieval results hold them."""
        row = self.retrieved.get(qid)
        return row.top_results[:5] if row is not None else []

    def condition(self, rec: RunRecord) -> dict:
        context = None
        if rec.context_ids:
            context = f"context: {rec.context_kind}" + (
                ""
                if rec.context_passes is None
                else (", passes its tests" if rec.context_passes else ", fails its tests")
            )
        code = self.generated(rec)
        return {
            "rec": rec,
            "context": context,
            "snippets": [self.snippet(cid, rec.query_id) for cid in rec.context_ids],
            "generated": code,
            "response": _code_lines(rec.response) if code is None and rec.response else None,
            "trajectory": _trajectory(rec),
        }

    def query(self, qid: str, recs: list[RunRecord]) -> dict:
        query = self.queries.get(qid)
        text = query.query if query else ""
        domain = recs[0].domain if recs else ""
        failed = any(not r.passed for r in recs)
        return {
            "qid": qid,
            "domain": domain,
            "text": text,
            "short": text if len(text) <= 110 else text[:107] + "...",
            "search": " ".join([qid, domain, text, *(r.condition for r in recs if not r.passed)]).lower(),
            "failed": int(failed),
            "records": recs,
            "asserts": self.asserts(qid, recs),
            "top_results": self.top_results(qid),
            "conditions": [self.condition(r) for r in recs],
        }


def _query_views(run: RunData, pool: Pool | None) -> list[dict]:
    """One view per query, in the order of the records; its records in the order of the run's conditions."""
    views = _QueryViews(run, pool)
    by_query: dict[str, list[RunRecord]] = defaultdict(list)
    for r in run.records:
        by_query[r.query_id].append(r)
    order = {c: i for i, c in enumerate(run.config.conditions)}
    return [
        views.query(qid, sorted(recs, key=lambda r: order.get(r.condition, 99)))
        for qid, recs in by_query.items()
    ]


def _plots(run: RunData) -> tuple[list[dict], list[dict]]:
    """The figures of the retrieval-and-generation and the propagation sections (``src`` None: no data)."""
    summary = run.summary
    plots = [
        {
            "src": _plot_exec_curve(summary, run.config.k, run.retrieval),
            "alt": "exec@k curve",
            "caption": "Share of queries with a snippet that passes all asserts in the top k; the star is the "
            "rag condition's end-to-end pass rate.",
        },
        {
            "src": _plot_conditions(summary),
            "alt": "pass rate per condition",
            "caption": "closed_book: no context; rag: retrieved top-k; oracle: the canonical; distractor: a "
            "paired buggy variant. Records with LLM or infrastructure errors are excluded.",
        },
    ]
    propagation = [
        {
            "src": _plot_propagation(run.records),
            "alt": "propagation view",
            "caption": "rag records grouped by the top-1 retrieved snippet (the query's canonical, another "
            "snippet that passes or fails the query's tests, or one of its own distractors) and whether the "
            "generated code passed.",
        },
        {
            "src": _plot_bug_types(summary),
            "alt": "bug inheritance and repair by bug type",
            "caption": "Generations given a context snippet that fails the tests, by that snippet's bug type: "
            "repair = the generation passes; inheritance = it fails with the snippet's per-assert pattern.",
        },
    ]
    return plots, propagation


# ---------------------------------------------------------------------------------------------- render


def _context(run: RunData, pool: Pool | None) -> dict[str, Any]:
    """Everything report.html.j2 and the templates it includes read."""
    from markupsafe import Markup

    script, script_src = _script()
    plots, propagation_plots = _plots(run)
    return {
        "summary": run.summary,
        "config": run.config,
        "path": run.path,
        "n_records": len(run.records),
        "scoring": scoring(run.retrieval),
        "csp": f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src {script_src}",
        "script": Markup(script),  # the report's own code (templates/report.js.j2), pinned by the CSP
        "plots": plots,
        "propagation_plots": propagation_plots,
        "top1_rows": _top1_rows(run.records),
        "attribution": _attribution_view(run.summary),
        "domains": _domain_view(run.summary),
        "queries": _query_views(run, pool),
        "pool_loaded": pool is not None,
    }


def render_html(run: RunData, pool: Pool | None = None) -> str:
    """The report as one HTML string."""
    return _env().get_template("report.html.j2").render(_context(run, pool))


def write_html(run: RunData | str | Path, path: str | Path, pool: Pool | str | None = None) -> Path:
    """Write the report of ``run`` (a RunData or run directory) to ``path``.

    ``pool`` defaults to the run's pool; when it cannot be loaded the report leaves out snippets and asserts.
    A ``path`` that is a directory or cannot be written is a one-line ConfigError (an existing report
    there is left as it was).
    """
    from ..cache import write_problem
    from ..pools import load_pool

    out = Path(path)
    if out.is_dir():
        raise ConfigError(
            f"the HTML report path {out} is a directory; pass a file path such as {out / 'report.html'}"
        )
    data = run if isinstance(run, RunData) else load_run(run)
    if isinstance(pool, str):  # asked for explicitly: its errors are the user's to see
        pool = load_pool(pool)
    elif pool is None:
        try:
            pool = load_pool(data.config.pool)
        except PoolError:
            pool = None
    text = render_html(data, pool)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        return atomic_write_text(out, text)
    except OSError as exc:
        raise ConfigError(
            f"cannot write the HTML report {out}: {write_problem(out, exc)}; pass a writable file path"
        ) from exc
