"""The record of one (query, condition): its generation, the verdict on it and what its context was.

Pure functions of the generation and the sandbox's verdict, kept apart from the streaming that produces
them so the fields of a :class:`RunRecord` (inheritance of a buggy context's outcomes, reappearance of a
distractor's edit) are decided in one place.
"""

from __future__ import annotations

from ..agent import Generation
from ..execution import ExecResult
from ..pools import Pool
from ..pools.models import DistractorMeta
from .plan import WorkItem
from .records import RunRecord
from .tools import RunTools

__all__ = ["make_record", "reappears"]


def reappears(meta: DistractorMeta | None, distractor_code: str, code: str) -> bool | None:
    """Does the distractor's edit show up in the generation: its mutated line, or (for a removed guard)
    a copy of the distractor that lacks the guard?"""
    if meta is None or not code or not meta.has_line:
        return None
    lines = {line.strip() for line in code.splitlines() if line.strip()}
    if meta.bug_type == "remove_edge_case_check" or not meta.line_after:
        body = {line.strip() for line in distractor_code.splitlines() if line.strip()}
        copied = len(body & lines) >= len(body) / 2
        removed = meta.line_before.splitlines()[:1]
        return copied and not (removed and removed[0].strip() in lines)
    return meta.line_after.strip() in lines and meta.line_before.strip() not in lines


def make_record(
    it: WorkItem,
    gen: Generation,
    verdict: ExecResult | None,
    exec_seconds: float,
    seconds: float,
    pool: Pool,
    context_verdicts: dict[tuple[str, str], list[str]],
    metas: dict[str, DistractorMeta],
    tools: RunTools | None,
) -> RunRecord:
    """The record of one (query, condition): generation, verdict and what its context was."""
    status = "retriever_error" if it.error else gen.status
    if verdict is not None and verdict.infra_error:
        status = "infra_error"
    first = it.context_ids[0] if it.context_ids else None
    ctx_results = context_verdicts.get((it.query.query_id, first), []) if first else []
    ctx_passes = (bool(ctx_results) and all(r == "pass" for r in ctx_results)) if first else None
    results = list(verdict.results) if verdict is not None else []
    passed = bool(verdict is not None and verdict.passed)
    buggy = first is not None and ctx_passes is False
    inherited = None
    if buggy and status in ("ok", "no_code") and not passed and results:
        inherited = [r == "pass" for r in results] == [r == "pass" for r in ctx_results]
    snippet = pool.snippet(first) if first else None
    return RunRecord(
        query_id=it.query.query_id,
        condition=it.condition.name,
        sample=it.sample,
        domain=it.query.domain,
        context_ids=it.context_ids,
        context_kind=it.kind,
        context_passes=ctx_passes,
        context_results=ctx_results,
        context_bug_type=(snippet.bug_type or "") if snippet else "",
        task_text="spec" if it.query.spec else "query",
        messages=gen.messages,
        response=gen.response,
        code=gen.code,
        status=status,
        error=it.error or gen.error or (verdict.infra_error if verdict is not None else None),
        results=results,
        passed=passed,
        inherited_outcomes=inherited,
        mutated_line_reappears=(
            reappears(metas.get(first or ""), snippet.code, gen.code) if buggy and snippet else None
        ),
        prompt_tokens=gen.usage.prompt_tokens,
        completion_tokens=gen.usage.completion_tokens,
        cost_usd=gen.cost_usd,
        cached=gen.cached,
        llm_seconds=gen.llm_seconds,
        exec_seconds=exec_seconds if verdict is not None else 0.0,
        seconds=seconds,
        trajectory=gen.trajectory,
        tool_stats=(
            {**gen.tool_stats, "visible_tests": list(tools.split.split(it.query).visible_idx)}
            if gen.tool_stats is not None and tools is not None
            else gen.tool_stats
        ),
    )
