"""Every table agentbench prints in the terminal, drawn with rich from the typed results.

- :func:`print_retrieval`: ``agentbench retrieve`` (metrics, breakdowns, reranking before and after);
- :func:`print_summary` and :func:`print_run_details`: a run's summary (``agentbench run`` and ``report``);
- :func:`print_leaderboard`: a matrix run's leaderboard.

The commands in ``cli/`` parse options, call the API and hand its results here. The rows shared with
``report.md`` and the HTML pages are built in :mod:`.report` and :mod:`.leaderboard`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..pipeline.records import RunRecord
from ..retrieval.rerank.consensus import ConsensusStats
from ..retrieval.rerank.visible import VisibleTestsStats
from ..retrieval.results import RetrievalResult
from .leaderboard import CAPTION, LEGEND, Leaderboard, table_rows
from .passk import SamplesSummary
from .plots import propagation_counts
from .report import agent_rows, attribution_rows, condition_rows, propagation_rows
from .summary import RerankSummary, RunSummary

__all__ = ["print_retrieval", "print_summary", "print_rerank", "print_run_details", "print_leaderboard"]


# ------------------------------------------------------------------------------------------- retrieval


def _fmt(value: float | None, ci: list[float | None] | None = None) -> str:
    if value is None:
        return "-"
    text = f"{value:.3f}"
    return f"{text} [dim][{ci[0]:.2f}, {ci[1]:.2f}][/]" if ci else text


def _top_bug(r: RetrievalResult) -> str:
    bugs = r.diagnostics.by_bug_type
    if not bugs:
        return "-"
    name, info = max(bugs.items(), key=lambda kv: (kv[1].count, kv[0]))
    return f"{name} {info.share:.2f}"


def _metrics_table(results: Sequence[RetrievalResult], pool: str) -> Table:
    first = results[0]
    table = Table(
        title=f"retrieval on {pool}: {first.n_queries} queries, {first.n_corpus} snippets",
        caption="exec@k by execution verdict; \\[lo, hi] = 95% bootstrap CI over queries"
        + ("; held-out asserts only (vector order)" if first.rerank is not None else ""),
    )
    table.add_column("metric")
    for r in results:
        table.add_column(r.model, justify="right")
    ks = first.ks
    kmax = ks[-1]
    rows: list[tuple[str, list[str]]] = [
        (f"exec@{k}", [_fmt(r.metrics[f"exec@{k}"], r.ci95[f"exec@{k}"]) for r in results]) for k in ks
    ]
    rows.append((f"ndcg@{kmax}", [_fmt(r.metrics[f"ndcg@{kmax}"]) for r in results]))
    rows.append((f"exec-ndcg gap@{kmax}", [_fmt(r.metrics[f"exec_ndcg_gap@{kmax}"]) for r in results]))
    rows.append(("MRR", [_fmt(r.metrics["mrr"], r.ci95["mrr"]) for r in results]))
    rows.append(
        (
            "rank-1 failures: own paired bug",
            [
                f"{_fmt(d.rank1_failure_paired_share)} ({d.rank1_failures_paired}/{d.rank1_failures})"
                for d in (r.diagnostics for r in results)
            ],
        )
    )
    rows.append(
        ("canonical < a paired bug", [_fmt(r.diagnostics.canonical_below_paired_share) for r in results])
    )
    rows.append(("rank-1 tied", [_fmt(r.diagnostics.rank1_tied_share) for r in results]))
    rows.append(("top rank-1 failure", [_top_bug(r) for r in results]))
    for label, cells in rows:
        table.add_row(label, *cells)
    return table


def _breakdowns_table(results: Sequence[RetrievalResult]) -> Table:
    """exec@1 per domain and the bug types of failing rank-1 snippets, retrievers side by side."""
    table = Table(title="breakdowns", caption="domain rows: exec@1; bug-type rows: share of rank-1 failures")
    table.add_column("")
    for r in results:
        table.add_column(r.model, justify="right")
    for d in sorted({d for r in results for d in r.diagnostics.by_domain}):
        cells = []
        for r in results:
            info = r.diagnostics.by_domain.get(d)
            cells.append(f"{info['exec@1']:.3f} (n={info['n_queries']})" if info else "-")
        table.add_row(f"domain {d}", *cells)
    for b in sorted({b for r in results for b in r.diagnostics.by_bug_type}):
        cells = []
        for r in results:
            bug = r.diagnostics.by_bug_type.get(b)
            cells.append(f"{bug.share:.3f} ({bug.count})" if bug else "-")
        table.add_row(f"rank-1 failure: {b}", *cells)
    return table


def _rerank_stat_rows(results: Sequence[RetrievalResult]) -> list[tuple[str, list[str]]]:
    """The reranker's own statistics, one row each: which rows is decided by the type of its statistics
    (every retriever of one ``agentbench retrieve`` call was reranked by the same reranker)."""
    pairs = [(r, r.rerank.stats) for r in results if r.rerank is not None]
    first = pairs[0][1]
    rows: list[tuple[str, list[str]]] = []
    if isinstance(first, ConsensusStats):
        consensus = [(r, s) for r, s in pairs if isinstance(s, ConsensusStats)]
        rows.append(
            ("inputs per query (total)", [f"{s.inputs_mean} ({s.inputs_total})" for _, s in consensus])
        )
        rows.append(
            (
                "unique consensus winner",
                [f"{s.unique_winner}/{r.n_queries} ({s.unique_winner_share:.2f})" for r, s in consensus],
            )
        )
    if isinstance(first, VisibleTestsStats):
        visible = [(r, s) for r, s in pairs if isinstance(s, VisibleTestsStats)]
        rows.append(
            (
                "queries with a candidate passing visible",
                [f"{s.queries_with_a_visible_pass}/{r.n_queries}" for r, s in visible],
            )
        )
    return rows


def _rerank_table(results: Sequence[RetrievalResult]) -> Table:
    """Before/after reranking, both on held-out asserts, with what the reranking cost."""
    reranked = [(r, r.rerank) for r in results if r.rerank is not None]
    first = reranked[0][1]
    table = Table(
        title=f"reranking the top {first.k} with {first.name}",
        caption=(
            f"before = vector order, after = reranked; all on held-out asserts ({first.n_held_out} held out, "
            f"{first.n_visible} visible: --visible-tests {first.visible_tests}, seed {first.seed})"
        ),
    )
    table.add_column("")
    for r, _ in reranked:
        table.add_column(r.model, justify="right")
    ks = results[0].ks
    for name in [f"exec@{k}" for k in ks] + [f"ndcg@{ks[-1]}", "mrr"]:
        cells = []
        for r, rr in reranked:
            before, after = r.metrics[name], rr.metrics[name]
            cells.append(f"{before:.3f} -> {after:.3f} ({after - before:+.3f})")
        table.add_row(f"{name} before -> after", *cells)
    table.add_row("top-1 changed", *[f"{rr.top1_changed}/{r.n_queries}" for r, rr in reranked])
    table.add_row(
        "cost: executions (run now)",
        *[f"{rr.cost.executions} ({rr.cost.executed_now})" for _, rr in reranked],
    )
    table.add_row(
        "cost: seconds (sandbox total)",
        *[f"{rr.cost.seconds:.1f} ({rr.cost.sandbox_seconds:.1f})" for _, rr in reranked],
    )
    for label, cells in _rerank_stat_rows(results):
        table.add_row(label, *cells)
    return table


def print_retrieval(
    results: Sequence[RetrievalResult], pool: str, files: Sequence[Path] = (), console: Console | None = None
) -> None:
    """What ``agentbench retrieve`` prints: the metrics and breakdowns of every retriever side by side,
    reranking before and after, retrievers' failures, and the results files written."""
    console = console or Console()
    console.print(_metrics_table(results, pool))
    console.print(_breakdowns_table(results))
    rerank = results[0].rerank
    if rerank is not None and rerank.skipped:
        console.print(
            f"reranking skipped ({rerank.skipped}); every metric is on held-out asserts",
            highlight=False,
            markup=False,
        )
    elif rerank is not None:
        console.print(_rerank_table(results))
        for r in results:
            rr = r.rerank
            if rr is None:
                continue
            console.print(
                f"exec@1 on held-out asserts, {r.model} + {rr.name}: before {r.metrics['exec@1']:.3f}, "
                f"after {rr.metrics['exec@1']:.3f} (cost: {rr.cost.executions} executions, "
                f"{rr.cost.seconds:.1f} s)",
                highlight=False,
            )
    for r in results:
        if r.errors:
            first = r.errors[0]
            console.print(
                f"{r.model}: failed on {len(r.errors)} of {r.n_queries} queries, scored as misses "
                f"(first: {first.query_id}: {first.error})",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
    for f in files:
        console.print(f"wrote {f}", highlight=False)


# ----------------------------------------------------------------------------------------------- runs


def _rows_table(title: str, rows: Sequence[Sequence[str]], header: Sequence[str] = ()) -> Table:
    table = Table(title=title, show_header=bool(header))
    for col in header:
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    return table


def print_summary(summary: RunSummary, console: Console | None = None) -> None:
    """A run's headline tables: conditions, retrieval → generation, attribution, agents with tools."""
    console = console or Console()
    run = summary.run
    console.print(
        _rows_table(
            f"{run.llm} with {run.embedder} on {run.pool}",
            condition_rows(summary),
            ("condition", "n", "passed", "pass rate", "95% CI", "errors"),
        )
    )
    console.print(_rows_table("retrieval → generation", propagation_rows(summary)))
    if rows := attribution_rows(summary):
        console.print(
            _rows_table("what retrieval did to this agent (paired per query, 95% bootstrap CI)", rows)
        )
    header, tool_rows = agent_rows(summary)
    if tool_rows:
        console.print(_rows_table("agents with tools (held-out asserts)", tool_rows, header))
    if summary.samples is not None:  # --samples N above 1 only: a one-sample run prints what it always did
        _print_samples(summary.samples, console)


def _print_samples(samples: SamplesSummary, console: Console) -> None:
    """pass@k for k = 1..N per condition, and the flaky (query, condition) pairs."""
    ks = [f"pass@{k}" for k in range(1, samples.samples + 1)]
    rows = [
        [name, str(c.n_queries), *(_f(c.pass_at_k.get(k)) for k in ks), str(c.flaky)]
        for name, c in samples.conditions.items()
    ]
    title = f"{samples.samples} samples per query (unbiased pass@k, Chen et al. 2021)"
    console.print(_rows_table(title, rows, ("condition", "queries", *ks, "flaky")))
    if samples.flaky:
        shown = ", ".join(f"{p.query_id}/{p.condition} {p.passed}/{p.n}" for p in samples.flaky[:10])
        more = f" and {len(samples.flaky) - 10} more" if len(samples.flaky) > 10 else ""
        console.print(f"flaky (samples disagree): {shown}{more}", highlight=False)


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def print_rerank(rr: RerankSummary | None) -> None:
    """--rerank: pass rates with and without reranking, on the same held-out asserts (plain lines)."""
    if rr is None:
        return
    if rr.name is None:
        print(f"reranking skipped ({rr.skipped}); every condition scored on held-out asserts", flush=True)
        return
    cost = rr.cost
    lines = [
        f"reranking the top {rr.k} with {rr.name} (--visible-tests {rr.visible_tests}); "
        "every number on held-out asserts:",
        f"  retrieval exec@1: {_f(rr.exec1_before)} -> {_f(rr.exec1_after)}",
        f"  end-to-end pass rate: rag {_f(rr.rag_pass_rate)} -> rag_reranked {_f(rr.rag_reranked_pass_rate)}",
        f"  cost: {cost.executions} executions ({cost.executed_now} run now), {cost.seconds:.1f} s",
    ]
    print("\n".join(lines), flush=True)


def print_run_details(
    summary: RunSummary, records: Sequence[RunRecord], console: Console | None = None
) -> None:
    """``agentbench report``'s further tables: rag by top-1 kind, buggy context by bug type, by domain."""
    console = console or Console()
    counts = propagation_counts(records)
    if counts:
        table = Table(title="rag: top-1 retrieved → generated code")
        for col in ("top-1 snippet", "passed", "failed", "pass rate"):
            table.add_column(col, justify="left" if col == "top-1 snippet" else "right")
        for cat, (p, f) in counts.items():
            table.add_row(cat, str(p), str(f), _f(p / (p + f)))
        console.print(table)
    by_bug = summary.propagation.by_bug_type
    if by_bug:
        table = Table(title="buggy context by bug type")
        for col in ("bug type", "n", "repair rate", "bug inheritance"):
            table.add_column(col, justify="left" if col == "bug type" else "right")
        for name, b in by_bug.items():
            table.add_row(name, str(b.n), _f(b.repair_rate), _f(b.bug_inheritance_rate))
        console.print(table)
    by_domain = summary.by_domain
    retr = summary.retrieval.diagnostics.get("by_domain") or {}
    conds = list(summary.conditions)
    if by_domain or retr:
        table = Table(title="by domain (pass rates)")
        table.add_column("domain")
        table.add_column("exec@1", justify="right")
        for c in conds:
            table.add_column(c, justify="right")
        for d in sorted(set(by_domain) | set(retr)):
            cells = [_f(p.pass_rate if (p := by_domain.get(d, {}).get(c)) else None) for c in conds]
            table.add_row(d, _f((retr.get(d) or {}).get("exec@1")), *cells)
        console.print(table)


# ----------------------------------------------------------------------------------------- leaderboard


def print_leaderboard(board: Leaderboard, console: Console | None = None) -> None:
    """The leaderboard, ranked; a row whose difference from the baseline has p < 0.05 in bold; the last
    column marks whether each rank is significantly better than the next (Holm-corrected)."""
    from rich import box

    console = console or Console()
    b = board.baseline
    table = Table(
        title=f"leaderboard on {board.pool} ({board.n_queries} queries), baseline #{b['index']} "
        f"{b['agent']} + {b['retriever']}",
        box=box.SIMPLE_HEAD,
        caption=f"{CAPTION}\n{LEGEND}",
    )
    header, rows = table_rows(board)
    text = (2, 3, len(header) - 1)  # agent, retriever and the vs-next mark (an n/a gives its reason)
    for i, col in enumerate(header):
        table.add_column(col, justify="left" if i in text else "right", no_wrap=i not in text)
    for r, cells in zip(board.rows, rows, strict=True):
        d = (r.vs_baseline or {}).get(board.primary_metric) or {}
        significant = d.get("p_value") is not None and d["p_value"] < 0.05
        table.add_row(*cells, style="bold" if significant else None)
    console.print(table)
