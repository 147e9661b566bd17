"""The leaderboard's neighbouring-rank tests: Holm's correction against hand-computed numbers, and
leaderboards of scripted run directories (``make_run`` of test_compare) whose paired counts are known, so
every p-value below is an exact binomial tail worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from agentbench.analysis.leaderboard import Leaderboard, build_leaderboard, render_leaderboard_html
from agentbench.analysis.stats import holm
from agentbench.analysis.terminal import print_leaderboard
from agentbench.pipeline import RunConfig, RunRecord
from agentbench.pipeline.matrix import MANIFEST

from .test_compare import make_run


def test_holm_by_hand() -> None:
    # sorted 0.01, 0.03, 0.04 times 3, 2, 1 = 0.03, 0.06, 0.04; the running maximum lifts 0.04 to 0.06
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    # capped at 1; ties keep their order; None is not counted in the family (m = 2 here)
    assert holm([0.6, None, 0.01]) == [pytest.approx(0.6), None, pytest.approx(0.02)]
    assert holm([0.5, 0.5]) == [1.0, 1.0]
    assert holm([]) == [] and holm([None]) == [None]


def _bits(ones: int, n: int = 20, prefix: str = "q") -> dict[str, int]:
    """Queries q00.. of which the first ``ones`` pass."""
    return {f"{prefix}{i:02d}": int(i < ones) for i in range(n)}


def _matrix(path: Path, runs: dict[str, Path]) -> Path:
    """A matrix directory listing ``runs`` (already written under ``path``) in the given order."""
    combos = [
        {
            "index": i,
            "name": name,
            "agent": f"scripted/{name}",
            "agent_kind": "llm",
            "retriever": "bm25",
            "retriever_kind": "embedder",
        }
        for i, name in enumerate(runs, start=1)
    ]
    (path / MANIFEST).write_text(json.dumps({"schema_version": 1, "combinations": combos}))
    return path


def test_a_large_gap_is_significant_and_a_tie_is_not(tmp_path: Path) -> None:
    # matrix order: weak (2/20), strong (18/20), twin (the same 2/20 as weak): ranks strong, weak, twin
    runs = {
        "weak": make_run(tmp_path / "weak", _bits(2)),
        "strong": make_run(tmp_path / "strong", _bits(18)),
        "twin": make_run(tmp_path / "twin", _bits(2)),
    }
    board = build_leaderboard(_matrix(tmp_path, runs), n_resamples=200)
    assert [r.name for r in board.rows] == ["strong", "weak", "twin"]
    top, mid, last = board.rows
    assert last.vs_next is None
    gap = top.vs_next
    assert (gap.next_rank, gap.next_index, gap.metric, gap.n) == (2, 1, "rag.pass", 20)
    assert gap.difference == pytest.approx(0.8) and (gap.this_only, gap.next_only) == (16, 0)
    assert gap.test == "exact McNemar" and gap.reason is None
    # 16 discordant pairs all one way: two-sided tail 2 * 0.5**16; Holm over the family of 2 doubles it
    assert gap.p_value == pytest.approx(2 * 0.5**16)
    assert gap.p_holm == pytest.approx(4 * 0.5**16)
    assert gap.significant is True and gap.mark == ">"
    tie = mid.vs_next
    assert (tie.n, tie.difference, tie.this_only, tie.next_only) == (20, 0.0, 0, 0)
    assert tie.p_value == 1.0 and tie.p_holm == 1.0 and tie.significant is False and tie.mark == "≈"

    data = board.to_json_dict()
    row = data["rows"][0]
    assert list(row)[-1] == "vs_next"  # appended after every earlier field
    assert row["vs_next"]["significant"] is True and data["rows"][2]["vs_next"] is None
    assert Leaderboard.model_validate(data).to_json_dict() == data

    console = Console(record=True, width=220)
    print_leaderboard(board, console)
    text = console.export_text()
    assert "vs next" in text and "Holm-corrected over all neighbouring pairs" in text
    assert f"> {4 * 0.5**16:.1e}" in text and "≈ 1" in text
    html = render_leaderboard_html(board)
    assert f"&gt; {4 * 0.5**16:.1e}" in html and "≈ 1" in html and "Holm-corrected" in html


def test_runs_sharing_no_queries_are_na_and_left_out_of_the_family(tmp_path: Path) -> None:
    # other has 10 different queries, none passing: ranked last, it shares nothing with the run above
    runs = {
        "strong": make_run(tmp_path / "strong", _bits(18)),
        "weak": make_run(tmp_path / "weak", _bits(2)),
        "other": make_run(tmp_path / "other", _bits(0, 10, prefix="r")),
    }
    board = build_leaderboard(_matrix(tmp_path, runs), n_resamples=200)
    assert [r.name for r in board.rows] == ["strong", "weak", "other"]
    gap, na = board.rows[0].vs_next, board.rows[1].vs_next
    assert (na.n, na.p_value, na.p_holm, na.significant, na.mark) == (0, None, None, None, "n/a")
    assert na.reason == "weak and other share no queries scored on rag.pass"
    # the family is the one testable pair: Holm leaves its p as it is
    assert gap.p_holm == gap.p_value == pytest.approx(2 * 0.5**16) and gap.significant is True
    console = Console(record=True, width=220)
    print_leaderboard(board, console)
    text = console.export_text()
    assert "n/a" in text and "(weak and other share no queries scored on rag.pass)" in text


def _sampled_run(path: Path, passes: dict[str, int], samples: int = 2) -> Path:
    """A --samples run: query q passes ``passes[q]`` of its ``samples`` rag generations."""
    path.mkdir(parents=True)
    config = RunConfig(conditions=["rag"], run_dir=str(path), samples=samples)
    (path / "config.json").write_text(config.model_dump_json())
    records = [
        RunRecord(query_id=q, condition="rag", sample=s, passed=s < k)
        for q, k in passes.items()
        for s in range(samples)
    ]
    (path / "records.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records))
    return path


def test_pass_fractions_use_the_sign_test(tmp_path: Path) -> None:
    # every query: 2/2 against 1/2, so all 12 per-query differences are positive
    runs = {
        "half": _sampled_run(tmp_path / "half", dict.fromkeys(_bits(0, 12), 1)),
        "full": _sampled_run(tmp_path / "full", dict.fromkeys(_bits(0, 12), 2)),
    }
    board = build_leaderboard(_matrix(tmp_path, runs), n_resamples=200)
    t = board.rows[0].vs_next
    assert board.rows[0].name == "full" and t.test == "sign test"
    assert (t.n, t.this_only, t.next_only) == (12, 12, 0) and t.difference == pytest.approx(0.5)
    assert t.p_value == t.p_holm == pytest.approx(2 * 0.5**12) and t.significant is True
