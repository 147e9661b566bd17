"""`agentbench run`: end-to-end agent evaluation (a thin wrapper over agentbench.pipeline.evaluate)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from ..agent import CONDITIONS, DEFAULT_MODEL
from ..retrieval import DEFAULT_EMBEDDER


def run(
    llm: Annotated[
        str, typer.Option(help="Any LiteLLM model string, or local/qwen2.5-coder-1.5b|0.5b.")
    ] = DEFAULT_MODEL,
    embedder: Annotated[
        str, typer.Option(help="minilm, bm25, st:<model>, litellm:<model>.")
    ] = DEFAULT_EMBEDDER,
    pool: Annotated[str, typer.Option(help="`core`, `execretrieval` or a pool directory.")] = "core",
    conditions: Annotated[
        str, typer.Option(help=f"Comma-separated subset of {','.join(CONDITIONS)}.")
    ] = ",".join(CONDITIONS),
    k: Annotated[
        int, typer.Option("--k", help="Retrieved snippets given as context in the rag condition.")
    ] = 1,
    limit: Annotated[int | None, typer.Option(help="Only the first N queries of the pool.")] = None,
    concurrency: Annotated[int, typer.Option(help="Concurrent LLM requests.")] = 4,
    run_dir: Annotated[
        str | None, typer.Option(help="Run directory (default runs/<timestamp>-<llm>-<embedder>).")
    ] = None,
    resume: Annotated[
        bool, typer.Option(help="Continue the run in --run-dir without redoing finished records.")
    ] = False,
    seed: Annotated[
        int, typer.Option(help="Seed for the distractor choice, LLM sampling and bootstrap.")
    ] = 0,
    prompt: Annotated[
        str | None, typer.Option(help="A prompt template file or directory of <condition>.md files.")
    ] = None,
    api_base: Annotated[str | None, typer.Option(help="OpenAI-compatible base URL for the LLM.")] = None,
    max_tokens: Annotated[int, typer.Option(help="Maximum tokens per generation.")] = 1024,
    sandbox: Annotated[str, typer.Option(help="Executor: auto, docker or process.")] = "auto",
    sandbox_workers: Annotated[int | None, typer.Option(help="Sandbox workers (default: cores).")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds per execution.")] = 10.0,
    store_dir: Annotated[str, typer.Option(help="Where Chroma stores are persisted.")] = "stores",
    chroma_url: Annotated[
        str | None, typer.Option(help="Use a Chroma server instead of the embedded store.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print summary.json on stdout.")] = False,
) -> None:
    """Retrieve, generate under each condition, execute in the sandbox, and report how retrieval errors propagate."""
    from ..analysis import print_summary
    from ..pipeline import RunConfig, evaluate

    config = RunConfig(
        pool=pool,
        llm=llm,
        embedder=embedder,
        conditions=[c.strip() for c in conditions.split(",") if c.strip()],
        k=k,
        limit=limit,
        concurrency=concurrency,
        seed=seed,
        prompt=prompt,
        api_base=api_base,
        max_tokens=max_tokens,
        sandbox=sandbox,
        sandbox_workers=sandbox_workers,
        timeout=timeout,
        store_dir=store_dir,
        chroma_url=chroma_url,
        run_dir=run_dir,
        resume=resume,
    )
    result = evaluate(config, show_progress=not as_json)
    if as_json:
        typer.echo(json.dumps(result.summary, indent=2))
        return
    print_summary(result.summary)
    typer.echo(f"run directory: {result.run_dir}")
