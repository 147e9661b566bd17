"""`agentbench retrieve`: retrieval-only scoring (exec@k and the paper's diagnostics).

Only option parsing and writing the results files live here; the work is
:func:`agentbench.api.retrieve_all`, the tables :func:`agentbench.analysis.terminal.print_retrieval`.
Retrieval modules are imported inside the command so that ``agentbench --help`` stays fast.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import ConfigError
from ..files import atomic_write_json, slug
from .options import (
    DEFAULTS,
    ChromaUrlOpt,
    LimitOpt,
    PoolOpt,
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

if TYPE_CHECKING:
    from ..retrieval.results import RetrievalResult

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


def _write_results(out_dir: Path, results: list[RetrievalResult]) -> list[Path]:
    """One results file per retriever in ``out_dir``; a failed write is one line naming the path (the
    files written before it stay)."""
    from ..cache import write_problem

    files: list[Path] = []
    taken: set[str] = set()
    path = out_dir
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for res in results:
            path = out_dir / f"{_file_name(res.model, taken)}.json"
            atomic_write_json(path, res.to_json_dict(), indent=1)
            files.append(path)
    except OSError as exc:
        written = f" (written: {', '.join(str(f) for f in files)})" if files else ""
        raise ConfigError(
            f"cannot write the retrieval results to {path}: {write_problem(path, exc)}{written}; "
            "pass --out a writable directory and run again"
        ) from exc
    return files


def _json_summary(pool: str, out_dir: Path, results: list[RetrievalResult], files: list[Path]) -> dict:
    """``--json``: per retriever its headline numbers and results file (the rerank section without its
    per-query rows)."""
    summary: list[dict] = []
    for res, f in zip(results, files, strict=True):
        r = res.to_json_dict()
        entry = {k: r[k] for k in ("model", "n_queries", "n_corpus", "ks", "metrics", "ci95", "diagnostics")}
        entry |= {"file": str(f), "errors": len(res.errors)}
        if "rerank" in r:
            entry["rerank"] = {k: v for k, v in r["rerank"].items() if k != "per_query"}
        summary.append(entry)
    return {"pool": pool, "out": str(out_dir), "results": summary}


def retrieve(
    pool: PoolOpt = "core",
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
    from ..analysis.terminal import print_retrieval
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
    files = _write_results(out_dir, results)
    if as_json:
        typer.echo(json.dumps(_json_summary(pool, out_dir, results, files), indent=2))
        return
    print_retrieval(results, pool, files)
