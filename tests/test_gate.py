"""The CI gate: threshold parsing, exit codes (0 hold, 1 violated, 2 bad input) and JUnit XML."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from agentbench.analysis.gate import (
    Threshold,
    check_available,
    evaluate_gate,
    gate_results,
    metric_value,
    parse_thresholds,
    write_junit,
)
from agentbench.errors import ConfigError
from agentbench.pipeline import RunRecord

from .conftest import run_cli
from .test_compare import make_run
from .test_report import cli, scripted_client

SUMMARY = {
    "retrieval": {"metrics": {"exec@1": 0.4, "exec@3": 0.7, "mrr": 0.5}},
    "conditions": {
        "rag": {"n": 10, "passed": 5, "pass_rate": 0.5},
        "oracle": {"n": 10, "passed": 9, "pass_rate": 0.9},
        "distractor": {"n": 0, "passed": 0, "pass_rate": None},
    },
    "propagation": {"bug_inheritance_rate": 0.6, "mutated_line_rate": 0.3, "repair_rate": 0.2},
}


# ----------------------------------------------------------------------------------------- parsing


def test_parse_thresholds_accepts_metrics_and_aliases() -> None:
    got = parse_thresholds(
        ["exec@1=0.5", " rag.pass = 0.25", "rag.pass_rate=1", "bug_inheritance_rate=0"], "fail_under"
    )
    assert [(t.metric, t.value) for t in got] == [
        ("exec@1", 0.5),
        ("rag.pass", 0.25),
        ("rag.pass", 1.0),
        ("bug_inheritance", 0.0),
    ]
    assert all(t.kind == "fail_under" for t in got)
    assert parse_thresholds(None, "fail_over") == []
    assert [
        t.metric for t in parse_thresholds(["ndcg@10=0.1", "mrr=0.2", "rag_reranked.pass=0.3"], "max_drop")
    ] == [
        "ndcg@10",
        "mrr",
        "rag_reranked.pass",
    ]


@pytest.mark.parametrize(
    "spec, message",
    [
        ("exec@1", "METRIC=VALUE"),
        ("=0.5", "METRIC=VALUE"),
        ("exec@1=", "METRIC=VALUE"),
        ("exec@1=high", "not a number"),
        ("exec@1=1.5", r"\[0, 1\]"),
        ("exec@1=-0.1", r"\[0, 1\]"),
        ("exec@1=nan", r"\[0, 1\]"),
        ("exec@0=0.5", "unknown metric"),
        ("accuracy=0.5", "unknown metric"),
        ("Rag.pass=0.5", "unknown metric"),
    ],
)
def test_bad_thresholds_are_config_errors(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_thresholds([spec], "fail_under")


# --------------------------------------------------------------------------------------- evaluation


def test_fail_under_and_fail_over() -> None:
    under = parse_thresholds(["exec@1=0.4", "rag.pass=0.6", "oracle.pass=0.5"], "fail_under")
    over = parse_thresholds(["bug_inheritance=0.5", "mutated_line=0.3"], "fail_over")
    results = gate_results(SUMMARY, under + over)
    assert [r.ok for r in results] == [True, False, True, False, True]  # equality holds
    bad = evaluate_gate(SUMMARY, under + over)
    assert [v.threshold.metric for v in bad] == ["rag.pass", "bug_inheritance"]
    assert bad[0].message == "rag.pass = 0.500 is below the --fail-under threshold 0.6"
    assert bad[1].message == "bug_inheritance = 0.600 is above the --fail-over threshold 0.5"
    assert evaluate_gate(SUMMARY, []) == []


def test_unmeasured_metric_violates_and_missing_metric_is_input_error() -> None:
    (v,) = evaluate_gate(SUMMARY, parse_thresholds(["distractor.pass=0.1"], "fail_under"))
    assert v.value is None and "no value" in v.message and "distractor.pass" in v.message
    with pytest.raises(ConfigError, match="closed_book"):
        evaluate_gate(SUMMARY, parse_thresholds(["closed_book.pass=0.1"], "fail_under"))
    with pytest.raises(ConfigError, match="exec@5"):
        metric_value(SUMMARY, "exec@5")


def test_max_drop_against_a_baseline() -> None:
    baseline = json.loads(json.dumps(SUMMARY))
    baseline["retrieval"]["metrics"]["exec@1"] = 0.5
    baseline["conditions"]["rag"]["pass_rate"] = 0.52
    baseline["propagation"]["bug_inheritance_rate"] = 0.4
    drops = parse_thresholds(
        ["exec@1=0.05", "rag.pass=0.05", "bug_inheritance=0.1", "repair=0.0"], "max_drop"
    )
    results = gate_results(SUMMARY, drops, baseline)
    assert [r.ok for r in results] == [False, True, False, True]
    assert (
        results[0].message
        == "exec@1 dropped by 0.100 (0.500 in the baseline -> 0.400), more than --max-drop 0.05"
    )
    # lower is better for bug inheritance: its rise is the regression
    assert results[2].message.startswith("bug_inheritance rose by 0.200 (0.400 in the baseline -> 0.600)")
    # a drop exactly at the limit holds; an improvement always holds
    assert gate_results(SUMMARY, parse_thresholds(["exec@1=0.1"], "max_drop"), baseline)[0].ok
    assert gate_results(baseline, parse_thresholds(["exec@1=0"], "max_drop"), SUMMARY)[0].ok
    with pytest.raises(ConfigError, match="--baseline"):
        gate_results(SUMMARY, drops)
    # the exec-nDCG gap is a "lower is better" diagnostic too
    gap = parse_thresholds(["exec_ndcg_gap@3=0.05"], "max_drop")
    now = {"retrieval": {"metrics": {"exec_ndcg_gap@3": 0.3}}}
    before = {"retrieval": {"metrics": {"exec_ndcg_gap@3": 0.2}}}
    assert not gate_results(now, gap, before)[0].ok and gate_results(before, gap, now)[0].ok


def test_check_available_refuses_conditions_the_run_lacks() -> None:
    thresholds = parse_thresholds(["rag.pass=0.5", "exec@1=0.2"], "fail_under")
    check_available(thresholds, (c for c in ["rag", "oracle"]))
    with pytest.raises(ConfigError, match="rag.pass: the condition is not part of this run"):
        check_available(thresholds, iter(["oracle"]))


# -------------------------------------------------------------------------------------------- JUnit


def test_junit_has_one_case_per_record_and_threshold(tmp_path: Path) -> None:
    records = [
        RunRecord(
            query_id="q1", condition="rag", passed=True, results=["pass", "pass"], code="def f(): pass"
        ),
        RunRecord(
            query_id="q1",
            condition="oracle",
            results=["pass", "FAIL"],
            code="def f():\n    return '<b>]]>\x00\x1b'",
            context_ids=["c9"],
            context_kind="own_distractor",
            context_bug_type="off_by_one",
        ),
        RunRecord(query_id="q2", condition="rag", status="llm_error", error="rate limited <429>"),
        RunRecord(query_id="q2", condition="oracle", status="no_code", response="I cannot"),
    ]
    thresholds = [Threshold("exec@1", 0.3, "fail_under"), Threshold("rag.pass", 0.9, "fail_under")]
    results = gate_results(SUMMARY, thresholds)
    path = write_junit(tmp_path / "out" / "junit.xml", records, results)
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("6", "3", "1")
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    cases = suites["agentbench.records"].findall("testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [
        ("agentbench.rag", "q1"),
        ("agentbench.oracle", "q1"),
        ("agentbench.rag", "q2"),
        ("agentbench.oracle", "q2"),
    ]
    assert cases[0].find("failure") is None and cases[0].find("error") is None
    failure = cases[1].find("failure")
    assert failure.get("message") == "1/2 asserts passed; context c9 (own_distractor, off_by_one)"
    assert failure.text == "assert 1: pass\nassert 2: FAIL"
    assert cases[1].find("system-out").text == "def f():\n    return '<b>]]>\ufffd\ufffd'"
    assert cases[2].find("error").get("type") == "llm_error"
    assert cases[2].find("error").get("message") == "rate limited <429>"
    assert cases[3].find("failure").get("message") == "no code in the response"
    tcases = suites["agentbench.thresholds"].findall("testcase")
    assert [c.get("name") for c in tcases] == ["exec@1 >= 0.3", "rag.pass >= 0.9"]
    assert tcases[0].find("failure") is None
    assert (
        tcases[1].find("failure").get("message") == "rag.pass = 0.500 is below the --fail-under threshold 0.9"
    )


# --------------------------------------------------------------------------------- agentbench check


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    """A baseline (rag passes 6 of 10) and a run (rag passes 4 of 10); oracle always passes."""
    base = make_run(tmp_path / "base", {f"q{i}": int(i < 6) for i in range(10)})
    run = make_run(tmp_path / "run", {f"q{i}": int(i < 4) for i in range(10)})
    return base, run


def test_check_exit_codes(runs: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    base, run = runs
    code, _, err = cli(
        capsys, "check", str(run), "--fail-under", "rag.pass=0.4", "--fail-under", "oracle.pass=1"
    )
    assert code == 0, err
    assert "rag.pass = 0.400 >= 0.4" in err
    code, _, err = cli(
        capsys, "check", str(run), "--fail-under", "rag.pass=0.45", "--fail-over", "exec@1=0.3"
    )
    assert code == 1
    assert "threshold violated: rag.pass = 0.400 is below the --fail-under threshold 0.45" in err
    assert "threshold violated: exec@1 = 0.400 is above the --fail-over threshold 0.3" in err
    code, _, err = cli(capsys, "check", str(run), "--baseline", str(base), "--max-drop", "rag.pass=0.1")
    assert code == 1 and "rag.pass dropped by 0.200 (0.600 in the baseline -> 0.400)" in err
    code, _, err = cli(capsys, "check", str(run), "--baseline", str(base), "--max-drop", "rag.pass=0.2")
    assert code == 0, err
    for args in (
        ["--fail-under", "rag.pass"],  # malformed
        ["--fail-under", "rag.pass=2"],  # not a rate
        ["--fail-under", "closed_book.pass=0.1"],  # not in the run
        ["--max-drop", "rag.pass=0.1"],  # no baseline
        [],  # nothing to check
        ["--baseline", str(tmp_path / "missing"), "--max-drop", "rag.pass=0.1"],
    ):
        code, _, err = cli(capsys, "check", str(run), *args)
        assert code == 2, args
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    code, _, err = cli(capsys, "check", str(run), "--fail-under", "rag.pass=0.1", "--format", "xml")
    assert code == 2 and "xml" in err  # typer's usage error
    code, _, err = cli(capsys, "check", str(tmp_path / "nowhere"), "--fail-under", "rag.pass=0.1")
    assert code == 2 and "nowhere" in err


def test_check_junit_and_json(runs: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    base, run = runs
    junit = tmp_path / "junit.xml"
    code, out, _ = cli(
        capsys,
        "check",
        str(run),
        "--baseline",
        str(base),
        "--max-drop",
        "rag.pass=0.1",
        "--fail-under",
        "oracle.pass=0.9",
        "--junit",
        str(junit),
        "--format",
        "json",
    )
    assert code == 1
    data = json.loads(out)
    assert data["ok"] is False
    assert [(r["threshold"]["metric"], r["threshold"]["flag"], r["ok"]) for r in data["results"]] == [
        ("oracle.pass", "--fail-under", True),
        ("rag.pass", "--max-drop", False),
    ]
    assert data["results"][1]["value"] == 0.4 and data["results"][1]["baseline"] == 0.6
    root = ET.parse(junit).getroot()
    assert root.get("tests") == str(20 + 2)  # 10 queries x (rag, oracle) + 2 thresholds
    assert root.get("failures") == str(6 + 1)  # 6 failed rag records + the violated threshold


def test_exit_codes_of_the_real_process(runs: tuple[Path, Path]) -> None:
    _, run = runs
    res = run_cli("check", str(run), "--fail-under", "rag.pass=0.5")
    assert res.returncode == 1 and "rag.pass = 0.400" in res.stderr and "0.5" in res.stderr
    res = run_cli("check", str(run), "--fail-under", "rag.pass=oops")
    assert res.returncode == 2 and "Traceback" not in res.stderr


# ----------------------------------------------------------------------------------- agentbench run


def test_run_gate_options(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    scripted_client()  # registers the scripted/ provider the CLI's LLMClient will use
    common = [
        "run",
        "--llm",
        "scripted/m",
        "--embedder",
        "bm25",
        "--sandbox",
        "process",
        "--limit",
        "3",
        "--conditions",
        "rag,oracle",
        "--store-dir",
        str(tmp_path / "stores"),
    ]
    # bad thresholds fail before any work: nothing is written
    for bad in (
        ["--fail-under", "rag.pass=x"],
        ["--fail-over", "distractor.pass=0.5"],
        ["--fail-under", "nope=1"],
    ):
        code, _, err = cli(capsys, *common, "--run-dir", str(tmp_path / "never"), *bad)
        assert code == 2, bad
        assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "never").exists()
    # oracle passes (the scripted model copies the canonical); rag = 1 is violated
    junit = tmp_path / "junit.xml"
    code, out, err = cli(
        capsys,
        *common,
        "--run-dir",
        str(tmp_path / "gated"),
        "--fail-under",
        "oracle.pass=0.9",
        "--fail-under",
        "rag.pass=1",
        "--junit",
        str(junit),
        "--format",
        "json",
    )
    assert code == 1, err
    summary = json.loads(out)
    assert summary == json.loads((tmp_path / "gated" / "summary.json").read_text())
    rag = summary["conditions"]["rag"]["pass_rate"]
    assert rag < 1
    assert f"threshold violated: rag.pass = {rag:.3f} is below the --fail-under threshold 1" in err
    root = ET.parse(junit).getroot()
    assert root.get("tests") == str(3 * 2 + 2)
    names = [c.get("name") for c in root.iter("testcase") if c.get("classname") == "agentbench.thresholds"]
    assert names == ["oracle.pass >= 0.9", "rag.pass >= 1"]
    # the same run with thresholds that hold (answers come from the LLM cache)
    code, out, err = cli(
        capsys,
        *common,
        "--run-dir",
        str(tmp_path / "ok"),
        "--fail-under",
        f"rag.pass={rag}",
        "--fail-over",
        "bug_inheritance=1",
    )
    assert code == 0, err
    assert "run directory" in out
