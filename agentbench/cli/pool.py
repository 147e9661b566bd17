"""`agentbench pool ...` commands: build, augment, validate, stats, replicate, mine."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from ..errors import ConfigError, PoolError
from ..execution.base import SANDBOX_KINDS
from ..pools.augment import DEFAULT_INPUTS, DEFAULT_MAX_ADDED
from .options import check_output_dir

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..execution import ExecResult, Executor, Job
    from ..pools import Pool
    from ..pools.augment import AugmentReport

app = typer.Typer(help="Build, validate and describe task pools.", no_args_is_help=True)
console = Console()

SandboxOpt = Annotated[str, typer.Option("--sandbox", help=f"Executor: {', '.join(SANDBOX_KINDS)}.")]
WorkersOpt = Annotated[
    int | None,
    typer.Option("--sandbox-workers", help="Parallel workers (default: cores; with --ray, per node)."),
]
RayOpt = Annotated[
    str | None,
    typer.Option(
        "--ray",
        help="Run the jobs on the Ray cluster at this address (HOST:PORT of its head, or auto on a node "
        "of it); every node runs its own --sandbox executor.",
    ),
]

InputsOpt = Annotated[
    int,
    typer.Option("--inputs", min=1, max=10_000, help="Inputs generated per task when augmenting the tests."),
]


def _write(pool: Pool, out: Path) -> None:
    """``write_pool`` with a failed write as one line naming the path (files already there stay whole:
    each is replaced atomically or not at all)."""
    from ..cache import write_problem
    from ..pools import write_pool

    try:
        write_pool(pool, out)
    except OSError as exc:
        raise ConfigError(
            f"cannot write the pool to {out}: {write_problem(out, exc)}; pass --out a writable directory"
        ) from exc


def _runner(executor: Executor, label: str) -> Callable[[list[Job]], list[ExecResult]]:
    """Run jobs through the shared execution cache with a progress bar per batch."""
    from ..execution.cache import ExecCache, run_cached
    from ..progress import progress_bar

    rounds = 0
    cache = ExecCache()

    def run(jobs: list[Job]) -> list[ExecResult]:
        nonlocal rounds
        rounds += 1
        with progress_bar(f"{label} ({rounds})" if rounds > 1 else label, len(jobs)) as advance:
            return run_cached(executor, jobs, cache, progress=advance)

    return run


@app.command("build")
def build(
    src: Annotated[Path, typer.Option("--from", help="Source JSONL/TOML file or a directory of them.")],
    out: Annotated[Path, typer.Option("--out", help="Pool directory to write.")],
    distractors: Annotated[int, typer.Option(min=0, max=4, help="Distractors per query (at most 4).")] = 4,
    seed: Annotated[int, typer.Option(help="Seed for choosing among mutants.")] = 0,
    timeout: Annotated[
        float,
        typer.Option(
            min=0.1,
            help="CPU seconds per canonical; a mutant gets a fifth of it and is rejected if it needs more.",
        ),
    ] = 10.0,
    crude: Annotated[
        bool,
        typer.Option(
            "--crude-distractors",
            help="Also keep crude edits (literal operand swaps, large removals) and mutants failing or "
            "raising on every assert; by default they are rejected.",
        ),
    ] = False,
    top_up: Annotated[
        bool,
        typer.Option(
            "--top-up/--no-top-up",
            help="A task left with fewer than --distractors realistic distractors takes distinct single "
            "edits that fail every assert, after the realistic ones (the pool `core` was built without).",
        ),
    ] = True,
    sandbox: SandboxOpt = "auto",
    workers: WorkersOpt = None,
    ray: RayOpt = None,
    augment: Annotated[
        bool,
        typer.Option(
            "--augment-tests",
            help="Also derive new asserts from each task's asserts that kill surviving mutants (stored "
            "apart, as augmented_tests; see docs/augment.md).",
        ),
    ] = False,
    inputs: InputsOpt = DEFAULT_INPUTS,
    as_json: Annotated[bool, typer.Option("--json", help="Print the build summary as JSON.")] = False,
) -> None:
    """Turn canonical implementations with tests into a pool of execution-verified distractors."""
    from ..execution import make_executor
    from ..pools import build_pool, read_sources
    from ..pools.augment import augment_pool
    from ..pools.build import write_build_report

    tasks = read_sources(src)
    check_output_dir(out, "--out")  # before any execution
    augmented = None
    with make_executor(sandbox, workers, ray) as executor:
        run = _runner(executor, "executing")
        pool, report = build_pool(
            tasks,
            run,
            distractors=distractors,
            seed=seed,
            name=out.name,
            timeout=timeout,
            realistic=not crude,
            top_up=top_up,
        )  # a build that drops every task raises here: nothing is written, a pool at --out stays
        if augment:
            pool, augmented = augment_pool(pool, run, seed=seed, inputs=inputs, timeout=timeout)
    _write(pool, out)
    write_build_report(report, out)
    summary = report.to_json()
    if augmented is not None:
        _write_augment_report(augmented, out)
        summary["augment"] = augmented.summary()
        summary["augment"]["per_task"] = [t.to_json() for t in augmented.tasks]
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    table = Table(title=f"pool build -> {out}", show_header=False)
    table.add_row("queries in", str(summary["queries_in"]))
    table.add_row("queries out", str(summary["queries_out"]))
    for k, v in summary["queries_by_distractor_count"].items():
        table.add_row(f"queries with {k} distractors", str(v))
    for k, v in summary["bug_types"].items():
        table.add_row(f"bug type {k}", str(v))
    for k, v in summary["rejects"].items():
        table.add_row(f"rejected mutants: {k}", str(v))
    if summary["top_up"]:
        table.add_row("topped up (fail every assert)", str(summary["topped_up"]))
    console.print(table)
    for line in report.dropped_queries:
        console.print(f"[yellow]dropped[/] {line}")
    if augmented is not None:
        _print_augment(augmented, out)


def _write_augment_report(report: AugmentReport, out: Path) -> None:
    from ..files import atomic_write_text
    from ..pools.augment import AUGMENT_REPORT

    try:
        atomic_write_text(out / AUGMENT_REPORT, json.dumps(report.to_json(), indent=1) + "\n")
    except OSError as exc:
        raise ConfigError(f"cannot write {out / AUGMENT_REPORT}: {exc.strerror}") from exc


def _print_augment(report: AugmentReport, out: Path) -> None:
    """Each task's mutation score before and after (killed / non-equivalent mutants), then a summary."""
    from ..pools.augment import AUGMENT_REPORT

    table = Table(title="mutation score per task (killed / non-equivalent mutants)")
    for col in ("task", "mutants", "before", "after", "added asserts", "dropped inputs"):
        table.add_column(col)
    for t in report.tasks:
        known = t.known_non_equivalent
        table.add_row(
            f"{t.query_id} {t.entry_id}",
            str(t.mutants),
            f"{t.killed_by_original}/{known}",
            f"{t.killed_by_original + t.killed_by_added}/{known}",
            str(t.added),
            str(sum(t.dropped.values())),
        )
    console.print(table)
    console.print(report.summary_line(), highlight=False)
    console.print(f"per-task report: {out / AUGMENT_REPORT}", highlight=False)


