"""Records of the ExecRetrieval pool format. Unknown fields are kept (``extra="allow"``) so a pool
round-trips without losing anything a newer release adds, and only what the harness cannot work without
is required: the released ``distractor_metadata.jsonl`` rows carry just ``corpus_id``, ``query_id``,
``bug_type`` and ``canonical_corpus_id`` (the mutated line is then derived when the pool is read)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

__all__ = ["Query", "Snippet", "DistractorMeta", "ExecCacheRow", "Pool", "BUG_TYPES", "DOMAINS", "TEST_SETS"]

BUG_TYPES = (
    "off_by_one",
    "off_by_one_boundary",
    "swap_arguments",
    "remove_edge_case_check",
    "wrong_comparison",
    "wrong_operator",
)

TEST_SETS = ("augmented", "original")
"""What a run scores on (``--tests``): the original asserts plus the added ones, or the originals only."""

DOMAINS = (
    "bit_manipulation",
    "collections",
    "data_transformation",
    "date_time",
    "geometry",
    "math_numerical",
    "sorting_searching",
    "state_machines",
    "string_processing",
    "validation",
)


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow")


class Query(_Record):
    query_id: str
    query: str
    test_suite: list[str]
    correct_corpus_ids: list[str]
    paired_distractor_corpus_ids: list[str] = Field(default_factory=list)
    entry_id: Any = ""
    metadata: Any = Field(default_factory=dict)
    """Generator provenance; agentbench reads ``domain`` and ``function_name`` from it when present."""
    spec: str | None = None
    """What the generator is told: inputs, the return value and every convention the tests check, as a
    docstring would say it. Retrieval searches with ``query``; without a spec, generation uses it too."""
    test_setup: str | None = None
    """Python run after the solution and before the asserts, for the names the asserts use (imports)."""
    augmented_tests: list[str] | None = None
    """Asserts added by ``pool augment`` (:mod:`agentbench.pools.augment`), kept apart from ``test_suite``
    so a run can score on the original tests alone; absent in pools that were never augmented."""

    @property
    def generation_text(self) -> str:
        """What a generator is told: the spec when the query has one, else the retrieval query."""
        return self.spec or self.query

    @property
    def domain(self) -> str:
        meta = self.metadata if isinstance(self.metadata, dict) else {}
        found = meta.get("domain") or (self.model_extra or {}).get("domain")
        return str(found) if found else "unknown"


class Snippet(_Record):
    corpus_id: str
    code: str
    label: Literal["correct", "incorrect"]
    bug_type: str | None = None
    source_entry_id: Any = ""


class DistractorMeta(_Record):
    corpus_id: str
    query_id: str
    canonical_corpus_id: str
    bug_type: str
    line_number: int | None = None
    """1-based line of the edit in the canonical; ``None`` when unknown."""
    line_before: str = ""
    line_after: str = ""
    """``""`` when the edit removed the line(s)."""
    failing_tests: list[int] = Field(default_factory=list)

    @property
    def has_line(self) -> bool:
        return self.line_number is not None and bool(self.line_before or self.line_after)


class ExecCacheRow(_Record):
    """Per-assert outcomes of one snippet on one test suite. Informational: agentbench keeps its own
    cache, so rows of another shape are preserved and only warned about."""

    code_sha256: str = ""
    tests_sha256: str = ""
    results: list[str] = Field(default_factory=list)


class Pool(BaseModel):
    """A loaded pool. ``path`` is where it came from (for messages)."""

    name: str
    path: str
    queries: list[Query]
    corpus: list[Snippet]
    distractors: list[DistractorMeta] = Field(default_factory=list)
    exec_cache: list[ExecCacheRow] = Field(default_factory=list)

    _index: dict[str, Snippet] | None = PrivateAttr(default=None)

    def snippet(self, corpus_id: str) -> Snippet:
        if self._index is None:
            self._index = {s.corpus_id: s for s in self.corpus}
        return self._index[corpus_id]

    def distractor_meta(self) -> dict[str, DistractorMeta]:
        return {d.corpus_id: d for d in self.distractors}

    def with_tests(self, tests: str) -> Pool:
        """The pool a run scores on: ``augmented`` appends each query's added asserts to its
        ``test_suite`` (indices of the original asserts are unchanged), ``original`` leaves them out."""
        if tests not in TEST_SETS:
            raise ValueError(f"tests must be one of {', '.join(TEST_SETS)}, got {tests!r}")
        queries = [
            q.model_copy(
                update={
                    "test_suite": [*q.test_suite, *(q.augmented_tests or ())]
                    if tests == "augmented"
                    else list(q.test_suite),
                    "augmented_tests": None,
                }
            )
            if q.augmented_tests
            else q
            for q in self.queries
        ]
        return self.model_copy(update={"queries": queries})

    @property
    def has_augmented_tests(self) -> bool:
        return any(q.augmented_tests for q in self.queries)

    def only(self, queries: list[Query]) -> Pool:
        """A small pool of ``queries`` with only their own snippets and distractor rows (for tests and
        benchmarks that should not embed a whole corpus); no execution-cache rows."""
        keep = {cid for q in queries for cid in (*q.correct_corpus_ids, *q.paired_distractor_corpus_ids)}
        qids = {q.query_id for q in queries}
        return self.model_copy(
            update={
                "queries": list(queries),
                "corpus": [s for s in self.corpus if s.corpus_id in keep],
                "distractors": [d for d in self.distractors if d.query_id in qids and d.corpus_id in keep],
                "exec_cache": [],
            }
        )
