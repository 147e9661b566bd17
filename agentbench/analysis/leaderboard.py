"""The leaderboard of a matrix run: every combination's pass rates with 95% CIs, ranked, and each one
compared with a baseline combination on the queries they share.

Read from disk (``matrix.json`` and the run directories it lists), so it can be rebuilt with another
baseline without running anything. The numbers are the runs' own: pass rates and Wilson intervals from each
run's summary, retrieval metrics and bootstrap intervals from its retrieval stage, and the paired tests
from :mod:`.compare` (exact McNemar p and seeded paired-bootstrap CI of the difference, every metric the
two runs share). Rows are ranked by the primary metric, the rag pass rate (the first condition's when a
matrix has no rag condition), ties in matrix order. Each rank is also tested against the next on that
metric (``vs_next``: paired on shared queries, Holm-corrected over the neighbouring pairs), so the table
says which steps of the ranking are more than chance.

Written as ``leaderboard.json`` and ``leaderboard.html`` in the matrix directory; :func:`print_leaderboard`
(in :mod:`.terminal`) shows it in the terminal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from ..errors import ConfigError
from ..files import atomic_write_json, atomic_write_text, read_json_object
from ..models import Record
from ..pipeline.matrix import MANIFEST
from .compare import N_RESAMPLES, compare_sources, format_p, load_run, paired_stats, run_source, scoring
from .stats import holm

__all__ = [
    "LEADERBOARD_VERSION",
    "Leaderboard",
    "LeaderboardRow",
    "NeighbourTest",
    "ALPHA",
    "build_leaderboard",
    "table_rows",
    "CAPTION",
    "LEGEND",
    "render_leaderboard_html",
    "write_leaderboard",
]

LEADERBOARD_VERSION = 1
JSON_FILE, HTML_FILE = "leaderboard.json", "leaderboard.html"


ALPHA = 0.05
"""The family-wise error rate of the neighbouring comparisons (Holm-corrected)."""


class NeighbourTest(Record):
    """This row against the row ranked just below it on the primary metric, paired on their shared
    queries. Why: the ranks alone do not say whether rank 1 is really better than rank 2; this does, with
    the m - 1 neighbouring tests of an m-row leaderboard Holm-corrected as one family."""

    next_rank: int
    """the rank of the row below"""
    next_index: int
    """that row's combination number (``#``)"""
    metric: str
    """the primary metric both are ranked by (e.g. ``rag.pass``)"""
    n: int
    """queries both runs scored on that metric; 0: untestable (see ``reason``)"""
    difference: float | None
    """this row's rate minus the next row's, on the shared queries"""
    this_only: int
    """shared queries where this row's outcome is higher (0/1 outcomes: only this one passes)"""
    next_only: int
    test: str | None
    """``exact McNemar`` on 0/1 outcomes; ``sign test`` on per-query pass fractions (``--samples``)"""
    p_value: float | None
    """the raw two-sided p (a binomial test of the discordant queries at 1/2); None when untestable"""
    p_holm: float | None
    """``p_value`` Holm-adjusted over the leaderboard's testable neighbouring pairs (capped at 1)"""
    significant: bool | None
    """``p_holm`` < 0.05; None when untestable"""
    reason: str | None = None
    """why the pair is untestable (``significant`` None), e.g. the two runs share no queries"""

    @property
    def mark(self) -> str:
        """``>`` (significantly better than the next rank), ``<`` (significantly worse on the shared
        queries, possible when the runs scored different queries), ``≈`` (not significant), ``n/a``."""
        if self.significant is None:
            return "n/a"
        if not self.significant:
            return "≈"
        return ">" if (self.difference or 0.0) > 0 else "<"


class LeaderboardRow(Record):
    rank: int
    index: int
    """the combination's 1-based position in the matrix (what ``--baseline N`` names)"""
    name: str
    """its run directory under the matrix directory"""
    agent: str
    agent_kind: str
    retriever: str
    retriever_kind: str
    complete: bool
    """its summary.json exists (an interrupted combination is summarised from the records it has)"""
    n_records: int
    conditions: dict[str, dict[str, Any]]
    """condition -> n, passed, pass_rate, ci95 (Wilson), and the unscored counts"""
    retrieval: dict[str, Any]
    """metrics (exec@k, ...) and their bootstrap ci95"""
    llm: dict[str, Any]
    vs_baseline: dict[str, dict[str, Any]] | None = None
    """metric -> n, baseline_rate, other_rate, difference (this minus the baseline), baseline_only,
    other_only, p_value (exact McNemar), ci95 (paired bootstrap); None for the baseline itself"""
    vs_next: NeighbourTest | None = None
    """this row against the next rank on the primary metric (Holm-corrected over the neighbouring pairs);
    None for the last row"""


