"""One JSONL record per (query, condition[, sample]), appended as it completes.

Each record is written with one ``write`` call, flushed and fsynced, so a killed run loses at most the
records in flight; a torn last line is skipped by readers and cut by the next ``--resume``.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, ValidationError, model_serializer

from ..errors import AgentbenchError, ConfigError
from ..models import Record

__all__ = ["RunRecord", "ToolStats", "RecordLog", "RecordKey", "ContextKind", "ERROR_STATUSES", "write_error"]

log = logging.getLogger(__name__)

ContextKind = Literal["none", "canonical", "own_distractor", "other_snippet"]
RecordKey = tuple[str, str] | tuple[str, str, int]
"""``(query_id, condition)``, or ``(query_id, condition, sample)`` in a run with ``--samples`` above 1."""
ERROR_STATUSES = ("llm_error", "infra_error")
"""Records that say nothing about the system under test: the model's service or the sandbox failed."""


class ToolStats(Record):
    """What a tool condition's agent did with the tools. The built-in loop writes every field; a plug-in
    agent's record has only the counts the tools themselves saw (the loop-only fields are absent)."""

    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset(
        {
            "turns",
            "valid_tool_calls",
            "invalid_tool_calls",
            "lenient_tool_calls",
            "replies_without_call",
            "submitted",
            "protocol",
            "constrained",
            "visible_tests",
            "refused_untested",
        }
    )

    turns: int | None = None
    """model replies (built-in loop)"""
    tool_calls: int = 0
    valid_tool_calls: int | None = None
    invalid_tool_calls: int | None = None
    """calls that named no tool or had unusable arguments (built-in loop)"""
    lenient_tool_calls: int | None = None
    """valid calls accepted in a looser format than the protocol's (fenced JSON; built-in loop)"""
    replies_without_call: int | None = None
    searches: int = 0
    """search_code calls"""
    test_runs: int = 0
    """run_tests calls"""
    searches_after_failing_tests: int = 0
    """search_code calls after a run_tests that failed"""
    submitted: bool | None = None
    """the agent called submit (built-in loop)"""
    budget_exhausted: str | None = None
    """the budget it ran out of (``turns``, ``tool_calls``, ...), scored on its last code; None if none"""
    protocol: Literal["native", "text"] | None = None
    """how tool calls were exchanged: native function calling or the text protocol (built-in loop)"""
    constrained: bool | None = None
    """every reply was decoded under the tool grammar (``local/`` models in the built-in loop); absent if not"""
    visible_tests: list[int] | None = None
    """positions of the asserts run_tests ran; the others score the record"""
    refused_untested: int | None = None
    """answers and submits refused by the test-first rule before any run_tests (built-in loop)"""


class RunRecord(BaseModel):
    schema_version: int = 1
    query_id: str
    condition: str
    sample: int | None = None
    """Which of the run's ``--samples`` generations of this (query, condition) it is, from 0; absent from
    the JSON of a one-sample run (so its records are what they always were)."""
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
    tool_stats: ToolStats | None = None
    """Tool conditions: what the agent did with the tools."""

    @model_serializer(mode="wrap")
    def _omit_sample(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("sample", 0) is None:
            del data["sample"]
        return data

    @property
    def key(self) -> RecordKey:
        """One record per key: ``(query_id, condition)``, and the sample index when the run has several."""
        if self.sample is None:
            return self.query_id, self.condition
        return self.query_id, self.condition, self.sample

    @property
    def scored(self) -> bool:
        """llm_error and infra_error records are reported separately, never as model failures."""
        return self.status not in ERROR_STATUSES


class RecordLog:
    """Append-only JSONL of RunRecords with crash-safe appends and duplicate-free resume.

    Reading never changes the file: a torn final line (a run killed mid-write, or one writing right now) is
    skipped with a warning, and a damaged line before it is an error naming the file and the line. Only
    the run that holds the directory's lock repairs a torn tail (:meth:`repair_tail`). A key written twice
    (an error record retried by ``--resume``) counts once, with its last record.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> list[RunRecord]:
        """The records on disk, read-only."""
        return list(self._parse(self._read())[0].values())

    def _read(self) -> bytes:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return b""
        except OSError as exc:
            raise ConfigError(f"{self.path} cannot be read ({exc.strerror}): check its permissions") from None

    def _parse(self, data: bytes) -> tuple[dict[RecordKey, RunRecord], int]:
        """Records by key and the length of the intact part (everything before a torn final line)."""
        records: dict[RecordKey, RunRecord] = {}
        good_end = 0
        for number, line in enumerate(data.splitlines(keepends=True), start=1):
            if not line.endswith(b"\n"):  # only the last line can lack its newline: a torn write
                log.warning(
                    "%s: line %d is incomplete (a run was killed while writing it, or is writing it now); "
                    "skipped",
                    self.path,
                    number,
                )
                break
            try:
                rec = RunRecord.model_validate(json.loads(line))
            except (json.JSONDecodeError, ValidationError, UnicodeDecodeError) as exc:
                detail = str(exc).splitlines()[0][:120]
                raise ConfigError(
                    f"{self.path}: line {number} is damaged ({detail}); the file was left as it is: restore "
                    "it from a backup or delete that line, and --resume redoes its record"
                ) from None
            records.pop(rec.key, None)  # a retried record replaces the earlier one, in the later place
            records[rec.key] = rec
            good_end += len(line)
        return records, good_end

    def repair_tail(self) -> list[RunRecord]:
        """For the writer holding the run directory's lock: cut a torn final line, then load."""
        data = self._read()
        records, good_end = self._parse(data)
        if good_end < len(data):
            with open(self.path, "r+b") as fh:
                fh.truncate(good_end)
        return list(records.values())

    def append_many(self, records: list[RunRecord]) -> None:
        """Append ``records`` with one write and one fsync (an fsync costs milliseconds: one per record
        would cap a fast run at a few hundred records a second). A failed write (a full disk) is cut back
        off, so the file keeps only whole records, and raised as one line naming the path and free space."""
        if not records:
            return
        data = b"".join((json.dumps(r.model_dump(), ensure_ascii=False) + "\n").encode() for r in records)
        with open(self.path, "ab") as fh:
            size = fh.tell()
            try:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            except OSError as exc:
                try:
                    fh.truncate(size)
                except OSError:
                    pass
                raise write_error(self.path, exc) from None


def write_error(path: Path, exc: OSError) -> AgentbenchError:
    """A failed write as one line: a full disk names the free space, anything else its cause."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        try:
            free = shutil.disk_usage(path.parent).free
        except OSError:
            free = 0
        return ConfigError(
            f"cannot write {path}: no space left on its device ({free / 1e6:.1f} MB free); free some space, "
            "then continue with --resume"
        )
    return ConfigError(f"cannot write {path}: {exc.strerror or exc}")