@app.command("augment")
def augment_cmd(
    pool: Annotated[str, typer.Argument(help="`core`, `humaneval`, `execretrieval` or a pool directory.")],
    out: Annotated[
        Path, typer.Option("--out", help="Pool directory to write (the input pool is not changed).")
    ],
    seed: Annotated[int, typer.Option(help="Seed for generating inputs and sampling mutants.")] = 0,
    inputs: InputsOpt = DEFAULT_INPUTS,
    max_added: Annotated[
        int, typer.Option("--max-added", min=1, max=100, help="New asserts kept per task at most.")
    ] = DEFAULT_MAX_ADDED,
    timeout: Annotated[
        float, typer.Option(min=0.1, help="CPU seconds per canonical job (as in pool build).")
    ] = 10.0,
    loose: Annotated[
        bool,
        typer.Option(
            "--loose-inputs",
            help="Also generate values outside what the original asserts pass (negative numbers where "
            "all are non-negative, characters no example string has); by default they are not generated.",
        ),
    ] = False,
    sandbox: SandboxOpt = "auto",
    workers: WorkersOpt = None,
    ray: RayOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Add asserts that separate wrong solutions to an existing pool, stored apart as augmented_tests."""
    from ..execution import make_executor
    from ..pools import load_pool
    from ..pools.augment import augment_pool

    source = load_pool(pool)
    if out.resolve() == Path(source.path).resolve():
        raise ConfigError(f"--out {out} is the input pool: write the augmented pool to another directory")
    check_output_dir(out, "--out")
    with make_executor(sandbox, workers, ray) as executor:
        augmented, report = augment_pool(
            source,
            _runner(executor, "augmenting"),
            seed=seed,
            inputs=inputs,
            max_added=max_added,
            timeout=timeout,
            strict=not loose,
        )
    _write(augmented.model_copy(update={"name": out.name}), out)
    _write_augment_report(report, out)
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2))
        return
    _print_augment(report, out)


@app.command("validate")
def validate(
    pool: Annotated[str, typer.Argument(help="`core`, `execretrieval` or a pool directory.")],
    execute: Annotated[
        bool, typer.Option("--execute", help="Also run every snippet against its asserts.")
    ] = False,
    sandbox: SandboxOpt = "auto",
    workers: WorkersOpt = None,
    ray: RayOpt = None,
) -> None:
    """Check a pool: ids, references, labels, parseable code and (with --execute) verdicts."""
    from ..execution import make_executor
    from ..pools.io import resolve_pool_path, scan_pool
    from ..pools.validate import (
        EMPTY_FIX,
        execution_problems,
        spec_problems,
        structural_problems,
        structural_warnings,
    )

    path = resolve_pool_path(pool)
    scan = scan_pool(path)
    if not scan.problems and not scan.pool.queries:  # one line: the rest cannot be checked
        raise PoolError(f"pool {path} holds no queries: {EMPTY_FIX}")
    unstated, spec_warnings = spec_problems(scan)
    problems = scan.problems + structural_problems(scan) + unstated
    for w in structural_warnings(scan) + spec_warnings:
        typer.echo(f"{path}/{w.file}{f':{w.line}' if w.line else ''}: warning: {w.message}", err=True)
    if not problems and execute:
        with make_executor(sandbox, workers, ray) as executor:
            problems = execution_problems(scan.pool, _runner(executor, "verifying"))
    for p in problems:
        typer.echo(f"{path}/{p}", err=True)  # one line per problem, never wrapped
    if problems:
        typer.echo(f"{len(problems)} problem(s) in {path}", err=True)
        raise typer.Exit(2)
    n_q, n_c = len(scan.pool.queries), len(scan.pool.corpus)
    checked = "structure and execution" if execute else "structure (add --execute to run the code)"
    console.print(f"ok: {n_q} queries, {n_c} snippets; checked {checked}", highlight=False)


@app.command("stats")
def stats(
    pool: Annotated[str, typer.Argument(help="`core`, `execretrieval` or a pool directory.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")] = False,
) -> None:
    """Queries, snippets, domains, distractors per query and bug types of a pool."""
    from ..pools import load_pool, pool_stats

    s = pool_stats(load_pool(pool))
    if as_json:
        typer.echo(json.dumps(s, indent=2))
        return
    table = Table(title=f"pool {pool}", show_header=False)
    for key in ("queries", "snippets", "canonicals", "distractors", "share_with_4_distractors"):
        table.add_row(key, str(s[key]))
    for k, v in s["distractors_per_query"].items():
        table.add_row(f"queries with {k} distractors", str(v))
    for k, v in s["domains"].items():
        table.add_row(f"domain {k}", str(v))
    for k, v in s["bug_types"].items():
        table.add_row(f"bug type {k}", str(v))
    share = s["failing_share"]
    if share.get("distractors"):
        table.add_row(
            "share of asserts a distractor fails",
            f"median {share['median']:.2f} (quartiles {share['p25']:.2f}-{share['p75']:.2f}); "
            f"{share['failing_all']} fail all",
        )
        for k, v in share["histogram"].items():
            table.add_row(f"  distractors failing {k}", str(v))
    for k, v in (s.get("rejected_mutants") or {}).items():
        table.add_row(f"rejected mutants: {k}", str(v))
    if top_up := s.get("top_up"):
        table.add_row("top-up rule", f"on, {top_up['distractors']} distractors" if top_up["rule"] else "off")
    console.print(table)


@app.command("replicate")
def replicate(
    pool: Annotated[str, typer.Argument(help="`core`, `execretrieval` or a pool directory.")],
    snippets: Annotated[int, typer.Option("--snippets", min=1, help="Snippets in the new pool.")],
    out: Annotated[Path, typer.Option("--out", help="Pool directory to write.")],
) -> None:
    """Make a large pool for scaling tests: renamed replicas of POOL, exactly --snippets snippets."""
    from ..pools import load_pool, replicate_pool

    check_output_dir(out, "--out")
    source = load_pool(pool)
    big = replicate_pool(source, snippets, name=out.name)
    _write(big, out)
    console.print(
        f"wrote {out}: {len(big.queries)} queries, {len(big.corpus)} snippets "
        f"({len(big.queries) / max(1, len(source.queries)):.1f} replicas of {pool})",
        highlight=False,
    )


@app.command("mine")
def mine(
    src: Annotated[Path, typer.Argument(help="A Python project: checkout, unpacked sdist or sdist archive.")],
    out: Annotated[Path, typer.Option("--out", help="Pool directory to write.")],
    distractors: Annotated[int, typer.Option(min=0, max=4, help="Distractors per query (at most 4).")] = 4,
    seed: Annotated[int, typer.Option(help="Seed for choosing among mutants.")] = 0,
    timeout: Annotated[
        float, typer.Option(min=0.1, help="CPU seconds per canonical (as in pool build).")
    ] = 10.0,
    max_asserts: Annotated[int, typer.Option("--max-asserts", min=1, help="Asserts kept per task.")] = 25,
    min_asserts: Annotated[
        int, typer.Option("--min-asserts", min=1, help="Asserts a function needs to become a task.")
    ] = 3,
    sandbox: SandboxOpt = "auto",
    workers: WorkersOpt = None,
    ray: RayOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the mining summary as JSON.")] = False,
) -> None:
    """Mine a Python repository's functions and unit tests into an execution-verified pool."""
    from ..cache import write_problem
    from ..execution import make_executor
    from ..pools.mine import REPORT_FILE, mine_source, write_mined

    check_output_dir(out, "--out")  # before any work

    @contextlib.contextmanager
    def runner():
        with make_executor(sandbox, workers, ray) as executor:
            yield _runner(executor, "verifying")

    pool, report = mine_source(
        src,
        runner,
        distractors=distractors,
        seed=seed,
        name=out.name,
        timeout=timeout,
        max_asserts=max_asserts,
        min_asserts=min_asserts,
    )
    try:
        write_mined(pool, report, out)
    except OSError as exc:
        raise ConfigError(
            f"cannot write the pool to {out}: {write_problem(out, exc)}; pass --out a writable directory"
        ) from exc
    if as_json:
        typer.echo(json.dumps(report.summary(), indent=2))
        return
    table = Table(title=f"pool mine {src.name} -> {out}", show_header=False)
    for label, value in report.summary_rows():
        table.add_row(label, value)
    console.print(table)
    console.print(f"per-file report: {out / REPORT_FILE}", highlight=False)
