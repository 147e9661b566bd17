"""CI gate: thresholds on a run's summary, regressions against a baseline, and JUnit XML.

Metric names (all values are rates in [0, 1]):

- retrieval: ``exec@K``, ``precision@K``, ``ndcg@K``, ``exec_ndcg_gap@K``, ``mrr``;
- generation: ``<condition>.pass`` (``rag.pass``, ``oracle.pass``, ``closed_book.pass``, ``distractor.pass``,
  ``rag_reranked.pass`` with ``--rerank``, ``agent.pass``, ``agent_rag.pass``); ``<condition>.repair``, the
  pass rate of that condition's generations given buggy context (``agent_rag.repair`` vs ``rag.repair``);
- propagation: ``bug_inheritance``, ``mutated_line``, ``repair``, ``retrieval_errors_became_failures``
  (``_rate`` suffixes are accepted too);
- attribution (paired per query, needs closed_book and rag in the run): ``retrieval_induced_failures``
  (closed_book passes, rag fails with a buggy top-1) and ``retrieval_rescues``, as shares of the queries.

``--fail-under M=V`` is violated when M < V, ``--fail-over M=V`` when M > V, and ``--max-drop M=V`` when M
got worse than in the baseline by more than V. Worse means lower, except for the metrics where lower is
better (``bug_inheritance``, ``mutated_line``, ``retrieval_errors_became_failures``,
``retrieval_induced_failures``, ``exec_ndcg_gap@K``),
whose rise counts.
A metric with no value in the run (nothing was measured, e.g. every rag record hit an LLM error) violates
its threshold: a gate that cannot be checked does not pass. Nor does one measured on fewer records than the
run planned: records lost to ``llm_error`` or ``infra_error`` fail the thresholds that depend on them. Naming a metric the run did not compute (a
condition that was not run) is an input error.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from ..errors import ConfigError
from ..pipeline.conditions import DEFAULT_CONDITIONS
from ..pipeline.records import ERROR_STATUSES, RunRecord
from ..retrieval.metrics import is_metric_name
from .summary import RunSummary

__all__ = [
    "Threshold",
    "GateResult",
    "Violation",
    "parse_thresholds",
    "metric_value",
    "check_available",
    "gate_results",
    "missing_records",
    "evaluate_gate",
    "write_junit",
    "LOWER_IS_BETTER",
]

Kind = Literal["fail_under", "fail_over", "max_drop"]

_PROPAGATION = {
    "bug_inheritance": "bug_inheritance_rate",
    "mutated_line": "mutated_line_rate",
    "repair": "repair_rate",
    "retrieval_errors_became_failures": "retrieval_errors_became_failures",
}
_ATTRIBUTION = ("retrieval_induced_failures", "retrieval_rescues")
LOWER_IS_BETTER = frozenset(
    {"bug_inheritance", "mutated_line", "retrieval_errors_became_failures", "retrieval_induced_failures"}
)
_CONDITION = re.compile(r"^[a-z][a-z0-9_]*\.(?:pass|repair)$")
_FLAG = {"fail_under": "--fail-under", "fail_over": "--fail-over", "max_drop": "--max-drop"}
_METRIC_FORMS = (
    "exec@K, precision@K, ndcg@K, mrr, <condition>.pass, <condition>.repair (e.g. "
    f"{', '.join(c + '.pass' for c in DEFAULT_CONDITIONS)}), {', '.join(_PROPAGATION)}, {', '.join(_ATTRIBUTION)}"
)


@dataclass(frozen=True)
class Threshold:
    metric: str
    """Canonical metric name (aliases resolved)."""
    value: float
    kind: Kind

    @property
    def label(self) -> str:
        op = {"fail_under": ">=", "fail_over": "<=", "max_drop": "drop <="}[self.kind]
        return f"{self.metric} {op} {self.value:g}"


@dataclass(frozen=True)
class GateResult:
    threshold: Threshold
    value: float | None
    baseline: float | None
    ok: bool
    message: str

    def to_dict(self) -> dict:
        d = asdict(self)
        d["threshold"] = {**asdict(self.threshold), "flag": _FLAG[self.threshold.kind]}
        return d


Violation = GateResult
"""A GateResult whose ``ok`` is False."""


def _canonical(metric: str) -> str:
    m = metric.strip()
    if is_metric_name(m):
        return m
    if m.endswith(".pass_rate"):
        m = m[: -len("_rate")]
    if _CONDITION.match(m):  # which conditions exist is checked against the run (rag_reranked, ...)
        return m
    if m.endswith("_rate") and m[: -len("_rate")] in _PROPAGATION:
        m = m[: -len("_rate")]
    if m in _PROPAGATION or m in _ATTRIBUTION:
        return m
    raise ConfigError(f"unknown metric {metric!r}: use {_METRIC_FORMS}")


def parse_thresholds(specs: Iterable[str] | None, kind: Kind) -> list[Threshold]:
    """``["exec@1=0.5", ...]`` -> Thresholds; ConfigError (exit 2) for anything malformed."""
    out: list[Threshold] = []
    for spec in specs or []:
        metric, sep, raw = spec.partition("=")
        if not sep or not metric.strip() or not raw.strip():
            raise ConfigError(f"{_FLAG[kind]} {spec!r}: expected METRIC=VALUE, e.g. exec@1=0.5")
        try:
            value = float(raw)
        except ValueError as exc:
            raise ConfigError(f"{_FLAG[kind]} {spec!r}: {raw.strip()!r} is not a number") from exc
        if not math.isfinite(value) or not 0.0 <= value <= 1.0:
            raise ConfigError(f"{_FLAG[kind]} {spec!r}: metrics are rates, so the value must be in [0, 1]")
        out.append(Threshold(_canonical(metric), value, kind))
    return out


def check_available(thresholds: Sequence[Threshold], conditions: Iterable[str]) -> None:
    """Before a run starts: refuse thresholds on conditions the run will not evaluate."""
    run = list(conditions)
    for t in thresholds:
        if t.metric.endswith((".pass", ".repair")) and t.metric.rsplit(".", 1)[0] not in run:
            raise ConfigError(
                f"{_FLAG[t.kind]} {t.metric}: the condition is not part of this run (conditions: "
                f"{', '.join(run)})"
            )
        if t.metric in _ATTRIBUTION and not {"closed_book", "rag"} <= set(run):
            raise ConfigError(
                f"{_FLAG[t.kind]} {t.metric}: needs the closed_book and rag conditions in the run (conditions: "
                f"{', '.join(run)})"
            )


def _as_json(summary: RunSummary | dict) -> dict:
    """The summary as summary.json holds it: metrics are named by their place in the file."""
    return summary.to_json_dict() if isinstance(summary, RunSummary) else summary


def metric_value(summary: RunSummary | dict, metric: str) -> float | None:
    """The metric's value in a summary (a :class:`RunSummary` or summary.json as read; None when nothing
    was measured); ConfigError if never computed."""
    summary = _as_json(summary)
    metric = _canonical(metric)
    if is_metric_name(metric):
        metrics = summary.get("retrieval", {}).get("metrics", {})
        if metric not in metrics:
            have = ", ".join(k for k in metrics if k.startswith("exec@")) or "none"
            raise ConfigError(f"the run has no retrieval metric {metric!r} (exec cutoffs: {have})")
        return metrics[metric]
    if metric.endswith(".repair"):
        condition = metric[: -len(".repair")]
        if condition not in summary.get("conditions", {}):
            raise ConfigError(
                f"{metric}: the run did not evaluate the {condition} condition "
                f"(it has {', '.join(summary.get('conditions', {})) or 'none'})"
            )
        return summary.get("propagation", {}).get("repair_rate_by_condition", {}).get(condition)
    if metric.endswith(".pass"):
        condition = metric[: -len(".pass")]
        conditions = summary.get("conditions", {})
        if condition not in conditions:
            raise ConfigError(
                f"{metric}: the run did not evaluate the {condition} condition "
                f"(it has {', '.join(conditions) or 'none'})"
            )
        return conditions[condition].get("pass_rate")
    if metric in _ATTRIBUTION:
        if "attribution" not in summary:
            raise ConfigError(
                f"{metric}: the summary has no attribution section (written by an older agentbench)"
            )
        found = summary["attribution"].get(metric, {})
        reason = found.get("reason", "")
        if reason.startswith("needs"):
            raise ConfigError(f"{metric}: {reason}")
        return found.get("rate")
    return summary.get("propagation", {}).get(_PROPAGATION[metric])


def _f(x: float | None) -> str:
    return "no value" if x is None else f"{x:.3f}"


def _check(t: Threshold, value: float | None, baseline: float | None) -> GateResult:
    flag = f"{_FLAG[t.kind]} {t.value:g}"
    flag_t = f"{_FLAG[t.kind]} threshold {t.value:g}"
    if value is None:
        return GateResult(
            t,
            None,
            baseline,
            False,
            f"{t.metric} has no value in this run (nothing was measured), so {flag} cannot hold",
        )
    if t.kind == "fail_under":
        ok = value >= t.value
        msg = f"{t.metric} = {_f(value)}" + (
            f" >= {t.value:g} ({_FLAG[t.kind]})" if ok else f" is below the {flag_t}"
        )
        return GateResult(t, value, None, ok, msg)
    if t.kind == "fail_over":
        ok = value <= t.value
        msg = f"{t.metric} = {_f(value)}" + (
            f" <= {t.value:g} ({_FLAG[t.kind]})" if ok else f" is above the {flag_t}"
        )
        return GateResult(t, value, None, ok, msg)
    if baseline is None:
        return GateResult(
            t, value, None, False, f"{t.metric} has no value in the baseline, so {flag} cannot be checked"
        )
    lower_better = t.metric in LOWER_IS_BETTER or t.metric.startswith("exec_ndcg_gap@")
    worsening = (value - baseline) if lower_better else (baseline - value)
    ok = worsening <= t.value + 1e-9
    verb = "rose" if lower_better else "dropped"
    change = f"{_f(baseline)} in the baseline -> {_f(value)}"
    if ok:
        msg = f"{t.metric}: {change}, within {flag}"
    else:
        msg = f"{t.metric} {verb} by {worsening:.3f} ({change}), more than {flag}"
    return GateResult(t, value, baseline, ok, msg)


def gate_results(
    summary: RunSummary | dict, thresholds: Sequence[Threshold], baseline: RunSummary | dict | None = None
) -> list[GateResult]:
    """Every threshold checked against ``summary`` (and ``baseline`` for ``max_drop``), in order."""
    summary = _as_json(summary)
    baseline = _as_json(baseline) if baseline is not None else None
    out = []
    for t in thresholds:
        base = None
        if t.kind == "max_drop":
            if baseline is None:
                raise ConfigError(f"--max-drop {t.metric}: needs --baseline RUN_DIR to compare with")
            base = metric_value(baseline, t.metric)
        out.append(_check(t, metric_value(summary, t.metric), base))
    return out


def missing_records(results: list[GateResult], records: Sequence[RunRecord] | None) -> list[GateResult]:
    """A gate never passes on fewer records than the run planned: a threshold on a condition (or on
    attribution and propagation, which span conditions) whose records include ``llm_error`` or
    ``infra_error`` ones fails, naming them; ``--resume`` redoes them."""
    if not records:
        return results
    out = []
    for r in results:
        metric = r.threshold.metric
        if is_metric_name(metric):  # retrieval metrics do not depend on generation records
            out.append(r)
            continue
        condition = metric.rsplit(".", 1)[0] if metric.endswith((".pass", ".repair")) else None
        errors = [
            rec
            for rec in records
            if rec.status in ERROR_STATUSES and (condition is None or rec.condition == condition)
        ]
        if not r.ok or not errors:
            out.append(r)
            continue
        named = ", ".join(f"{rec.query_id}/{rec.condition} ({rec.status})" for rec in errors[:5])
        more = f" and {len(errors) - 5} more" if len(errors) > 5 else ""
        message = (
            f"{metric}: {len(errors)} record(s) are missing because of errors ({named}{more}), so "
            f"{r.threshold.label} cannot be checked on the whole run; redo them with --resume"
        )
        out.append(GateResult(r.threshold, r.value, r.baseline, False, message))
    return out


def evaluate_gate(
    summary: RunSummary | dict, thresholds: Sequence[Threshold], baseline: RunSummary | dict | None = None
) -> list[Violation]:
    """The thresholds that do not hold; empty when the gate passes."""
    return [r for r in gate_results(summary, thresholds, baseline) if not r.ok]


_XML_ILLEGAL = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _x(text: object) -> str:
    """Text safe for XML 1.0: characters it cannot carry (NUL, other controls) become U+FFFD."""
    return _XML_ILLEGAL.sub("\ufffd", str(text))


def _record_case(suite: ET.Element, rec: RunRecord) -> tuple[int, int]:
    case = ET.SubElement(
        suite,
        "testcase",
        classname=_x(f"agentbench.{rec.condition}"),
        name=_x(rec.query_id),
        time=f"{rec.llm_seconds + rec.exec_seconds:.3f}",
    )
    context = ""
    if rec.context_ids:
        context = f"; context {rec.context_ids[0]} ({rec.context_kind}"
        context += f", {rec.context_bug_type})" if rec.context_bug_type else ")"
    failures = errors = 0
    if rec.status in ("llm_error", "infra_error"):
        ET.SubElement(case, "error", message=_x(rec.error or rec.status), type=rec.status)
        errors = 1
    elif not rec.passed:
        if rec.status == "no_code":
            message = "no code in the response"
        elif rec.status in ("agent_error", "retriever_error"):
            message = rec.error or rec.status
        else:
            message = f"{sum(r == 'pass' for r in rec.results)}/{len(rec.results)} asserts passed"
        verdicts = "\n".join(f"assert {i + 1}: {r}" for i, r in enumerate(rec.results))
        failure = ET.SubElement(case, "failure", message=_x(message + context), type="AssertionError")
        failure.text = _x(verdicts)
        failures = 1
    if rec.code:
        ET.SubElement(case, "system-out").text = _x(rec.code)
    return failures, errors


def write_junit(
    path: str | Path, records: Sequence[RunRecord], results: Sequence[GateResult], *, name: str = "agentbench"
) -> Path:
    """JUnit XML: one test case per (query, condition) record and one per threshold."""
    root = ET.Element("testsuites", name=_x(name))
    totals = {"tests": 0, "failures": 0, "errors": 0}
    if records:
        suite = ET.SubElement(root, "testsuite", name=_x(f"{name}.records"))
        failures = errors = 0
        for rec in records:
            f, e = _record_case(suite, rec)
            failures, errors = failures + f, errors + e
        suite.set("tests", str(len(records)))
        suite.set("failures", str(failures))
        suite.set("errors", str(errors))
        totals["tests"] += len(records)
        totals["failures"] += failures
        totals["errors"] += errors
    suite = ET.SubElement(root, "testsuite", name=_x(f"{name}.thresholds"))
    for r in results:
        case = ET.SubElement(suite, "testcase", classname=f"{name}.thresholds", name=_x(r.threshold.label))
        if not r.ok:
            ET.SubElement(case, "failure", message=_x(r.message), type="ThresholdViolated")
        else:
            ET.SubElement(case, "system-out").text = _x(r.message)
    failed = sum(not r.ok for r in results)
    suite.set("tests", str(len(results)))
    suite.set("failures", str(failed))
    suite.set("errors", "0")
    totals["tests"] += len(results)
    totals["failures"] += failed
    for key, value in totals.items():
        root.set(key, str(value))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    ET.indent(root)
    ET.ElementTree(root).write(out, encoding="utf-8", xml_declaration=True)
    return out
