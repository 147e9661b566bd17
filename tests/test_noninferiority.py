"""Non-inferiority and superiority gates (`check --non-inferior/--superior`, `run ... --baseline DIR`) and
`agentbench plan`, checked against intervals and sample sizes computed by hand from the formulas.

The runs are built like test_compare's (config.json, retrieval.json, records.jsonl), so every paired count
is known: the baseline passes rag on 64 of 100 queries, and the run agrees with it on 90 of them.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from agentbench.analysis.noninferiority import (
    MarginSpec,
    needed_queries,
    oriented,
    paired_gate,
    paired_interval,
    parse_margins,
)
from agentbench.errors import ConfigError
from agentbench.pipeline import RunConfig, RunRecord

from .test_compare import _retrieval, make_run
from .test_report import cli, scripted_client

# ----------------------------------------------------------------------------- the hand-computed fixture
#
# n = 100 paired queries: a = 60 both right, b = 6 only the run, c = 4 only the baseline, d = 30 neither.
# p1 (run) = 66/100 = 0.66, p2 (baseline) = 64/100 = 0.64, D = (b - c)/n = +0.02.
# Wilson 95% (z = 1.959964, z^2 = 3.841459): centre (k + z^2/2)/(n + z^2), half-width
# z * sqrt(k(n-k)/n + z^2/4)/(n + z^2), with n + z^2 = 103.841459:
#   k = 66: centre 67.920729/103.841459 = 0.654081, half 1.959964 * sqrt(22.44 + 0.960365)/103.841459
#           = 1.959964 * 4.837392/103.841459 = 0.091304  ->  l1 = 0.562777, u1 = 0.745385
#   k = 64: centre 65.920729/103.841459 = 0.634821, half 1.959964 * sqrt(23.04 + 0.960365)/103.841459
#           = 0.092467  ->  l2 = 0.542354, u2 = 0.727288
# phi = (ad - bc)/sqrt((a+b)(c+d)(a+c)(b+d)) = (1800 - 24)/sqrt(66*34*64*36) = 1776/2273.8021 = 0.781071
# p1 - l1 = 0.097223, u1 - p1 = 0.085385, p2 - l2 = 0.097646, u2 - p2 = 0.087288
# lo = 0.02 - sqrt(0.097223^2 - 2*0.781071*0.097223*0.087288 + 0.087288^2) = 0.02 - sqrt(0.0038145)
#    = 0.02 - 0.061762 = -0.041762
# hi = 0.02 + sqrt(0.097646^2 - 2*0.781071*0.097646*0.085385 + 0.085385^2) = 0.02 + sqrt(0.0038010)
#    = 0.02 + 0.061652 = +0.081652
# Queries needed (margin 0.03): psi = (b + c)/n = 0.1, (z_0.975 + z_0.8)^2 = (1.959964 + 0.841621)^2
#    = 7.848880; n = 7.848880 * (0.1 - 0.02^2)/(0.02 + 0.03)^2 = 7.848880 * 0.0996/0.0025 = 312.70 -> 313
FIXTURE = (60, 6, 4, 30)
LO, HI = -0.041762, 0.081652
N_AT_003 = 313


def test_hand_computed_interval() -> None:
    diff, lo, hi = paired_interval(*FIXTURE)
    assert diff == pytest.approx(0.02)
    assert lo == pytest.approx(LO, abs=5e-6) and hi == pytest.approx(HI, abs=5e-6)
    # Newcombe's (1998) worked example (a, b, c, d) = (36, 12, 2, 0): method 10 gives 0.0569 to 0.3404
    diff, lo, hi = paired_interval(36, 12, 2, 0)
    assert (diff, round(lo, 4), round(hi, 4)) == (pytest.approx(0.2), 0.0569, 0.3404)
    # no discordant pair and every query right: the interval is symmetric about 0, Wilson 3/3 = [0.4385, 1]
    diff, lo, hi = paired_interval(3, 0, 0, 0)
    assert diff == 0 and lo == pytest.approx(-0.561497, abs=1e-6) and hi == pytest.approx(0.561497, abs=1e-6)


def _outcomes(a: int, b: int, c: int, d: int) -> tuple[dict[str, int], dict[str, int]]:
    """(run, baseline) outcome maps of a paired table: a both right, b only the run, c only the baseline."""
    cells = [(1, 1)] * a + [(1, 0)] * b + [(0, 1)] * c + [(0, 0)] * d
    run = {f"q{i:03d}": x for i, (x, _) in enumerate(cells)}
    base = {f"q{i:03d}": y for i, (_, y) in enumerate(cells)}
    return run, base


def _gate(table: tuple[int, int, int, int], margin: float, kind: str = "non_inferior", **kw):
    run, base = _outcomes(*table)
    return paired_gate(MarginSpec("rag.pass", margin, kind), run, base, **kw)


def test_verdicts_non_inferior() -> None:
    r = _gate(FIXTURE, 0.05)  # lo -0.0418 > -0.05
    assert (r.verdict, r.ok, r.n, r.b, r.c, r.needed_n) == ("not worse", True, 100, 6, 4, None)
    assert (round(r.lo, 6), round(r.hi, 6)) == (LO, HI)
    r = _gate(FIXTURE, 0.03)  # lo -0.0418 < -0.03 < hi
    assert (r.verdict, r.ok, r.needed_n) == (
        f"inconclusive: about {N_AT_003} queries needed",
        False,
        N_AT_003,
    )
    assert _gate(FIXTURE, 0.03, allow_inconclusive=True).ok
    assert needed_queries(0.1, 0.02, 0.03) == N_AT_003
    # (a, b, c, d) = (42, 2, 22, 34): D = -0.2, interval [-0.2828, -0.1106]
    worse = (42, 2, 22, 34)
    r = _gate(worse, 0.1)  # hi -0.1106 < -0.1
    assert (r.verdict, r.ok, r.needed_n) == ("worse", False, None)
    r = _gate(worse, 0.15)  # straddles -0.15, but D = -0.2 is already below it: no count
    assert r.verdict.startswith("inconclusive: the run looks worse") and r.needed_n is None
    assert _gate(worse, 0.15, allow_inconclusive=True).ok  # allowed: inconclusive passes
    # margin 0.25: psi = 24/100, n = 7.848880 * (0.24 - 0.04)/(0.25 - 0.2)^2 = 627.9 -> 628
    r = _gate(worse, 0.25)
    assert (r.verdict, r.needed_n) == ("inconclusive: about 628 queries needed", 628)
    assert "discordant pairs 24 (2 better in the run, 22 in the baseline)" in r.message


def test_verdicts_superior() -> None:
    table = (36, 12, 2, 0)  # D = +0.2, interval [0.0569, 0.3404]
    assert _gate(table, 0.05, "superior").verdict == "better"
    assert _gate(table, 0.35, "superior").verdict == "not better"
    # margin 0.1: psi = 14/50 = 0.28, n = 7.848880 * (0.28 - 0.04)/(0.2 - 0.1)^2 = 188.4 -> 189
    r = _gate(table, 0.1, "superior")
    assert (r.verdict, r.needed_n, r.ok) == ("inconclusive: about 189 queries needed", 189, False)
    r = _gate(FIXTURE, 0.05, "superior")  # D = 0.02 is not above +0.05
    assert r.verdict.startswith("inconclusive: the run does not look better") and r.needed_n is None


def test_lower_is_better_is_oriented_and_errors_fail() -> None:
    run, base = _outcomes(*FIXTURE)
    # retrieval_induced_failures: 1 marks a failure, so the run (fewer of them) is better when flipped
    flipped = paired_gate(
        MarginSpec("retrieval_induced_failures", 0.05, "non_inferior"),
        oriented("retrieval_induced_failures", {q: 1 - v for q, v in run.items()}),
        oriented("retrieval_induced_failures", {q: 1 - v for q, v in base.items()}),
    )
    assert (flipped.diff, flipped.b, flipped.c) == (pytest.approx(0.02), 6, 4)
    assert "(baseline - run: lower is better)" in flipped.message
    r = paired_gate(
        MarginSpec("rag.pass", 0.05, "non_inferior"), run, base, missing=["run: q9/rag (llm_error)"]
    )
    assert r.verdict == "not worse" and not r.ok and "run: q9/rag (llm_error)" in r.message


@pytest.mark.parametrize(
    "spec, message",
    [
        ("rag.pass=0", r"\(0, 1\)"),
        ("rag.pass=1.5", r"\(0, 1\)"),
        ("rag.pass=1", r"\(0, 1\)"),
        ("rag.pass=nan", r"\(0, 1\)"),
        ("rag.pass", "METRIC=MARGIN"),
        ("rag.pass=x", "not a number"),
        ("accuracy=0.05", "unknown metric 'accuracy'"),
        ("mrr=0.05", "unknown metric"),
        ("rag.repair=0.05", "unknown metric"),
    ],
)
def test_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_margins([spec], "non_inferior")


def test_spec_forms() -> None:
    specs = parse_margins(
        ["rag.pass_rate=0.05", "exec@10=0.1", "retrieval_induced_failures=0.02"], "superior"
    )
    assert [(s.metric, s.margin, s.label) for s in specs] == [
        ("rag.pass", 0.05, "--superior rag.pass=0.05"),
        ("exec@10", 0.1, "--superior exec@10=0.1"),
        ("retrieval_induced_failures", 0.02, "--superior retrieval_induced_failures=0.02"),
    ]


# ------------------------------------------------------------------------------------ agentbench check


def _table_run(path: Path, cells: list[tuple[int, int]], side: int, errors: tuple = ()) -> Path:
    """A run (side 0) or baseline (side 1) whose rag (and exec@1) outcomes are column ``side`` of ``cells``."""
    return make_run(path, {f"q{i:03d}": cell[side] for i, cell in enumerate(cells)}, errors=errors)


def _cells(a: int, b: int, c: int, d: int) -> list[tuple[int, int]]:
    return [(1, 1)] * a + [(1, 0)] * b + [(0, 1)] * c + [(0, 0)] * d


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    cells = _cells(*FIXTURE)
    # a run 20 points worse against the same baseline: right on 42 of the baseline's 64 and on 2 of its 36
    ones = [i for i, (_, y) in enumerate(cells) if y]
    zeros = [i for i, (_, y) in enumerate(cells) if not y]
    worse = {f"q{i:03d}": 0 for i in range(100)} | {f"q{i:03d}": 1 for i in ones[:42] + zeros[:2]}
    return {
        "base": _table_run(tmp_path / "base", cells, 1),
        "run": _table_run(tmp_path / "run", cells, 0),
        "worse": make_run(tmp_path / "worse", worse),
        "errors": _table_run(tmp_path / "errors", cells, 0, errors=("q000", "q099")),
        "other_ids": make_run(tmp_path / "other", {f"x{i}": 1 for i in range(5)}),
        "tmp": tmp_path,
    }


def _check(capsys, run: Path, base: Path, *args: str) -> tuple[int, str, str]:
    return cli(capsys, "check", str(run), "--baseline", str(base), *args)


def test_check_exit_codes_and_line(dirs: dict[str, Path], capsys) -> None:
    code, _, err = _check(capsys, dirs["run"], dirs["base"], "--non-inferior", "rag.pass=0.05")
    assert code == 0, err
    assert err.strip() == (
        "agentbench: ok: rag.pass: difference +0.020 (run - baseline), 95% CI [-0.042, +0.082], n = 100, "
        "discordant pairs 10 (6 better in the run, 4 in the baseline); --non-inferior rag.pass=0.05: not worse"
    )
    code, _, err = _check(capsys, dirs["run"], dirs["base"], "--non-inferior", "exec@1=0.03")
    assert code == 1 and "threshold violated: exec@1: difference +0.020" in err
    assert err.rstrip().endswith(f"--non-inferior exec@1=0.03: inconclusive: about {N_AT_003} queries needed")
    code, _, err = _check(
        capsys, dirs["run"], dirs["base"], "--non-inferior", "exec@1=0.03", "--allow-inconclusive"
    )
    assert code == 0 and "agentbench: ok: exec@1" in err and "inconclusive" in err
    code, _, err = _check(capsys, dirs["worse"], dirs["base"], "--non-inferior", "rag.pass=0.1")
    assert code == 1 and err.rstrip().endswith("--non-inferior rag.pass=0.1: worse")
    assert "difference -0.200 (run - baseline), 95% CI [-0.283, -0.111]" in err
    code, _, err = _check(capsys, dirs["run"], dirs["base"], "--superior", "rag.pass=0.05")
    assert code == 1 and "--superior rag.pass=0.05: inconclusive: the run does not look better" in err
    # together with a threshold: both are reported, the paired gate decides too
    code, _, err = _check(
        capsys, dirs["run"], dirs["base"], "--non-inferior", "rag.pass=0.05", "--fail-under", "rag.pass=0.7"
    )
    assert code == 1 and "threshold violated: rag.pass = 0.660" in err and "not worse" in err


def test_check_json_and_junit(dirs: dict[str, Path], capsys) -> None:
    junit = dirs["tmp"] / "junit.xml"
    code, out, _ = _check(
        capsys, dirs["run"], dirs["base"], "--non-inferior", "rag.pass=0.03", "--format", "json",
        "--superior", "rag.pass=0.01", "--junit", str(junit),
    )  # fmt: skip
    assert code == 1
    cases = [
        c for c in ET.parse(junit).getroot().iter("testcase") if c.get("classname") == "agentbench.thresholds"
    ]
    assert [c.get("name") for c in cases] == ["--non-inferior rag.pass=0.03", "--superior rag.pass=0.01"]
    assert "inconclusive: about 313 queries needed" in cases[0].find("failure").get("message")
    data = json.loads(out)
    assert data["ok"] is False and data["results"] == []
    g, _ = data["paired_gates"]
    assert (g["metric"], g["flag"], g["margin"], g["n"], g["b"], g["c"]) == (
        "rag.pass",
        "--non-inferior",
        0.03,
        100,
        6,
        4,
    )
    assert (round(g["lo"], 6), round(g["hi"], 6), g["needed_n"], g["ok"]) == (LO, HI, N_AT_003, False)
    assert g["verdict"] == f"inconclusive: about {N_AT_003} queries needed"
    assert g["method"].startswith("Newcombe (1998) method 10")


def test_check_records_lost_to_errors_fail(dirs: dict[str, Path], capsys) -> None:
    code, _, err = _check(capsys, dirs["errors"], dirs["base"], "--non-inferior", "rag.pass=0.5")
    assert code == 1
    assert "n = 98" in err and "not worse" in err
    assert (
        "2 record(s) are missing because of errors (run: q000/rag (llm_error), run: q099/rag (llm_error))"
        in err
    )
    # exec@1 does not depend on generation records: the errors do not touch it
    code, _, err = _check(capsys, dirs["errors"], dirs["base"], "--non-inferior", "exec@1=0.5")
    assert code == 0, err


def test_check_bad_input_is_one_line(dirs: dict[str, Path], capsys) -> None:
    run, base = dirs["run"], dirs["base"]
    cases = [
        (base, ["--non-inferior", "rag.pass=0"], "(0, 1)"),
        (base, ["--non-inferior", "rag.pass=1.5"], "(0, 1)"),
        (base, ["--superior", "rag.pass=0"], "(0, 1)"),
        (base, ["--non-inferior", "accuracy=0.05"], "unknown metric 'accuracy'"),
        (
            base,
            ["--non-inferior", "closed_book.pass=0.05"],
            "valid metrics: exec@1, exec@3, rag.pass, oracle.pass",
        ),
        (base, ["--non-inferior", "exec@5=0.05"], "valid metrics: exec@1"),
        (dirs["other_ids"], ["--non-inferior", "rag.pass=0.05"], "share no scored query"),
        (dirs["tmp"] / "missing", ["--non-inferior", "rag.pass=0.05"], "missing"),
    ]
    for baseline, args, message in cases:
        code, _, err = _check(capsys, run, baseline, *args)
        assert code == 2, args
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert message in err, err
    code, _, err = cli(capsys, "check", str(run), "--non-inferior", "rag.pass=0.05")
    assert code == 2 and "--non-inferior compares with a baseline: add --baseline RUN_DIR" in err


# ---------------------------------------------------------------------- retrieval_induced_failures


def _attribution_run(path: Path, induced: dict[str, int]) -> Path:
    """closed_book passes everywhere; rag fails with a buggy top-1 where ``induced`` is 1."""
    path.mkdir(parents=True)
    config = RunConfig(conditions=["closed_book", "rag"], run_dir=str(path))
    (path / "config.json").write_text(config.model_dump_json())
    (path / "retrieval.json").write_text(json.dumps(_retrieval({q: 1 - v for q, v in induced.items()})))
    records = []
    for q, v in induced.items():
        records.append(RunRecord(query_id=q, condition="closed_book", passed=True))
        records.append(RunRecord(query_id=q, condition="rag", passed=not v, context_passes=not v))
    (path / "records.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records))
    return path


def test_retrieval_induced_failures_positive_means_fewer(tmp_path: Path, capsys) -> None:
    # the run induces failures on 4 queries, the baseline on 6 (the fixture's table, flipped): +0.02
    cells = _cells(*FIXTURE)
    run = _attribution_run(tmp_path / "run", {f"q{i:03d}": 1 - x for i, (x, _) in enumerate(cells)})
    base = _attribution_run(tmp_path / "base", {f"q{i:03d}": 1 - y for i, (_, y) in enumerate(cells)})
    code, _, err = _check(capsys, run, base, "--non-inferior", "retrieval_induced_failures=0.05")
    assert code == 0, err
    assert "difference +0.020 (baseline - run: lower is better), 95% CI [-0.042, +0.082]" in err


# ------------------------------------------------------------------------------------- agentbench plan


def test_plan_one_run_and_pilot(dirs: dict[str, Path], capsys) -> None:
    # one run: p = 0.64, psi = 2 * 0.64 * 0.36 = 0.4608; n = 7.848880 * 0.4608/0.05^2 = 1446.7 -> 1447
    code, out, err = cli(capsys, "plan", "--baseline", str(dirs["base"]), "--margin", "0.05")
    assert code == 0, err
    assert "discordance rate: 0.461 = 2p(1-p) with p = 0.640" in out and "upper bound" in out
    assert "queries needed: 1447 for --non-inferior rag.pass=0.05 (one-sided alpha 0.025, power 0.8)" in out
    # a pilot: 10 of 100 discordant, psi = 0.1; n = 7.848880 * 0.1/0.0025 = 313.96 -> 314
    code, out, err = cli(
        capsys, "plan", "--baseline", str(dirs["base"]), "--pilot", str(dirs["run"]), "--margin", "0.05",
        "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    assert (data["psi"], data["psi_source"], data["discordant"], data["needed_n"]) == (
        0.1,
        "observed",
        10,
        314,
    )
    # power 0.9: (1.959964 + 1.281552)^2 = 10.507423; n = 10.507423 * 0.1/0.0025 = 420.3 -> 421
    code, out, _ = cli(
        capsys, "plan", "--baseline", str(dirs["base"]), "--pilot", str(dirs["run"]), "--margin", "0.05",
        "--power", "0.9",
    )  # fmt: skip
    assert code == 0 and "queries needed: 421 " in out and "observed: 10 of 100" in out
    for args, message in (
        (["--margin", "0"], "(0, 1)"),
        (["--margin", "1.5"], "(0, 1)"),
        (["--margin", "0.05", "--power", "1"], "--power"),
        (["--margin", "0.05", "--metric", "accuracy"], "unknown metric"),
        (["--margin", "0.05", "--metric", "closed_book.pass"], "valid metrics: exec@1"),
    ):
        code, _, err = cli(capsys, "plan", "--baseline", str(dirs["base"]), *args)
        assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, (args, err)


# -------------------------------------------------------------------------------------- agentbench run


def test_run_with_a_baseline_directory(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    scripted_client()
    common = [
        "run", "--llm", "scripted/m", "--embedder", "bm25", "--sandbox", "process", "--limit", "3",
        "--conditions", "rag,oracle", "--store-dir", str(tmp_path / "stores"),
    ]  # fmt: skip
    code, _, err = cli(capsys, *common, "--run-dir", str(tmp_path / "base"))
    assert code == 0, err
    # bad input fails before any work: nothing is written
    for bad, message in (
        (["--baseline", str(tmp_path / "base")], "--non-inferior/--superior"),
        (["--non-inferior", "oracle.pass=0.5"], "add --baseline RUN_DIR"),
        (["--baseline", str(tmp_path / "nowhere"), "--non-inferior", "oracle.pass=0.5"], "nowhere"),
        (["--baseline", str(tmp_path / "base"), "--non-inferior", "closed_book.pass=0.5"], "closed_book"),
        (["--baseline", str(tmp_path / "base"), "--non-inferior", "oracle.pass=2"], "(0, 1)"),
    ):
        code, _, err = cli(capsys, *common, "--run-dir", str(tmp_path / "never"), *bad)
        assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, (bad, err)
    assert not (tmp_path / "never").exists()
    # the same configuration again (answers from the LLM cache): identical outcomes, 3 queries, no
    # discordant pair; the interval is [-0.561, +0.561] (Wilson 3/3), so margin 0.9 passes and 0.5 cannot
    gated = [*common, "--baseline", str(tmp_path / "base")]
    code, _, err = cli(capsys, *gated, "--run-dir", str(tmp_path / "a"), "--non-inferior", "oracle.pass=0.9")
    assert code == 0, err
    assert "oracle.pass: difference +0.000 (run - baseline), 95% CI [-0.561, +0.561], n = 3" in err
    code, _, err = cli(capsys, *gated, "--run-dir", str(tmp_path / "b"), "--non-inferior", "oracle.pass=0.5")
    assert code == 1 and "inconclusive: about" in err
    code, _, err = cli(
        capsys, *gated, "--run-dir", str(tmp_path / "c"), "--non-inferior", "oracle.pass=0.5",
        "--allow-inconclusive",
    )  # fmt: skip
    assert code == 0, err
