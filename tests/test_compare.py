"""`agentbench compare`: paired statistics on shared queries, checked against hand-computed values.

The runs are constructed (config.json, retrieval.json, records.jsonl) so every count is known:
McNemar's exact p is a binomial tail over the discordant pairs, and the bootstrap interval is checked against
an exactly enumerable case and against scipy's own bootstrap.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from agentbench.analysis.compare import compare_sources, load_sources, paired_stats
from agentbench.errors import ConfigError
from agentbench.pipeline import RunConfig, RunRecord

from .test_report import cli


def _retrieval(top1: dict[str, int], pool: str = "pool", model: str = "m") -> dict:
    """A retrieval results dict whose per-query top-1 passes as given (rank 2 always passes)."""
    return {
        "schema_version": 1,
        "model": model,
        "pool": pool,
        "ks": [1, 3],
        "metrics": {"exec@1": sum(top1.values()) / len(top1), "exec@3": 1.0},
        "ci95": {},
        "diagnostics": {},
        "n_queries": len(top1),
        "per_query": [
            {
                "query_id": q,
                "query": f"task {q} of {pool}",
                "correct_corpus_ids": ["c"],
                "top_results": [
                    {"rank": 1, "corpus_id": "a", "passes_all_tests": bool(v), "test_results": []},
                    {"rank": 2, "corpus_id": "b", "passes_all_tests": True, "test_results": []},
                ],
            }
            for q, v in top1.items()
        ],
    }


def make_run(path: Path, rag: dict[str, int], top1: dict[str, int] | None = None, errors: tuple = ()) -> Path:
    """A run directory with rag and oracle records; oracle always passes; ``errors`` are llm_error records."""
    path.mkdir(parents=True)
    config = RunConfig(conditions=["rag", "oracle"], run_dir=str(path))
    (path / "config.json").write_text(config.model_dump_json())
    (path / "retrieval.json").write_text(json.dumps(_retrieval(top1 if top1 is not None else rag)))
    records = []
    for q, v in rag.items():
        status = "llm_error" if q in errors else "ok"
        records.append(
            RunRecord(query_id=q, condition="rag", passed=bool(v) and status == "ok", status=status)
        )
        records.append(RunRecord(query_id=q, condition="oracle", passed=True))
    (path / "records.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records))
    return path


def _outcomes(bits: str) -> dict[str, int]:
    return {f"q{i:02d}": int(b) for i, b in enumerate(bits)}


# baseline 6/10, other 2/10: both pass q00; only the baseline q01-q05; only the other q06; neither q07-q09
BASE = "1111110000"
OTHER = "1000001000"


def _row(rows, metric):
    return next(r for r in rows if r.metric == metric)


def test_hand_computed_pair(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a", _outcomes(BASE))
    b = make_run(tmp_path / "b", _outcomes(OTHER))
    rows = compare_sources(load_sources([a, b]), seed=0)
    assert [r.metric for r in rows] == ["exec@1", "exec@3", "rag.pass", "oracle.pass"]
    for metric in ("rag.pass", "exec@1"):  # top-1 outcomes equal the rag outcomes here
        r = _row(rows, metric)
        assert (r.n, r.baseline_rate, r.other_rate) == (10, 0.6, 0.2)
        assert r.difference == pytest.approx(-0.4)
        assert (r.baseline_only, r.other_only) == (5, 1)
        # exact McNemar: two-sided binomial tail of 1 success in 6 discordant pairs at 1/2
        assert r.p_value == pytest.approx((1 + 6 + 6 + 1) / 64)
        lo, hi = r.ci95
        assert lo < -0.4 < hi
        # scipy's percentile bootstrap of the paired differences agrees to within the resampling noise
        d = np.array([int(y) - int(x) for x, y in zip(BASE, OTHER, strict=True)], dtype=float)
        ref = stats.bootstrap(
            (d,), np.mean, n_resamples=5000, method="percentile", random_state=np.random.default_rng(1)
        ).confidence_interval
        assert lo == pytest.approx(ref.low, abs=0.1) and hi == pytest.approx(ref.high, abs=0.1)
    same = _row(rows, "oracle.pass")
    assert (same.difference, same.p_value, same.ci95) == (0.0, 1.0, [0.0, 0.0])
    assert _row(rows, "exec@3").p_value == 1.0


def test_identical_runs_have_p_one_and_zero_difference(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a", _outcomes(BASE))
    b = make_run(tmp_path / "b", _outcomes(BASE))
    for r in compare_sources(load_sources([a, b])):
        assert r.n == 10 and r.difference == 0.0 and r.p_value == 1.0 and r.ci95 == [0.0, 0.0]
        assert r.baseline_only == r.other_only == 0


def test_bootstrap_interval_on_an_enumerable_case() -> None:
    # d = (-1, 0): a resample's mean is -1 with probability 1/4, -1/2 with 1/2 and 0 with 1/4, so the
    # 2.5th and 97.5th percentiles of 5,000 resamples are -1 and 0
    s = paired_stats([1, 0], [0, 0], seed=3)
    assert s["difference"] == -0.5 and s["ci95"] == [-1.0, 0.0]
    assert s["p_value"] == 1.0  # one discordant pair: P(X <= 0) + P(X >= 1) at n = 1 is capped at 1
    # seeded: the same data and seed give the same interval
    assert paired_stats([1, 1, 0, 0, 1], [0, 1, 1, 0, 0], seed=7) == paired_stats(
        [1, 1, 0, 0, 1], [0, 1, 1, 0, 0], seed=7
    )


def test_mcnemar_all_discordant_one_way() -> None:
    s = paired_stats([1] * 8, [0] * 8)
    assert s["p_value"] == pytest.approx(2 / 2**8)  # two-sided: 2 * 0.5**8
    assert s["difference"] == -1.0 and s["ci95"] == [-1.0, -1.0]


def test_only_shared_and_scored_queries_count(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a", _outcomes("110011"))
    # b lacks q05, has an extra q09, and its q00 hit an LLM error (left out of rag.pass only)
    rag_b = {**{k: v for k, v in _outcomes("011011").items() if k != "q05"}, "q09": 1}
    b = make_run(tmp_path / "b", rag_b, errors=("q00",))
    rows = compare_sources(load_sources([a, b]))
    rag = _row(rows, "rag.pass")
    assert rag.n == 4  # q01..q04: a = 1001, b = 1101
    assert (rag.baseline_rate, rag.other_rate, rag.difference) == (0.5, 0.75, 0.25)
    assert (rag.baseline_only, rag.other_only, rag.p_value) == (0, 1, 1.0)
    assert _row(rows, "exec@1").n == 5 and _row(rows, "oracle.pass").n == 5


def test_retrieval_results_files_alone(tmp_path: Path) -> None:
    out = tmp_path / "retrieval"
    out.mkdir()
    (out / "a.json").write_text(json.dumps(_retrieval(_outcomes(BASE), model="emb-a")))
    (out / "b.json").write_text(json.dumps(_retrieval(_outcomes(OTHER), model="emb-b")))
    rows = compare_sources(load_sources([out / "a.json", out / "b.json"]))
    assert [r.metric for r in rows] == ["exec@1", "exec@3"]
    assert _row(rows, "exec@1").p_value == pytest.approx(14 / 64)
    assert (rows[0].baseline, rows[0].other) == ("emb-a", "emb-b")
    # a directory of results files (as written by `agentbench retrieve --out`) stands for all of them
    assert [(r.metric, r.difference) for r in compare_sources(load_sources([out]))] == [
        (r.metric, r.difference) for r in rows
    ]
    # a run directory and a results file can be mixed: exec@k only
    run = make_run(tmp_path / "run", _outcomes(BASE))
    mixed = compare_sources(load_sources([run, out / "b.json"]))
    assert [r.metric for r in mixed] == ["exec@1", "exec@3"]


def test_compare_cli_table_json_and_errors(tmp_path: Path, capsys) -> None:
    a = make_run(tmp_path / "a", _outcomes(BASE))
    b = make_run(tmp_path / "b", _outcomes(OTHER))
    c = make_run(tmp_path / "c", _outcomes(BASE))
    code, out, err = cli(capsys, "compare", str(a), str(b))
    assert code == 0, err
    assert "rag.pass" in out and "-0.400" in out and "0.219" in out and "5/1" in out
    code, out, _ = cli(capsys, "compare", str(a), str(b), str(c), "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["baseline"] == "a" and data["n_resamples"] == 5000
    rag = [r for r in data["comparisons"] if r["metric"] == "rag.pass"]
    assert [(r["other"], r["difference"], r["p_value"]) for r in rag] == [
        ("b", pytest.approx(-0.4), 14 / 64),
        ("c", 0.0, 1.0),
    ]
    # input errors: one line, exit 2
    other_pool = tmp_path / "x.json"
    other_pool.write_text(json.dumps(_retrieval(_outcomes(BASE), pool="elsewhere")))
    not_results = tmp_path / "y.json"
    not_results.write_text('{"hello": 1}')
    for args in (
        [str(a)],
        [str(a), str(other_pool)],
        [str(a), str(not_results)],
        [str(a), str(tmp_path / "nope")],
    ):
        code, _, err = cli(capsys, "compare", *args)
        assert code == 2, args
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_no_shared_queries_is_an_input_error(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a", {"q1": 1})
    b = make_run(tmp_path / "b", {"q2": 1})
    with pytest.raises(ConfigError, match="share no queries"):
        compare_sources(load_sources([a, b]))