class Leaderboard(Record):
    schema_version: int = LEADERBOARD_VERSION
    matrix: str
    pool: str
    n_queries: int | None
    conditions: list[str]
    scoring: str
    primary_metric: str
    baseline: dict[str, Any]
    """index, name, agent and retriever of the baseline combination"""
    bootstrap: dict[str, int]
    rows: list[LeaderboardRow] = Field(default_factory=list)

    def row(self, index: int) -> LeaderboardRow:
        """The row of combination ``index`` (1-based)."""
        return next(r for r in self.rows if r.index == index)


def _primary(conditions: list[str]) -> str:
    return f"{'rag' if 'rag' in conditions else conditions[0]}.pass"


def build_leaderboard(
    matrix_dir: str | Path,
    baseline: int = 1,
    *,
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
) -> Leaderboard:
    """The leaderboard of the matrix in ``matrix_dir`` against combination ``baseline`` (1-based)."""
    path = Path(matrix_dir)
    combos = read_json_object(path / MANIFEST).get("combinations") or []
    if not 1 <= baseline <= len(combos):
        raise ConfigError(
            f"--baseline {baseline} is out of range: the matrix has combinations 1 to {len(combos)}"
        )
    runs = []
    for c in combos:
        run = load_run(path / c["name"])
        source = run_source(run)
        source.name = c["name"]
        runs.append((c, run, source))
    base_combo, base_run, base_source = runs[baseline - 1]
    others = [s for i, (_, _, s) in enumerate(runs) if i != baseline - 1]
    comparisons = (
        compare_sources([base_source, *others], seed=seed, n_resamples=n_resamples) if others else []
    )
    conditions = list(base_run.config.conditions)
    primary = _primary(conditions)
    primary_condition = primary.split(".")[0]
    rows: list[LeaderboardRow] = []
    for c, run, _ in runs:
        summary = run.summary
        vs = None
        if c["name"] != base_combo["name"]:
            vs = {
                cmp.metric: {
                    k: v for k, v in cmp.to_dict().items() if k not in ("metric", "baseline", "other")
                }
                for cmp in comparisons
                if cmp.other == c["name"]
            }
        rows.append(
            LeaderboardRow(
                rank=0,
                index=c["index"],
                name=c["name"],
                agent=c["agent"],
                agent_kind=c["agent_kind"],
                retriever=c["retriever"],
                retriever_kind=c["retriever_kind"],
                complete=(run.path / "summary.json").exists(),
                n_records=len(run.records),
                conditions={k: v.to_json_dict() for k, v in summary.conditions.items()},
                retrieval={"metrics": dict(summary.retrieval.metrics), "ci95": dict(summary.retrieval.ci95)},
                llm=summary.llm.to_json_dict(),
                vs_baseline=vs,
            )
        )

    def key(row: LeaderboardRow) -> tuple:
        rate = row.conditions.get(primary_condition, {}).get("pass_rate")
        return (rate is None, -(rate or 0.0), row.index)

    for rank, row in enumerate(sorted(rows, key=key), start=1):
        row.rank = rank
    rows.sort(key=lambda r: r.rank)
    _test_neighbours(rows, {c["name"]: s.outcomes.get(primary) for c, _, s in runs}, primary)
    return Leaderboard(
        matrix=str(path),
        pool=base_run.config.pool,
        n_queries=base_run.summary.n_queries,
        conditions=conditions,
        scoring=scoring(base_run.retrieval),
        primary_metric=primary,
        baseline={k: base_combo[k] for k in ("index", "name", "agent", "retriever")},
        bootstrap={"seed": seed, "n_resamples": n_resamples},
        rows=rows,
    )


def _test_neighbours(
    rows: list[LeaderboardRow], outcomes: dict[str, dict[str, float] | None], metric: str
) -> None:
    """Fill ``vs_next`` of every ranked row but the last: a paired test against the row below on the
    queries both scored (``paired_stats``: exact McNemar on 0/1, sign test on fractions), Holm over the
    testable pairs."""
    tests: list[NeighbourTest] = []
    for this, below in zip(rows, rows[1:], strict=False):
        a, b = outcomes.get(below.name), outcomes.get(this.name)
        shared = sorted(set(a) & set(b)) if a is not None and b is not None else []
        x = [a[q] for q in shared] if a else []
        y = [b[q] for q in shared] if b else []
        stats = paired_stats(x, y, n_resamples=1)  # the p needs no resampling; the CI is not kept
        reason = None
        if a is None or b is None:
            reason = f"{(this if b is None else below).name} has no {metric} outcomes"
        elif not shared:
            reason = f"{this.name} and {below.name} share no queries scored on {metric}"
        tests.append(
            NeighbourTest(
                next_rank=below.rank,
                next_index=below.index,
                metric=metric,
                n=stats["n"],
                difference=stats["difference"],
                this_only=stats["other_only"],
                next_only=stats["baseline_only"],
                test=None if reason else ("exact McNemar" if set(x + y) <= {0, 1} else "sign test"),
                p_value=None if reason else stats["p_value"],
                p_holm=None,
                significant=None,
                reason=reason,
            )
        )
    for t, adjusted in zip(tests, holm([t.p_value for t in tests]), strict=True):
        t.p_holm = adjusted
        t.significant = None if adjusted is None else adjusted < ALPHA
    for row, t in zip(rows, tests, strict=False):
        row.vs_next = t


