"""`agentbench run`: end-to-end agent evaluation (a thin wrapper over agentbench.api.evaluate_config)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import ConfigError
from ..llm import DEFAULT_MODEL
from ..pipeline.conditions import DEFAULT_CONDITIONS, available
from ..pipeline.config import RunConfig
from ..retrieval import DEFAULT_EMBEDDER
from .check import (
    AllowInconclusiveOpt,
    FailOverOpt,
    FailUnderOpt,
    JunitOpt,
    NonInferiorOpt,
    OutputFormat,
    SuperiorOpt,
    check_scoring,
    enforce,
    load_baseline,
    parse_gate,
    parse_paired,
    precheck,
    warn_query_counts,
)
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
)
from .options import option as _option

if TYPE_CHECKING:
    from pathlib import Path

_RUN_FIELDS = RunConfig.model_fields
_RUN_DEFAULTS = {name: f.default for name, f in _RUN_FIELDS.items()}


def _run_option(name: str):  # noqa: ANN202 - a typer OptionInfo
    return _option(name, fields=_RUN_FIELDS)


LlmOpt = Annotated[
    list[str] | None,
    typer.Option(
        help="Any LiteLLM model string, or local/qwen2.5-coder-1.5b|0.5b. "
        "Repeat for a matrix run (every LLM with every embedder).",
        show_default=DEFAULT_MODEL,
    ),
]
EmbedderOpt = Annotated[
    list[str] | None,
    typer.Option(
        help="minilm, bm25, st:<model>, litellm:<model>. Repeat for a matrix run.",
        show_default=DEFAULT_EMBEDDER,
    ),
]
RetrieverOpt = Annotated[
    list[str] | None,
    typer.Option(
        help="Your retriever as module:attr (a LangChain BaseRetriever, a callable (query, k) or a "
        "factory taking the corpus); replaces --embedder. Repeatable; with --embedder too, each is one "
        "more retriever of the matrix."
    ),
]
AgentOpt = Annotated[
    list[str] | None,
    typer.Option(
        help="Your agent as module:attr (a LangChain Runnable or a callable taking the task, sync or "
        "async); replaces --llm and --prompt. Repeatable; with --llm too, each is one more agent of "
        "the matrix."
    ),
]
ConditionsOpt = Annotated[
    str,
    typer.Option(
        help=f"Comma-separated subset of {','.join(available(rerank=True))} (rag_reranked needs --rerank)."
    ),
]
_DEFAULT_CONDITIONS = ",".join(DEFAULT_CONDITIONS)
KOpt = Annotated[int, typer.Option("--k", help="Retrieved snippets given as context in the rag condition.")]
ConcurrencyOpt = Annotated[int, typer.Option(help="Concurrent LLM requests.")]
LlmProcessesOpt = Annotated[
    int | None,
    typer.Option(
        help="Worker processes making the API calls; 0: every call in this process. Default: one per 32 "
        "of --concurrency, at most one per core and 4 in all (none below 32, except at least one with "
        "AGENTBENCH_KEEP_WORKERS set). They pay off for a fast "
        "API at high concurrency (at 0.5 s latency and --concurrency 64, 2 took the calls from 1.62 to "
        "1.20 of the ideal time).",
        show_default="one per 32 of --concurrency",
    ),
]
RunDirOpt = Annotated[
    str | None,
    typer.Option(
        help="Run directory (default runs/<timestamp>-<llm>-<embedder>); for a matrix, the directory "
        "holding one run directory per combination (default runs/<timestamp>-matrix)."
    ),
]
ResumeOpt = Annotated[
    bool,
    typer.Option(
        help="Continue the run (or matrix) in --run-dir without redoing finished records or combinations."
    ),
]
RetryErrorsOpt = Annotated[
    bool, typer.Option("--retry-errors/--no-retry-errors", help=_RUN_FIELDS["retry_errors"].description)
]
BaselineOpt = Annotated[
    str | None,
    typer.Option(
        help="Matrix runs: the combination the others are compared with, as its number (1 = first), "
        "LLM,EMBEDDER or an --llm/--embedder value naming one combination. A single run with "
        "--non-inferior/--superior: the baseline run directory they compare with after the run.",
        show_default="1 (matrix)",
    ),
]
PromptOpt = Annotated[
    str | None, typer.Option(help="A prompt template file or directory of <condition>.md files.")
]
ApiBaseOpt = Annotated[str | None, typer.Option(help="OpenAI-compatible base URL for the LLM.")]
MaxTokensOpt = Annotated[int, typer.Option(help="Maximum tokens per generation.")]
TemperatureOpt = Annotated[
    float,
    typer.Option(help="Sampling temperature of the built-in agent (0: greedy; use above 0 with --samples)."),
]
SamplesOpt = Annotated[
    int,
    typer.Option(
        help="Generations per (query, condition): the summary gives pass@k for every k up to it, each "
        "query's pass fraction and the flaky queries."
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print summary.json on stdout.")]
FormatOpt = Annotated[
    OutputFormat, typer.Option("--format", help="table, or json: summary.json on stdout (as --json).")
]

# The options that are RunConfig settings under their own name (--conditions once split at commas), in
# the order they were always passed; --llm, --embedder, --agent and --retriever are added per run.
_SETTINGS = (
    "pool", "conditions", "k", "limit", "sample", "concurrency", "llm_processes", "seed", "prompt",
    "api_base", "max_tokens", "temperature", "samples", "sandbox", "sandbox_workers", "ray", "timeout", "store_dir", "chroma_url",
    "run_dir", "resume", "retry_errors", "max_error_rate", "rerank", "visible_tests", "rerank_k", "tests",
    "max_turns", "max_tool_calls", "max_agent_tokens", "max_agent_seconds", "test_first",
)  # fmt: skip


def run(
    llm: LlmOpt = None,
    embedder: EmbedderOpt = None,
    retriever: RetrieverOpt = None,
    agent: AgentOpt = None,
    pool: PoolOpt = "core",
    conditions: ConditionsOpt = _DEFAULT_CONDITIONS,
    k: KOpt = 1,
    limit: LimitOpt = DEFAULTS["limit"],
    sample: SampleOpt = DEFAULTS["sample"],
    concurrency: ConcurrencyOpt = 4,
    llm_processes: LlmProcessesOpt = None,
    run_dir: RunDirOpt = None,
    resume: ResumeOpt = False,
    retry_errors: RetryErrorsOpt = _RUN_DEFAULTS["retry_errors"],
    max_error_rate: Annotated[float, _run_option("max_error_rate")] = _RUN_DEFAULTS["max_error_rate"],
    baseline: BaselineOpt = None,
    seed: SeedOpt = DEFAULTS["seed"],
    prompt: PromptOpt = None,
    api_base: ApiBaseOpt = None,
    max_tokens: MaxTokensOpt = 1024,
    temperature: TemperatureOpt = 0.0,
    samples: SamplesOpt = 1,
    sandbox: SandboxOpt = DEFAULTS["sandbox"],
    sandbox_workers: SandboxWorkersOpt = DEFAULTS["sandbox_workers"],
    ray: RayOpt = DEFAULTS["ray"],
    timeout: TimeoutOpt = DEFAULTS["timeout"],
    store_dir: StoreDirOpt = DEFAULTS["store_dir"],
    chroma_url: ChromaUrlOpt = DEFAULTS["chroma_url"],
    as_json: JsonOpt = False,
    rerank: RerankOpt = DEFAULTS["rerank"],
    visible_tests: VisibleTestsOpt = DEFAULTS["visible_tests"],
    rerank_k: RerankKOpt = DEFAULTS["rerank_k"],
    tests: Annotated[str, _run_option("tests")] = _RUN_DEFAULTS["tests"],
    max_turns: Annotated[int, _run_option("max_turns")] = _RUN_DEFAULTS["max_turns"],
    max_tool_calls: Annotated[int, _run_option("max_tool_calls")] = _RUN_DEFAULTS["max_tool_calls"],
    max_agent_tokens: Annotated[int, _run_option("max_agent_tokens")] = _RUN_DEFAULTS["max_agent_tokens"],
    max_agent_seconds: Annotated[float | None, _run_option("max_agent_seconds")] = _RUN_DEFAULTS[
        "max_agent_seconds"
    ],
    test_first: Annotated[
        bool, _option("test_first", "--test-first/--no-test-first", fields=_RUN_FIELDS)
    ] = _RUN_DEFAULTS["test_first"],
    # CI gate options; the logic is agentbench.analysis.gate via cli/check.py
    fail_under: FailUnderOpt = None,
    fail_over: FailOverOpt = None,
    junit: JunitOpt = None,
    non_inferior: NonInferiorOpt = None,
    superior: SuperiorOpt = None,
    allow_inconclusive: AllowInconclusiveOpt = False,
    output_format: FormatOpt = OutputFormat.table,
) -> None:
    """Retrieve, generate under each condition, execute in the sandbox, and report how retrieval errors propagate."""
    settings = _settings(locals())  # first: locals() is exactly the options here
    from ..api import run_config

    llms, embedders, agents, retrievers = llm or [], embedder or [], agent or [], retriever or []
    as_json = as_json or output_format is OutputFormat.json
    specs = parse_paired(non_inferior, superior)
    if len(llms) + len(agents) > 1 or len(embedders) + len(retrievers) > 1:
        if fail_under or fail_over or junit or specs or allow_inconclusive:
            raise ConfigError(
                "--fail-under, --fail-over, --junit, --non-inferior, --superior and --allow-inconclusive gate "
                "a single run, not a matrix"
            )
        _run_matrix(run_config(**settings), llms, embedders, agents, retrievers, baseline, as_json)
        return
    if baseline is not None and not specs:
        raise ConfigError(
            "--baseline compares the combinations of a matrix (repeat --llm or --embedder), or, with "
            "--non-inferior/--superior, a single run with a baseline run directory"
        )
    if specs and baseline is None:
        raise ConfigError(f"{specs[0].label.split()[0]} compares with a baseline: add --baseline RUN_DIR")
    config = run_config(
        **settings,
        llm=llms[0] if llms else DEFAULT_MODEL,
        embedder=embedders[0] if embedders else DEFAULT_EMBEDDER,
        agent=agents[0] if agents else None,
        retriever=retrievers[0] if retrievers else None,
    )
    paired = (specs, baseline, allow_inconclusive) if specs else None
    _run_single(config, parse_gate(fail_under, fail_over), junit, as_json, paired)


def _settings(options: dict[str, Any]) -> dict[str, Any]:
    """The RunConfig settings among the command's ``options`` (by name), --conditions as a list."""
    settings = {name: options[name] for name in _SETTINGS}
    settings["conditions"] = [c.strip() for c in options["conditions"].split(",") if c.strip()]
    return settings


