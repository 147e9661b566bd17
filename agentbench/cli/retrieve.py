"""`agentbench retrieve`: retrieval-only scoring (exec@k and the paper's diagnostics).

Only option parsing and printing live here; the work is :func:`agentbench.retrieval.evaluate_retrieval`.
Retrieval modules are imported inside the command so that ``agentbench --help`` stays fast.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ..errors import ConfigError
from ..files import atomic_write_json, slug
from .options import (
    DEFAULTS,
    ChromaUrlOpt,
    LimitOpt,
    RayOpt,
    RerankKOpt,
    RerankOpt,
    SampleOpt,
    SandboxOpt,
    SandboxWorkersOpt,
    SeedOpt,
    StoreDirOpt,
    TimeoutOpt,
    VisibleTestsOpt,
    check_output_dir,
)

console = Console()

EMBEDDER_HELP = (
    "Repeatable; one results file each. Forms: minilm (default), st:<name-or-path>[?query_prompt=...], "
    "bm25, litellm:<model>."
)


def _file_name(name: str, taken: set[str]) -> str:
    """A results file name per embedder spec, unique within the directory."""
    base = slug(name, 64)
    name_, n = base, 2
    while name_ in taken:
        name_, n = f"{base}-{n}", n + 1
    taken.add(name_)
    return name_


def _fresh_dir(path: Path) -> Path:
    """``path``, or ``path-2``, ``path-3``... when a run started in the same second already used it."""
    candidate, n = path, 2
    while candidate.exists():
        candidate, n = path.with_name(f"{path.name}-{n}"), n + 1
    return candidate


def _fmt(value: float | None, ci: list[float] | None = None) -> str:
    if value is None:
        return "-"
    text = f"{value:.3f}"
    return f"{text} [dim][{ci[0]:.2f}, {ci[1]:.2f}][/]" if ci else text


def _table(results: list[dict], pool: str) -> Table:
    first = results[0]
    table = Table(
        title=f"retrieval on {pool}: {first['n_queries']} queries, {first['n_corpus']} snippets",
        caption="exec@k by execution verdict; \\[lo, hi] = 95% bootstrap CI over queries"
        + ("; held-out asserts only (vector order)" if "rerank" in first else ""),
    )
    table.add_column("metric")
    for r in results:
        table.add_column(r["model"], justify="right")
    ks = first["ks"]
    rows: list[tuple[str, list[str]]] = []
    for k in ks:
        rows.append((f"exec@{k}", [_fmt(r["metrics"][f"exec@{k}"], r["ci95"][f"exec@{k}"]) for r in results]))
    kmax = ks[-1]
    rows.append((f"ndcg@{kmax}", [_fmt(r["metrics"][f"ndcg@{kmax}"]) for r in results]))
    rows.append((f"exec-ndcg gap@{kmax}", [_fmt(r["metrics"][f"exec_ndcg_gap@{kmax}"]) for r in results]))
    rows.append(("MRR", [_fmt(r["metrics"]["mrr"], r["ci95"]["mrr"]) for r in results]))
    rows.append(
        (
            "rank-1 failures: own paired bug",
            [
                f"{_fmt(r['diagnostics']['rank1_failure_paired_share'])} "
                f"({r['diagnostics']['rank1_failures_paired']}/{r['diagnostics']['rank1_failures']})"
                for r in results
            ],
        )
    )
    rows.append(
        (
            "canonical < a paired bug",
            [_fmt(r["diagnostics"]["canonical_below_paired_share"]) for r in results],
        )
    )
    rows.append(("rank-1 tied", [_fmt(r["diagnostics"]["rank1_tied_share"]) for r in results]))

    def top_bug(r: dict) -> str:
        bugs = r["diagnostics"]["by_bug_type"]
        if not bugs:
            return "-"
        name, info = max(bugs.items(), key=lambda kv: (kv[1]["count"], kv[0]))
        return f"{name} {info['share']:.2f}"

    rows.append(("top rank-1 failure", [top_bug(r) for r in results]))
    for label, cells in rows:
        table.add_row(label, *cells)
    return table


def _rerank_table(results: list[dict]) -> Table:
    """Before/after reranking, both on held-out asserts, with what the reranking cost."""
    first = results[0]["rerank"]
    table = Table(
        title=f"reranking the top {first['k']} with {first['name']}",
        caption=(
            f"before = vector order, after = reranked; all on held-out asserts ({first['n_held_out']} held out, "
            f"{first['n_visible']} visible: --visible-tests {first['visible_tests']}, seed {first['seed']})"
        ),
    )
    table.add_column("")
    for r in results:
        table.add_column(r["model"], justify="right")
    kmax = results[0]["ks"][-1]
    names = [f"exec@{k}" for k in results[0]["ks"]] + [f"ndcg@{kmax}", "mrr"]
    for name in names:
        cells = []
        for r in results:
            before, after = r["metrics"][name], r["rerank"]["metrics"][name]
            cells.append(f"{before:.3f} -> {after:.3f} ({after - before:+.3f})")
        table.add_row(f"{name} before -> after", *cells)
    table.add_row("top-1 changed", *[f"{r['rerank']['top1_changed']}/{r['n_queries']}" for r in results])
    table.add_row(
        "cost: executions (run now)",
        *[f"{r['rerank']['cost']['executions']} ({r['rerank']['cost']['executed_now']})" for r in results],
    )
    table.add_row(
        "cost: seconds (sandbox total)",
        *[
            f"{r['rerank']['cost']['seconds']:.1f} ({r['rerank']['cost']['sandbox_seconds']:.1f})"
            for r in results
        ],
    )
    stats = first["stats"]
    if "inputs_total" in stats:
        table.add_row(
            "inputs per query (total)",
            *[
                f"{r['rerank']['stats']['inputs_mean']} ({r['rerank']['stats']['inputs_total']})"
                for r in results
            ],
        )
        table.add_row(
            "unique consensus winner",
            *[
                f"{r['rerank']['stats']['unique_winner']}/{r['n_queries']} "
                f"({r['rerank']['stats']['unique_winner_share']:.2f})"
                for r in results
            ],
        )
    if "queries_with_a_visible_pass" in stats:
        table.add_row(
            "queries with a candidate passing visible",
            *[f"{r['rerank']['stats']['queries_with_a_visible_pass']}/{r['n_queries']}" for r in results],
        )
    return table


def _breakdowns(results: list[dict]) -> Table:
    """exec@1 per domain and the bug types of failing rank-1 snippets, embedders side by side."""
    table = Table(title="breakdowns", caption="domain rows: exec@1; bug-type rows: share of rank-1 failures")
    table.add_column("")
    for r in results:
        table.add_column(r["model"], justify="right")
    domains = sorted({d for r in results for d in r["diagnostics"]["by_domain"]})
    for d in domains:
        cells = []
        for r in results:
            info = r["diagnostics"]["by_domain"].get(d)
            cells.append(f"{info['exec@1']:.3f} (n={info['n_queries']})" if info else "-")
        table.add_row(f"domain {d}", *cells)
    bugs = sorted({b for r in results for b in r["diagnostics"]["by_bug_type"]})
    for b in bugs:
        cells = []
        for r in results:
            info = r["diagnostics"]["by_bug_type"].get(b)
            cells.append(f"{info['share']:.3f} ({info['count']})" if info else "-")
        table.add_row(f"rank-1 failure: {b}", *cells)
    return table


def _write_results(out_dir: Path, results: list[dict]) -> list[Path]:
    """One results file per retriever in ``out_dir``; a failed write is one line naming the path (the
    files written before it stay)."""
    from ..cache import write_problem

    files: list[Path] = []
    taken: set[str] = set()
    path = out_dir
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for res in results:
            path = out_dir / f"{_file_name(res['model'], taken)}.json"
            atomic_write_json(path, res, indent=1)
            files.append(path)
    except OSError as exc:
        written = f" (written: {', '.join(str(f) for f in files)})" if files else ""
        raise ConfigError(
            f"cannot write the retrieval results to {path}: {write_problem(path, exc)}{written}; "
            "pass --out a writable directory and run again"
        ) from exc
    return files


def retrieve(
    pool: Annotated[
        str, typer.Option("--pool", help="`core`, `execretrieval` or a pool directory.")
    ] = "core",
    embedder: Annotated[list[str] | None, typer.Option("--embedder", help=EMBEDDER_HELP)] = None,
    retriever: Annotated[
        list[str] | None,
        typer.Option(
            "--retriever",
            help="Repeatable; your retriever as module:attr (a LangChain BaseRetriever, a callable "
            "(query, k) or a factory taking the corpus). Scored alongside any --embedder.",
        ),
    ] = None,
    limit: LimitOpt = DEFAULTS["limit"],
    sample: SampleOpt = DEFAULTS["sample"],
    out: Annotated[
        Path | None, typer.Option("--out", help="Results directory (default runs/retrieval-<timestamp>/).")
    ] = None,
    store_dir: StoreDirOpt = DEFAULTS["store_dir"],
    chroma_url: ChromaUrlOpt = DEFAULTS["chroma_url"],
    sandbox: SandboxOpt = DEFAULTS["sandbox"],
    workers: SandboxWorkersOpt = DEFAULTS["sandbox_workers"],
    ray: RayOpt = DEFAULTS["ray"],
    timeout: TimeoutOpt = DEFAULTS["timeout"],
    seed: SeedOpt = DEFAULTS["seed"],
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary on stdout.")] = False,
    rerank: RerankOpt = DEFAULTS["rerank"],
    visible_tests: VisibleTestsOpt = DEFAULTS["visible_tests"],
    rerank_k: RerankKOpt = DEFAULTS["rerank_k"],
) -> None:
    """Score retrieval on a pool: exec@1/3/5/10, nDCG, MRR and rank-1 failure diagnostics per embedder."""
    from ..api import retrieval_settings, retrieve_all

    settings = retrieval_settings(
        limit=limit,
        sample=sample,
        sandbox=sandbox,
        sandbox_workers=workers,
        ray=ray,
        timeout=timeout,
        seed=seed,
        store_dir=store_dir,
        chroma_url=chroma_url,
        rerank=rerank,
        visible_tests=visible_tests,
        rerank_k=rerank_k,
    )
    out_dir = out or _fresh_dir(Path("runs") / f"retrieval-{time.strftime('%Y%m%d-%H%M%S')}")
    check_output_dir(out_dir, "--out")  # before any snippet is executed: a bad --out loses no work
    results = retrieve_all(
        pool, embedders=embedder or [], retrievers=retriever or [], settings=settings, show_progress=True
    )
    results = [r.to_json_dict() for r in results]  # the files and tables below read the JSON form
    files = _write_results(out_dir, results)
    if as_json:
        summary = {
            "pool": pool,
            "out": str(out_dir),
            "results": [
                {k: r[k] for k in ("model", "n_queries", "n_corpus", "ks", "metrics", "ci95", "diagnostics")}
                | {"file": str(f), "errors": len(r.get("errors", []))}
                | (
                    {"rerank": {k: v for k, v in r["rerank"].items() if k != "per_query"}}
                    if "rerank" in r
                    else {}
                )
                for r, f in zip(results, files, strict=True)
            ],
        }
        typer.echo(json.dumps(summary, indent=2))
        return
    console.print(_table(results, pool))
    console.print(_breakdowns(results))
    skipped = results[0].get("rerank", {}).get("skipped")
    if skipped:
        console.print(
            f"reranking skipped ({skipped}); every metric is on held-out asserts",
            highlight=False,
            markup=False,
        )
    elif "rerank" in results[0]:
        console.print(_rerank_table(results))
        for r in results:
            rr = r["rerank"]
            console.print(
                f"exec@1 on held-out asserts, {r['model']} + {rr['name']}: before {r['metrics']['exec@1']:.3f}, "
                f"after {rr['metrics']['exec@1']:.3f} (cost: {rr['cost']['executions']} executions, "
                f"{rr['cost']['seconds']:.1f} s)",
                highlight=False,
            )
    for r in results:
        if r.get("errors"):
            first = r["errors"][0]
            console.print(
                f"{r['model']}: failed on {len(r['errors'])} of {r['n_queries']} queries, scored as misses "
                f"(first: {first['query_id']}: {first['error']})",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
    for f in files:
        console.print(f"wrote {f}", highlight=False)