# ---------------------------------------------------------------------------------------------- render


def _rate(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _interval(ci: list[float] | None, signed: bool = False) -> str:
    if not ci or ci[0] is None:
        return ""
    return f"[{ci[0]:+.2f}, {ci[1]:+.2f}]" if signed else f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def _neighbour_cell(t: NeighbourTest | None) -> str:
    if t is None:
        return ""
    if t.reason:
        return f"n/a\n({t.reason})"
    return f"{t.mark} {format_p(t.p_holm)}"


def table_rows(board: Leaderboard) -> tuple[list[str], list[list[str]]]:
    """The leaderboard as text cells (terminal and HTML): one row per combination, ranked."""
    metric = board.primary_metric
    header = [
        "rank",
        "#",
        "agent",
        "retriever",
        "exec@1",
        *board.conditions,
        f"Δ {metric}\n(95% CI)",
        "disc.",
        "p",
        "vs next\n(Holm p)",
    ]
    rows: list[list[str]] = []
    for r in board.rows:
        exec1 = r.retrieval["metrics"].get("exec@1")
        cells = [
            str(r.rank),
            str(r.index),
            r.agent,
            r.retriever,
            f"{_rate(exec1)}\n{_interval(r.retrieval['ci95'].get('exec@1'))}".strip(),
        ]
        for c in board.conditions:
            stats = r.conditions.get(c, {})
            cells.append(f"{_rate(stats.get('pass_rate'))}\n{_interval(stats.get('ci95'))}".strip())
        if r.vs_baseline is None:
            cells += ["baseline", "", ""]
        else:
            d = r.vs_baseline.get(metric) or {}
            diff = d.get("difference")
            cells += [
                ("-" if diff is None else f"{diff:+.3f}") + "\n" + _interval(d.get("ci95"), signed=True),
                f"{d.get('baseline_only', 0)}/{d.get('other_only', 0)}",
                format_p(d.get("p_value")),
            ]
        cells.append(_neighbour_cell(r.vs_next))
        rows.append(cells)
    return header, rows


CAPTION = (
    "rates with 95% CIs (pass rates: Wilson; exec@1: bootstrap); Δ = this minus the baseline on shared "
    "queries with its paired-bootstrap 95% CI; disc. = queries only the baseline / only this one passes; "
    "p = exact McNemar; bold: p < 0.05"
)
LEGEND = (
    "vs next: this rank against the one below on the ranking metric, paired on shared queries (exact "
    "McNemar; sign test on --samples fractions), p Holm-corrected over all neighbouring pairs: "
    "> significantly ahead (Holm p < 0.05), ≈ not significant, < significantly behind on the shared "
    "queries, n/a untestable (reason given)"
)


def render_leaderboard_html(board: Leaderboard) -> str:
    """The leaderboard as one self-contained HTML page (no script, no network)."""
    from .html import _env

    header, rows = table_rows(board)
    details = []
    for r in board.rows:
        if r.vs_baseline:
            details.append(
                {
                    "title": f"#{r.index} {r.agent} + {r.retriever}",
                    "rows": [
                        [
                            metric,
                            str(d["n"]),
                            _rate(d["baseline_rate"]),
                            _rate(d["other_rate"]),
                            "-" if d["difference"] is None else f"{d['difference']:+.3f}",
                            _interval(d["ci95"], signed=True),
                            f"{d['baseline_only']}/{d['other_only']}",
                            format_p(d["p_value"]),
                        ]
                        for metric, d in r.vs_baseline.items()
                    ],
                }
            )
    return (
        _env()
        .get_template("leaderboard.html.j2")
        .render(
            board=board,
            header=header,
            rows=rows,
            caption=f"{CAPTION}. {LEGEND}",
            details=details,
            csp="default-src 'none'; style-src 'unsafe-inline'",
        )
    )


def write_leaderboard(board: Leaderboard, matrix_dir: str | Path | None = None) -> tuple[Path, Path]:
    """``leaderboard.json`` and ``leaderboard.html`` in the matrix directory."""
    path = Path(matrix_dir or board.matrix)
    json_path = atomic_write_json(path / JSON_FILE, board.to_json_dict())
    html_path = atomic_write_text(path / HTML_FILE, render_leaderboard_html(board))
    return json_path, html_path
