"""Verification in the sandbox, then the builder's distractors, then the repository's other functions.

1. Each function's candidate asserts run once against its assembled code, in the sandbox, with nothing
   of the repository present: an assert that does not pass there (it needed a file, an import the snippet
   lacks, state another test left behind) is skipped as ``fails_in_sandbox``.
2. The builder (:func:`agentbench.pools.build.build_pool`, default rules) verifies each task again and
   makes its distractors.
3. The repository's other functions join the corpus as snippets of no query (``"role": "other"``,
   labelled ``incorrect``): retrieval competes with the real codebase. None of them defines a name any
   query's tests call, so each fails every query's asserts, and exec@k and the propagation metrics (which
   score by execution) count them as wrong for every query.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ...errors import SandboxError
from ...execution import ExecResult, Job
from ..build import BuildReport, SourceTask, build_pool
from ..models import Pool, Snippet
from .classify import Candidate
from .discover import Function
from .scope import SetupItem

__all__ = ["Plan", "verify_asserts", "pick_asserts", "build_mined_pool", "RunJobs"]

RunJobs = Callable[[list[Job]], list[ExecResult]]


@dataclass
class Plan:
    """One function on its way to becoming a task."""

    fn: Function
    code: str
    candidates: list[Candidate] = field(default_factory=list)
    status: str = "task"  # or the reason it is not one
    detail: str = ""

    @property
    def kept(self) -> list[Candidate]:
        return [c for c in self.candidates if c.kept]

    def setup(self) -> list[SetupItem]:
        return sorted({item for c in self.kept for item in c.setup})

    def job(self, timeout: float) -> Job:
        setup = self.setup()
        imports = "\n".join(i.text for i in setup if i.key[0] == 0)
        defs = "\n\n".join(i.text for i in setup if i.key[0] != 0)
        text = "\n\n".join(p for p in (imports, defs) if p)
        return Job(self.code, tuple(c.text or "" for c in self.kept), timeout, text)


def verify_asserts(plans: list[Plan], run: RunJobs, timeout: float) -> None:
    """Run every plan's candidate asserts once; those that fail are skipped (``fails_in_sandbox``)."""
    todo = [p for p in plans if p.kept]
    if not todo:
        return
    results = run([p.job(timeout) for p in todo])
    broken = [r for r in results if r.infra_error]
    if broken:
        raise SandboxError(
            f"{len(broken)} of {len(results)} verification jobs hit sandbox infrastructure errors (first: "
            f"{broken[0].infra_error}); run again"
        )
    for plan, res in zip(todo, results, strict=True):
        for cand, outcome in zip(plan.kept, res.results, strict=True):
            if outcome != "pass":
                cand.skip("fails_in_sandbox", f"{outcome[:80]} when run alone against the function")


def pick_asserts(plan: Plan, limit: int) -> None:
    """Keep at most ``limit`` asserts, taking them from each test site in turn (so one long table does not
    crowd out the other tests); the rest are skipped as ``over_limit``."""
    by_site: dict[tuple[str, str], list[Candidate]] = {}
    for c in plan.kept:
        by_site.setdefault((c.rel, c.site), []).append(c)
    chosen: list[Candidate] = []
    queues = list(by_site.values())
    while len(chosen) < limit and any(queues):
        for q in queues:
            if q and len(chosen) < limit:
                chosen.append(q.pop(0))
    keep = {id(c) for c in chosen}
    for c in plan.kept:
        if id(c) not in keep:
            c.skip("over_limit", f"the function already has {limit} asserts")


@dataclass
class Others:
    added: int = 0
    excluded: dict[str, int] = field(default_factory=dict)


def build_mined_pool(
    tasks: list[SourceTask],
    plans: dict[str, Plan],
    others: list[tuple[Function, str]],
    run: RunJobs,
    *,
    distractors: int,
    seed: int,
    name: str,
    timeout: float,
) -> tuple[Pool, BuildReport, Others]:
    pool, report = build_pool(tasks, run, distractors=distractors, seed=seed, name=name, timeout=timeout)
    for q in pool.queries:
        plan = plans[str(q.entry_id)]
        fn = plan.fn
        meta = dict(q.metadata) if isinstance(q.metadata, dict) else {}
        meta["function_name"] = fn.name  # the builder takes the first function; helpers come first here
        meta["source"] = {"path": fn.module.rel, "line": fn.node.lineno, "qualname": fn.qualname}
        q.metadata = meta
    task_names = {plans[str(q.entry_id)].fn.name for q in pool.queries}
    codes = {s.code for s in pool.corpus}
    extra = Others()
    for fn, code in others:
        if fn.name in task_names:
            extra.excluded["defines_a_task_name"] = extra.excluded.get("defines_a_task_name", 0) + 1
            continue
        if code in codes:
            extra.excluded["duplicate_code"] = extra.excluded.get("duplicate_code", 0) + 1
            continue
        codes.add(code)
        pool.corpus.append(
            Snippet(
                corpus_id=f"c_{len(pool.corpus) + 1:04d}",
                code=code,
                label="incorrect",
                source_entry_id=fn.key,
                role="other",
            )
        )
        extra.added += 1
    return pool, report, extra
