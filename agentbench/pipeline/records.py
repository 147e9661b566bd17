"""One JSONL record per (query, condition), appended as it completes.

Each record is written with one ``write`` call, flushed and fsynced, so a killed run loses at most the
records in flight; a torn last line is dropped on resume.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

__all__ = ["RunRecord", "RecordLog", "ContextKind"]

ContextKind = Literal["none", "canonical", "own_distractor", "other_snippet"]


class RunRecord(BaseModel):
    schema_version: int = 1
    query_id: str
    condition: str
    domain: str = "unknown"
    context_ids: list[str] = Field(default_factory=list)
    context_kind: ContextKind = "none"
    """What the first context snippet was, relative to this query."""
    context_passes: bool | None = None
    """Whether the first context snippet passes this query's tests (None without context)."""
    context_results: list[str] = Field(default_factory=list)
    context_bug_type: str = ""
    task_text: Literal["spec", "query"] = "query"
    """What the prompt's task text was: the query's generation spec, or (without one) its retrieval query."""
    messages: list[dict[str, Any]] = Field(default_factory=list)
    response: str = ""
    code: str = ""
    status: Literal["ok", "no_code", "llm_error", "infra_error", "agent_error", "retriever_error"] = "ok"
    """``agent_error``/``retriever_error``: a plug-in under test raised or returned something unusable; a
    failure of the system under test, so scored (as not passed) and also counted apart."""
    error: str | None = None
    results: list[str] = Field(default_factory=list)
    """Per-assert verdicts of the generated code."""
    passed: bool = False
    inherited_outcomes: bool | None = None
    """With buggy context: the generation's pass/fail pattern equals the context snippet's."""
    mutated_line_reappears: bool | None = None
    """With a distractor as context: its mutated line (or missing guard) shows up in the generation."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cached: bool = False
    llm_seconds: float = 0.0
    exec_seconds: float = 0.0
    seconds: float = 0.0
    trajectory: list[dict[str, Any]] = Field(default_factory=list)
    """Tool conditions: every reply (with its tool calls and tokens) and tool result, in order."""
    tool_stats: dict[str, Any] | None = None
    """Tool conditions: turns, tool calls (valid/invalid), searches, test runs, searches after a failing
    run_tests, ``submitted``, ``budget_exhausted`` (the budget it ran out of, scored on its last code) and
    ``visible_tests`` (positions of the asserts run_tests ran; the others score the record)."""

    @property
    def key(self) -> tuple[str, str]:
        return self.query_id, self.condition

    @property
    def scored(self) -> bool:
        """llm_error and infra_error records are reported separately, never as model failures."""
        return self.status not in ("llm_error", "infra_error")


class RecordLog:
    """Append-only JSONL of RunRecords with crash-safe appends and duplicate-free resume."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> list[RunRecord]:
        """Records already written; a torn final line (killed mid-write) is cut off the file."""
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        records: dict[tuple[str, str], RunRecord] = {}
        good_end = 0
        for line in data.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break
            try:
                rec = RunRecord.model_validate(json.loads(line))
            except (json.JSONDecodeError, ValidationError, UnicodeDecodeError):
                break
            records.setdefault(rec.key, rec)
            good_end += len(line)
        if good_end < len(data):
            with open(self.path, "r+b") as fh:
                fh.truncate(good_end)
        return list(records.values())

    def append(self, record: RunRecord) -> None:
        self.append_many([record])

    def append_many(self, records: list[RunRecord]) -> None:
        """Append ``records`` with one write and one fsync (an fsync costs milliseconds: one per record
        would cap a fast run at a few hundred records a second)."""
        if not records:
            return
        data = b"".join((json.dumps(r.model_dump(), ensure_ascii=False) + "\n").encode() for r in records)
        with open(self.path, "ab") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
