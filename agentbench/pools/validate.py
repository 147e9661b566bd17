"""Pool checks: structure (ids, references, labels, parseable code) and, optionally, execution."""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Callable

from ..execution import ExecResult, Executor, Job
from .models import Pool
from .problems import Problem, ScanResult
from .spec import borrowed_names, spec_gaps

__all__ = ["structural_problems", "structural_warnings", "execution_problems", "spec_problems", "EMPTY_FIX"]

EMPTY_FIX = "add at least one query (with its tests and snippets) or pass another pool"

# pass, FAIL, FAIL:<message>, TIMEOUT, ERROR:<name>, in any case, with any message after the word
_OUTCOME = re.compile(r"^(pass|fail|timeout|error)\b", re.I)
Q, C, D, X = "queries.jsonl", "corpus.jsonl", "distractor_metadata.jsonl", "execution_cache.jsonl"


def _parse_error(code: str) -> str | None:
    try:
        ast.parse(code)
    except SyntaxError as exc:
        return f"{exc.msg} at line {exc.lineno}"
    return None


def structural_problems(scan: ScanResult) -> list[Problem]:
    """Problems that need no execution. Row-level read problems are in ``scan.problems`` already."""
    pool, loc = scan.pool, scan.locations
    out: list[Problem] = []
    if not pool.queries and not any(p.file == Q for p in scan.problems):
        # read without a problem, yet empty: nothing to retrieve for, generate or score
        out.append(Problem(Q, None, f"the pool holds no queries: {EMPTY_FIX}"))

    def at(file: str, ident: str) -> int | None:
        return loc.get((file, ident))

    for qid, n in Counter(q.query_id for q in pool.queries).items():
        if n > 1:
            out.append(Problem(Q, at(Q, qid), f"query_id {qid!r} appears {n} times; ids must be unique"))
    for cid, n in Counter(s.corpus_id for s in pool.corpus).items():
        if n > 1:
            out.append(Problem(C, at(C, cid), f"corpus_id {cid!r} appears {n} times; ids must be unique"))

    snippets = {s.corpus_id: s for s in pool.corpus}
    for s in pool.corpus:
        if s.label == "correct" and s.bug_type:
            out.append(
                Problem(C, at(C, s.corpus_id), f"{s.corpus_id} is labelled correct but has a bug_type")
            )

    for q in pool.queries:
        line = at(Q, q.query_id)
        if not q.correct_corpus_ids:
            out.append(Problem(Q, line, f"{q.query_id} has no correct_corpus_ids"))
        if not q.test_suite:
            out.append(Problem(Q, line, f"{q.query_id} has an empty test_suite"))
        for i, test in enumerate(q.test_suite):
            err = _parse_error(test)
            if err:
                out.append(Problem(Q, line, f"{q.query_id} test {i} does not parse ({err})"))
        for i, test in enumerate(q.augmented_tests or ()):
            err = _parse_error(test)
            if err:
                out.append(Problem(Q, line, f"{q.query_id} augmented test {i} does not parse ({err})"))
        both = set(q.correct_corpus_ids) & set(q.paired_distractor_corpus_ids)
        if both:
            out.append(Problem(Q, line, f"{q.query_id} lists {sorted(both)} as both correct and distractor"))
        canonicals = []
        for cid in q.correct_corpus_ids:
            snip = snippets.get(cid)
            if snip is None:
                out.append(Problem(Q, line, f"{q.query_id} references unknown corpus_id {cid!r}"))
                continue
            canonicals.append(snip)
            if snip.label != "correct":
                out.append(
                    Problem(C, at(C, cid), f"{cid} is a correct id of {q.query_id} but labelled incorrect")
                )
            err = _parse_error(snip.code)
            if err:
                out.append(Problem(C, at(C, cid), f"canonical {cid} of {q.query_id} does not parse ({err})"))
        for cid in q.paired_distractor_corpus_ids:
            snip = snippets.get(cid)
            if snip is None:
                out.append(Problem(Q, line, f"{q.query_id} references unknown corpus_id {cid!r}"))
                continue
            if snip.label != "incorrect":
                out.append(
                    Problem(C, at(C, cid), f"{cid} is a distractor of {q.query_id} but labelled correct")
                )
            if any(snip.code == c.code for c in canonicals):
                out.append(Problem(C, at(C, cid), f"distractor {cid} is identical to its canonical"))

    query_ids = {q.query_id for q in pool.queries}
    for d in pool.distractors:
        line = at(D, d.corpus_id)
        for ref in (d.corpus_id, d.canonical_corpus_id):
            if ref not in snippets:
                out.append(Problem(D, line, f"references unknown corpus_id {ref!r}"))
        if d.query_id not in query_ids:
            out.append(Problem(D, line, f"references unknown query_id {d.query_id!r}"))
    return out


