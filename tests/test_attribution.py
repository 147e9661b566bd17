"""Paired per-query effects of retrieval (summary["attribution"]) against hand-computed numbers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agentbench.analysis.attribution import attribution
from agentbench.api import evaluate_config as evaluate
from agentbench.llm import LLMClient
from agentbench.llm._litellm import register_provider
from agentbench.pipeline import RunConfig
from agentbench.pipeline.records import RunRecord
from agentbench.pools import load_pool

from .test_pipeline import Copycat

# query: closed_book, rag, oracle, distractor passed; rag top-1 kind; whether that top-1 passes the tests
TABLE = {
    "q1": (1, 0, 1, 0, "own_distractor", False),  # retrieval-induced failure
    "q2": (1, 1, 1, 1, "canonical", True),
    "q3": (0, 1, 1, 0, "canonical", True),  # rescue
    "q4": (0, 0, 1, 0, "own_distractor", False),
    "q5": (1, 0, 1, 0, "canonical", True),  # rag fails with a correct top-1: not retrieval-induced
    "q6": (0, 0, 0, 0, "other_snippet", False),
}
CONDITIONS = ("closed_book", "rag", "oracle", "distractor")


def records(table: dict = TABLE, conditions: tuple[str, ...] = CONDITIONS) -> list[RunRecord]:
    out = []
    for qid, (*passes, kind, top1_passes) in table.items():
        for condition, passed in zip(CONDITIONS, passes, strict=True):
            if condition not in conditions:
                continue
            rec = {"query_id": qid, "condition": condition, "passed": bool(passed)}
            if condition == "rag":
                rec |= {"context_ids": ["c"], "context_kind": kind, "context_passes": top1_passes}
            out.append(RunRecord(**rec))
    return out


def test_counts_rates_and_mcnemar_by_hand() -> None:
    a = attribution(records()).to_json_dict()
    induced, rescues = a["retrieval_induced_failures"], a["retrieval_rescues"]
    assert (induced["n"], induced["count"], induced["rate"]) == (6, 1, 0.1667)
    assert (rescues["count"], rescues["rate"]) == (1, 0.1667)
    # closed_book vs rag: closed_book alone passes q1, q5; rag alone passes q3 -> binomial(1; 3, 1/2) = 1
    assert induced["p_value"] == rescues["p_value"] == 1.0
    net = a["net_effect_of_retrieval"]
    assert (net["baseline_rate"], net["other_rate"], net["difference"]) == (0.5, 0.3333, -0.1667)
    cost, value = a["cost_of_buggy_context"], a["value_of_right_context"]
    assert (cost["difference"], cost["p_value"]) == (-0.3333, 0.5)  # discordant 2:0 -> p = 0.5
    assert (value["difference"], value["p_value"]) == (0.3333, 0.5)
    share = a["retrieval_share_of_oracle_gain"]
    assert (share["rag_gain"], share["oracle_gain"], share["share"]) == (-0.1667, 0.3333, -0.5)
    for stat in (induced, rescues, net, cost, value):
        lo, hi = stat["ci95"]
        point = stat.get("rate", stat.get("difference"))
        assert lo <= point <= hi


def test_decomposition_sums_to_the_rag_pass_rate_and_the_counterfactual_by_hand() -> None:
    dec = attribution(records()).to_json_dict()["decomposition"]
    kinds = dec["by_top1_kind"]
    assert kinds["canonical"] == {"n": 3, "share": 0.5, "pass_rate": 0.6667, "contribution": 0.3333}
    assert kinds["own_distractor"] == {"n": 2, "share": 0.3333, "pass_rate": 0.0, "contribution": 0.0}
    assert kinds["other_snippet"] == {"n": 1, "share": 0.1667, "pass_rate": 0.0, "contribution": 0.0}
    assert dec["rag_pass_rate"] == 0.3333
    assert sum(k["share"] * k["pass_rate"] for k in kinds.values()) == pytest.approx(1 / 3, abs=1e-3)
    cf = dec["counterfactual"]
    # rag where the top-1 is right (q2 1, q3 1, q5 0), oracle elsewhere (q1 1, q4 1, q6 0): 4/6
    assert cf["rag_pass_rate_if_exec@1_were_1"] == 0.6667
    assert (cf["ranking_cost"], cf["context_use_gap"], cf["oracle_pass_rate"]) == (0.3333, 0.1667, 0.8333)


def test_transitions_by_top1_kind() -> None:
    assert attribution(records()).transitions == {
        "pass→pass": {"canonical": 1},
        "pass→fail": {"canonical": 1, "own_distractor": 1},
        "fail→pass": {"canonical": 1},
        "fail→fail": {"other_snippet": 1, "own_distractor": 1},
    }


def test_same_seed_same_intervals_other_seed_may_differ() -> None:
    assert attribution(records(), seed=3) == attribution(records(), seed=3)


def test_no_closed_book_gives_reasons_not_nan() -> None:
    a = attribution(records(conditions=("rag", "oracle"))).to_json_dict()
    for key in ("retrieval_induced_failures", "retrieval_rescues", "net_effect_of_retrieval"):
        assert a[key] == {"n": 0, "reason": "needs the closed_book condition in the run"}
    assert (
        a["cost_of_buggy_context"]["reason"] == "needs the closed_book and distractor conditions in the run"
    )
    assert a["decomposition"]["rag_pass_rate"] == 0.3333  # still defined without closed_book
    assert "NaN" not in json.dumps(a) and "nan" not in json.dumps(a)


def test_all_queries_one_kind_and_no_gain_to_share() -> None:
    table = {q: (1, 1, 1, 0, "canonical", True) for q in ("a", "b", "c")}
    a = attribution(records(table)).to_json_dict()
    assert list(a["decomposition"]["by_top1_kind"]) == ["canonical"]
    assert a["retrieval_induced_failures"]["count"] == 0 and a["retrieval_induced_failures"]["ci95"] == [
        0.0,
        0.0,
    ]
    share = a["retrieval_share_of_oracle_gain"]
    assert share["share"] is None and "no gain" in share["reason"]


def test_a_single_query() -> None:
    a = attribution(records({"q": (1, 0, 1, 0, "own_distractor", False)})).to_json_dict()
    assert a["retrieval_induced_failures"] | {"ci95": None} == {
        "n": 1, "count": 1, "rate": 1.0, "ci95": None, "p_value": 1.0
    }  # fmt: skip
    assert a["retrieval_induced_failures"]["ci95"] == [1.0, 1.0]
    assert "NaN" not in json.dumps(a)


def test_llm_errors_leave_the_query_out_of_its_pairs() -> None:
    recs = records()
    recs[0] = recs[0].model_copy(update={"status": "llm_error"})  # q1 closed_book not scored
    a = attribution(recs).to_json_dict()
    assert a["retrieval_induced_failures"]["n"] == 5 and a["retrieval_induced_failures"]["count"] == 0
    assert a["value_of_right_context"]["n"] == 5


# A scripted provider: closed book writes the canonical for the functions in SOLVES, other conditions copy
# their context (so rag passes exactly when the retrieved top-1 passes).
class Scripted(Copycat):
    def __init__(self, canonicals: dict[str, str], solves: set[str]) -> None:
        super().__init__()
        self.canonicals, self.solves = canonicals, solves

    async def acompletion(self, model, messages, model_response, optional_params, **kw):
        user = messages[-1]["content"]
        if len(re.findall(r"```python\n", user)) == 1:  # closed book: only the signature stub
            name = re.search(r"def (\w+)\(", user).group(1)
            if name in self.solves:
                model_response.choices[0].message.content = "```python\n" + self.canonicals[name] + "```"
                return model_response
        return await super().acompletion(model, messages, model_response, optional_params, **kw)


def test_pipeline_run_attribution_matches_its_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    pool = load_pool("core")
    queries = pool.queries[:6]
    canonicals = {}
    for q in queries:
        code = pool.snippet(q.correct_corpus_ids[0]).code
        canonicals[re.search(r"def (\w+)\(", code).group(1)] = code
    solves = set(list(canonicals)[::2])  # closed book solves queries 0, 2, 4
    register_provider("scripted", Scripted(canonicals, solves))
    config = RunConfig(
        llm="scripted/m", embedder="bm25", limit=6, sandbox="process", run_dir=str(tmp_path / "run"),
        store_dir=str(tmp_path / "stores"),
    )  # fmt: skip
    result = evaluate(config, client=LLMClient("scripted/m"), show_progress=False)
    rag = {r.query_id: r for r in result.records if r.condition == "rag"}
    cb = {r.query_id: r for r in result.records if r.condition == "closed_book"}
    assert sum(r.passed for r in cb.values()) == 3 and all(
        rag[q].passed == rag[q].context_passes for q in rag
    )
    expected_induced = sum(cb[q].passed and not rag[q].passed and rag[q].context_passes is False for q in rag)
    expected_rescues = sum(not cb[q].passed and rag[q].passed for q in rag)
    summary = result.summary.to_json_dict()
    a = summary["attribution"]
    assert a["retrieval_induced_failures"]["count"] == expected_induced
    assert a["retrieval_rescues"]["count"] == expected_rescues
    oracle = a["value_of_right_context"]
    assert (oracle["baseline_rate"], oracle["other_rate"]) == (0.5, 1.0)  # copying the canonical passes
    exec1 = summary["retrieval"]["metrics"]["exec@1"]
    dec = a["decomposition"]
    assert dec["rag_pass_rate"] == pytest.approx(exec1, abs=1e-4)
    assert dec["counterfactual"]["rag_pass_rate_if_exec@1_were_1"] == 1.0  # oracle always passes here
    per_query = {row["query_id"]: row for row in summary["per_query"]}
    assert set(per_query) == {q.query_id for q in queries}
    assert all(per_query[q]["outcomes"]["rag"] == rag[q].passed for q in rag)
    assert "what retrieval did" in (result.run_dir / "report.md").read_text()


# ------------------------------------------------------------------ compare, gate and the HTML report


def write_run(path: Path, table: dict = TABLE, conditions: tuple[str, ...] = CONDITIONS) -> Path:
    """A run directory holding exactly the records of ``table`` (summary recomputed on load)."""
    path.mkdir(parents=True)
    config = RunConfig(conditions=list(conditions), run_dir=str(path))
    (path / "config.json").write_text(config.model_dump_json())
    (path / "records.jsonl").write_text(
        "".join(r.model_dump_json() + "\n" for r in records(table, conditions))
    )
    return path


FIXED = TABLE | {"q1": (1, 1, 1, 0, "canonical", True)}  # a better retriever: q1's top-1 is now right


def test_compare_pairs_retrieval_induced_failures(tmp_path: Path) -> None:
    from agentbench.analysis.compare import compare_sources, load_sources

    rows = compare_sources(load_sources([write_run(tmp_path / "a"), write_run(tmp_path / "b", FIXED)]))
    by_metric = {r.metric: r for r in rows}
    induced = by_metric["retrieval_induced_failures"]
    assert (induced.n, induced.baseline_rate, induced.other_rate) == (6, 1 / 6, 0.0)
    assert (induced.baseline_only, induced.other_only, induced.p_value) == (1, 0, 1.0)
    assert induced.difference == pytest.approx(-1 / 6)
    assert by_metric["retrieval_rescues"].difference == 0.0


def test_gate_on_retrieval_induced_failures(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from .test_report import cli

    run, better = write_run(tmp_path / "run"), write_run(tmp_path / "better", FIXED)
    code, _, err = cli(capsys, "check", str(run), "--fail-over", "retrieval_induced_failures=0.1")
    assert code == 1 and "retrieval_induced_failures = 0.167 is above the --fail-over threshold 0.1" in err
    code, _, err = cli(capsys, "check", str(run), "--fail-over", "retrieval_induced_failures=0.2")
    assert code == 0, err
    code, _, err = cli(
        capsys, "check", str(run), "--baseline", str(better), "--max-drop", "retrieval_induced_failures=0.1"
    )
    assert code == 1 and "retrieval_induced_failures rose by 0.167 (0.000 in the baseline -> 0.167)" in err
    code, _, err = cli(capsys, "check", str(run), "--fail-under", "retrieval_rescues=0.1")
    assert code == 0, err
    no_cb = write_run(tmp_path / "no_cb", conditions=("rag", "oracle"))
    code, _, err = cli(capsys, "check", str(no_cb), "--fail-over", "retrieval_induced_failures=0.1")
    assert code == 2 and err.strip().splitlines() == [
        "agentbench: error: retrieval_induced_failures: needs the closed_book condition in the run"
    ]


def test_html_transition_view_links_every_query_to_the_browser(tmp_path: Path) -> None:
    from agentbench.analysis.compare import load_run
    from agentbench.analysis.html import render_html

    page = render_html(load_run(write_run(tmp_path / "run")))
    section = page.split('id="attribution"', 1)[1].split("<h2", 1)[0]
    for qid, (*_, kind, _) in TABLE.items():
        assert f'class="chip k-{kind}" href="#q-{qid}"' in section
        assert f'id="q-{qid}"' in page  # the link target in the per-query browser
    assert "retrieval-induced failures" in section and "1/6 = 0.167" in section
    grid = section.split('class="transitions"', 1)[1]
    pass_fail = grid.split("<tr>")[2].split("</td>")[2]  # closed_book passes, rag fails
    assert "<b>2</b>" in pass_fail and "#q-q1" in pass_fail and "#q-q5" in pass_fail


def test_old_summaries_are_recomputed_with_attribution(tmp_path: Path) -> None:
    from agentbench.analysis.compare import load_run

    run = write_run(tmp_path / "run")
    (run / "summary.json").write_text(json.dumps({"schema_version": 1, "llm": {"calls": 7, "cache_hits": 2}}))
    summary = load_run(run).summary
    assert summary.attribution.retrieval_induced_failures.count == 1
    assert (summary.llm.calls, summary.llm.cache_hits) == (7, 2)
