"""The mining report: per file, the functions found, the tests read and matched, and every assert kept or
skipped with its reason; a summary; the builder's report. Written as ``mine_report.json`` beside the pool
(deterministic: no timings, no absolute paths)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ...files import atomic_write_text
from ..build_report import BuildReport
from ..io import write_pool
from ..models import Pool
from .classify import Candidate
from .verify import Others, Plan

__all__ = ["MineReport", "write_mined", "REPORT_FILE"]

REPORT_FILE = "mine_report.json"


@dataclass
class MineReport:
    source: str
    files: list[tuple[str, bool]]  # (rel, is_test) of every .py file read
    unparsed: dict[str, str]
    functions: dict[str, list[str]]  # rel -> qualnames found
    tests: dict[str, int]  # rel -> test functions read
    candidates: list[Candidate]
    plans: dict[str, Plan]
    build: BuildReport | None = None
    others: Others = field(default_factory=Others)
    pool: Pool | None = None
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds per stage (discovery, verification); printed, never written (the report is deterministic)."""

    def task_keys(self) -> list[str]:
        return [str(q.entry_id) for q in self.pool.queries] if self.pool else []

    def summary(self) -> dict:
        found = len(self.candidates)
        kept = sum(c.kept for c in self.candidates)
        skipped = Counter(c.status for c in self.candidates if not c.kept)
        fn_status = Counter(p.status for p in self.plans.values() if p.status != "task")
        queries = self.pool.queries if self.pool else []
        two_plus = sum(len(q.paired_distractor_corpus_ids) >= 2 for q in queries)
        return {
            "source": self.source,
            "python_files": len(self.files),
            "test_files": sum(t for _, t in self.files),
            "files_not_parsed": len(self.unparsed),
            "functions_found": sum(len(v) for v in self.functions.values()),
            "test_functions_read": sum(self.tests.values()),
            "asserts_found": found,
            "asserts_kept": kept,
            "asserts_skipped": dict(sorted(skipped.items())),
            "functions_not_tasks": dict(sorted(fn_status.items())),
            "tasks": len(queries),
            "tasks_with_2_or_more_distractors": two_plus,
            "share_with_2_or_more_distractors": round(two_plus / len(queries), 4) if queries else 0.0,
            "distractors": sum(len(q.paired_distractor_corpus_ids) for q in queries),
            "other_snippets": self.others.added,
            "other_functions_left_out": dict(sorted(self.others.excluded.items())),
        }

    def per_file(self) -> dict:
        by_file: dict[str, list[Candidate]] = {}
        for c in self.candidates:
            by_file.setdefault(c.rel, []).append(c)
        tasks = set(self.task_keys())
        out: dict[str, dict] = {}
        for rel, is_test in self.files:
            entry: dict = {"kind": "test" if is_test else "source"}
            if rel in self.unparsed:
                entry["parsed"] = False
                entry["error"] = self.unparsed[rel]
                out[rel] = entry
                continue
            entry["parsed"] = True
            if not is_test:
                quals = self.functions.get(rel, [])
                entry["functions"] = quals
                plans = [p for p in self.plans.values() if p.fn.module.rel == rel]
                entry["tasks"] = [p.fn.qualname for p in plans if p.fn.key in tasks]
                entry["functions_skipped"] = {
                    p.fn.qualname: f"{p.status}: {p.detail}" if p.detail else p.status
                    for p in plans
                    if p.fn.key not in tasks and p.status not in ("task", "no_asserts")
                }
            else:
                entry["tests"] = self.tests.get(rel, 0)
            cands = by_file.get(rel, [])
            matched = Counter(c.function for c in cands if c.kept and c.function)
            if cands or is_test:
                entry["matched"] = dict(sorted(matched.items()))
                entry["asserts"] = {
                    "found": len(cands),
                    "kept": sum(c.kept for c in cands),
                    "skipped": dict(sorted(Counter(c.status for c in cands if not c.kept).items())),
                }
                examples: dict[str, str] = {}
                for c in cands:
                    if not c.kept and c.status not in examples:
                        examples[c.status] = f"line {c.line}: {c.detail}"
                entry["skip_examples"] = dict(sorted(examples.items()))
            out[rel] = entry
        return out

    def summary_rows(self) -> list[tuple[str, str]]:
        """The summary as (label, value) rows for a terminal table."""
        s = self.summary()
        rows = [
            ("python files (test files)", f"{s['python_files']} ({s['test_files']})"),
            ("files that do not parse", str(s["files_not_parsed"])),
            ("functions found", str(s["functions_found"])),
            ("tests read", str(s["test_functions_read"])),
            ("asserts found / kept", f"{s['asserts_found']} / {s['asserts_kept']}"),
        ]
        rows += [(f"  asserts skipped: {k}", str(v)) for k, v in s["asserts_skipped"].items()]
        rows += [(f"  functions not tasks: {k}", str(v)) for k, v in s["functions_not_tasks"].items()]
        rows += [
            ("tasks (verified)", str(s["tasks"])),
            (
                "tasks with >= 2 distractors",
                f"{s['tasks_with_2_or_more_distractors']} ({s['share_with_2_or_more_distractors']:.0%})",
            ),
            ("distractors", str(s["distractors"])),
            ("other functions as snippets", str(s["other_snippets"])),
        ]
        if self.timings:
            rows.append(
                (
                    "time: discovery / sandbox",
                    f"{self.timings.get('discovery_s', 0):.1f} s / {self.timings.get('sandbox_s', 0):.1f} s",
                )
            )
        return rows

    def to_json(self) -> dict:
        return {
            "summary": self.summary(),
            "build": self.build.to_json() if self.build else None,
            "files": self.per_file(),
        }


def write_mined(pool: Pool, report: MineReport, out: Path) -> None:
    """The pool files and ``mine_report.json`` (each written atomically)."""
    write_pool(pool, out)
    atomic_write_text(out / REPORT_FILE, json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n")