def spec_problems(scan: ScanResult) -> tuple[list[Problem], list[Problem]]:
    """(problems, warnings): what a generator cannot know from its task text.

    Two checks: conventions the asserts check that the generation text does not state
    (:func:`~.spec.spec_gaps`), and names the asserts use that only the reference solution's imports
    provide (:func:`~.spec.borrowed_names`). In a pool with specs every query must pass both: each one
    that does not is a problem. A pool without any spec (ExecRetrieval's) generates from its retrieval
    queries; its gaps are one warning per check, since only a spec and a test setup can fix them.
    """
    pool, loc = scan.pool, scan.locations
    snippets = {s.corpus_id: s for s in pool.corpus}
    unstated: list[tuple[str, str]] = []
    borrowed: list[tuple[str, str]] = []
    for q in pool.queries:
        if gaps := spec_gaps(q):
            more = f" (+{len(gaps) - 3} more)" if len(gaps) > 3 else ""
            text = "spec" if q.spec else "query (it has no spec)"
            unstated.append(
                (q.query_id, f"its {text} does not state what " + "; ".join(map(str, gaps[:3])) + more)
            )
        canonical = next((snippets[c] for c in q.correct_corpus_ids if c in snippets), None)
        if canonical is not None and (names := borrowed_names(q.test_suite, canonical.code, q.test_setup)):
            listed = ", ".join(f"`{n}`" for n in names)
            borrowed.append(
                (q.query_id, f"its tests use {listed}, which only the reference solution provides")
            )
    if any(q.spec for q in pool.queries):
        problems = [
            Problem(Q, loc.get((Q, qid)), f"{qid}: {msg}: add it to the spec") for qid, msg in unstated
        ]
        problems += [
            Problem(Q, loc.get((Q, qid)), f"{qid}: {msg}: import it in test_setup") for qid, msg in borrowed
        ]
        return problems, []
    warnings = []
    if unstated:
        warnings.append(
            Problem(
                Q,
                None,
                f"no query has a spec, so prompts state tasks by their retrieval query; {len(unstated)} of "
                f"{len(pool.queries)} queries test conventions it does not state (first: {unstated[0][0]}: "
                f"{unstated[0][1]}); add a `spec` field to them",
            )
        )
    if borrowed:
        warnings.append(
            Problem(
                Q,
                None,
                f"the tests of {len(borrowed)} queries use names only their reference solution provides "
                f"(first: {borrowed[0][0]}: {borrowed[0][1]}); add a `test_setup` field that imports them",
            )
        )
    return [], warnings


def structural_warnings(scan: ScanResult) -> list[Problem]:
    """What a reader should know but that does not stop a load: the execution cache is informational
    (agentbench runs and caches executions itself), so rows it cannot read are kept and only noted."""
    out = list(scan.warnings)
    odd = [
        (i, row)
        for i, row in enumerate(scan.pool.exec_cache, start=1)
        if not (row.code_sha256 and row.tests_sha256 and row.results)
    ]
    if odd:
        out.append(
            Problem(
                X,
                None,
                f"{len(odd)} row(s) without code_sha256/tests_sha256/results (first: row {odd[0][0]}); "
                "kept as they are, not used",
            )
        )
    unknown = [r for row in scan.pool.exec_cache for r in row.results if not _OUTCOME.match(r)]
    if unknown:
        out.append(
            Problem(
                X,
                None,
                f"{len(unknown)} outcome(s) other than pass, FAIL[:msg], TIMEOUT or ERROR[:msg] "
                f"(first: {unknown[0][:40]!r}); kept as they are",
            )
        )
    return out


RunJobs = Callable[[list[Job]], list[ExecResult]]


def execution_problems(pool: Pool, run: RunJobs | Executor) -> list[Problem]:
    """Every canonical must pass all its asserts (the augmented ones too: a run scores on them by
    default) and every distractor must fail at least one original assert."""
    snippets = {s.corpus_id: s for s in pool.corpus}
    plan: list[tuple[str, str, bool, int]] = []  # (query_id, corpus_id, should_pass, original asserts)
    jobs: list[Job] = []
    for q in pool.queries:
        tests = tuple(q.test_suite)
        for cid, should_pass in [(c, True) for c in q.correct_corpus_ids] + [
            (c, False) for c in q.paired_distractor_corpus_ids
        ]:
            if cid in snippets and tests:
                run_tests = tests + tuple(q.augmented_tests or ()) if should_pass else tests
                plan.append((q.query_id, cid, should_pass, len(tests)))
                jobs.append(Job(snippets[cid].code, run_tests, setup=q.test_setup or ""))
    results = run.run(jobs) if isinstance(run, Executor) else run(jobs)
    out: list[Problem] = []
    for (qid, cid, should_pass, n), res in zip(plan, results, strict=True):
        if res.infra_error:
            out.append(Problem(C, None, f"{cid} could not be executed for {qid}: {res.infra_error}"))
        elif should_pass and not res.passed:
            failing = [
                f"{i}:{r}" if i < n else f"augmented {i - n}:{r}"
                for i, r in enumerate(res.results)
                if r != "pass"
            ]
            out.append(Problem(C, None, f"canonical {cid} of {qid} fails asserts {', '.join(failing[:5])}"))
        elif not should_pass and res.passed:
            out.append(Problem(C, None, f"distractor {cid} of {qid} passes every assert (not a bug)"))
    return out