def _run_single(
    config: RunConfig, thresholds: list, junit: Path | None, as_json: bool, paired: tuple | None = None
) -> None:
    """One run: check the gate's thresholds (and the ``paired`` gates' specs and baseline directory) against
    the config (exit 2 before any work), evaluate, print the summary (or summary.json), then fail on too many
    errors and enforce the gate (exit 1). The analysis stage is imported only where it is used, so that
    it costs nothing before the first LLM call."""
    from ..api import evaluate_config
    from ..pipeline.outage import check_error_rate

    precheck(config, thresholds)
    specs, baseline, allow_inconclusive = paired or ([], None, False)
    base = None
    if specs:  # the baseline directory and the gates' conditions are checked before any work
        from ..analysis.noninferiority import check_conditions

        base = load_baseline(config.run_dir or "the run", config.pool, baseline)
        check_conditions(specs, config.conditions)
        check_conditions(specs, base.config.conditions, f"the baseline {baseline}")
    result = evaluate_config(config, show_progress=not as_json)
    from ..analysis.terminal import print_rerank, print_summary

    if as_json:
        typer.echo(json.dumps(result.summary.to_json_dict(), indent=2))
    else:
        print_summary(result.summary)
        print_rerank(result.summary.rerank)
        typer.echo(f"run directory: {result.run_dir}")
    check_error_rate(result.records, config.max_error_rate, result.run_dir)
    results = None
    if base is not None:
        from ..analysis.compare import load_run
        from ..analysis.noninferiority import gate_runs

        run = load_run(result.run_dir)
        check_scoring(result.run_dir, run.retrieval, base)
        results = gate_runs(run, base, specs, allow_inconclusive=allow_inconclusive)
        warn_query_counts(run, base)
    enforce(result.summary, thresholds, records=result.records, junit=junit, paired=results)


def _run_matrix(
    config: RunConfig,
    llms: list[str],
    embedders: list[str],
    agents: list[str],
    retrievers: list[str],
    baseline: str | None,
    as_json: bool,
) -> None:
    """A matrix run (repeated --llm/--embedder/--agent/--retriever): agentbench.api.evaluate_matrix_config."""
    from ..analysis.leaderboard import HTML_FILE, JSON_FILE
    from ..analysis.terminal import print_leaderboard
    from ..api import evaluate_matrix_config
    from ..pipeline.outage import check_error_rate

    result = evaluate_matrix_config(
        config,
        llms=llms,
        embedders=embedders,
        agents=agents,
        retrievers=retrievers,
        baseline=baseline,
        show_progress=not as_json,
    )
    if as_json:
        typer.echo(json.dumps(result.leaderboard.to_json_dict(), indent=2))
    else:
        print_leaderboard(result.leaderboard)
        typer.echo(f"matrix directory: {result.path} (leaderboard: {JSON_FILE}, {HTML_FILE})")
    for run in result.runs:
        if run is not None:
            check_error_rate(run.records, config.max_error_rate, result.path)
