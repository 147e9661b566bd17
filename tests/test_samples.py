"""Repeated samples (--samples N): Chen et al.'s pass@k, per-query pass fractions, flaky queries, sample
keys for resume and the LLM cache, N = 1 unchanged, and bad input.

The scripted provider answers by the seed it is sent (the run's seed plus the sample index): an even
seed copies the oracle's canonical snippet (passes), an odd one returns a stub (fails); closed book always
gets the stub. So with 3 samples each oracle query passes samples 0 and 2 and fails sample 1.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from agentbench.analysis.compare import paired_stats
from agentbench.analysis.noninferiority import METHOD, MarginSpec, paired_gate
from agentbench.analysis.passk import FRACTION_METHOD, paired_fraction_interval, pass_at_k
from agentbench.api import evaluate_config as evaluate
from agentbench.errors import ConfigError
from agentbench.llm import LLMClient
from agentbench.llm._litellm import litellm_module, register_provider
from agentbench.pipeline import RunConfig

from .test_report import cli

# ------------------------------------------------------------------------------------------ pass@k


def test_pass_at_k_small_cases() -> None:
    assert pass_at_k(3, 0, 3) == 0.0  # c = 0: no draw passes, also at n = k
    assert pass_at_k(5, 0, 1) == 0.0
    assert pass_at_k(3, 3, 1) == 1.0  # c = n
    assert pass_at_k(3, 1, 3) == 1.0  # n = k: the one draw of all samples holds the passing one
    assert pass_at_k(4, 2, 4) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)  # pass@1 is c / n
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2), by hand
    assert pass_at_k(3, 2, 2) == 1.0  # n - c = 1 < k
    assert pass_at_k(6, 1, 3) == pytest.approx(1 - 10 / 20)  # 1 - C(5,3)/C(6,3)
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1 - math.comb(n - c, k) / math.comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12), (n, c, k)
    for bad in ((3, 4, 1), (3, 1, 4), (3, 1, 0), (3, -1, 1)):
        with pytest.raises(ValueError):
            pass_at_k(*bad)


def test_fraction_interval_by_hand() -> None:
    # differences 1, 0, 0, 1: mean 0.5, sd sqrt(1/3), se 0.288675, t(0.975, 3) = 3.182446
    diff, lo, hi = paired_fraction_interval([1.0, 0.0, 0.0, 1.0])
    assert diff == 0.5
    assert lo == pytest.approx(0.5 - 3.182446 * 0.288675, abs=1e-5)
    assert hi == 1.0  # clipped
    assert paired_fraction_interval([0.25, 0.25]) == (0.25, 0.25, 0.25)
    assert paired_fraction_interval([0.5]) == (0.5, -1.0, 1.0)


def test_gates_and_compare_pair_fractions() -> None:
    spec = MarginSpec("rag.pass", 0.2, "non_inferior")
    run = {"a": 2 / 3, "b": 1.0, "c": 1 / 3, "d": 0.0}
    base = {"a": 1 / 3, "b": 1.0, "c": 1 / 3, "d": 1 / 3}
    result = paired_gate(spec, run, base)
    assert result.method == FRACTION_METHOD
    assert (result.n, result.b, result.c) == (4, 1, 1)
    assert result.diff == pytest.approx(0.0)
    # 0/1 outcomes keep the closed-form Newcombe interval
    assert paired_gate(spec, {"a": 1, "b": 0}, {"a": 1, "b": 1}).method == METHOD
    stats = paired_stats([1 / 3, 1.0, 0.0], [2 / 3, 1.0, 0.0])
    assert stats["difference"] == pytest.approx(1 / 9)
    assert (stats["baseline_only"], stats["other_only"]) == (0, 1)


# ------------------------------------------------------------------------------------ scripted runs


class Calls:
    n = 0


def _provider(calls: type[Calls]) -> None:
    litellm = litellm_module()

    class BySeed(litellm.CustomLLM):
        async def acompletion(self, model, messages, model_response, optional_params, **_):
            calls.n += 1
            blocks = re.findall(r"```python\n(.*?)```", messages[-1]["content"], re.S)
            copy = len(blocks) > 1 and optional_params.get("seed", 0) % 2 == 0
            text = blocks[0] if copy else blocks[-1].rstrip() + "\n    return None\n"
            model_response.choices[0].message.content = "```python\n" + text + "```"
            model_response.usage = litellm.Usage(prompt_tokens=7, completion_tokens=3, total_tokens=10)
            return model_response

    register_provider("byseed", BySeed())


def _run(tmp: Path, name: str, cache: str = "cache", **kw):
    config = RunConfig(
        llm="byseed/m",
        embedder="bm25",
        limit=3,
        sandbox="process",
        conditions=["closed_book", "oracle"],
        run_dir=str(tmp / name),
        concurrency=2,
        store_dir=str(tmp / "stores"),
        **kw,
    )
    return evaluate(
        config, client=LLMClient("byseed/m", concurrency=2, cache=tmp / cache), show_progress=False
    )


_TIMINGS = {"cached", "llm_seconds", "exec_seconds", "seconds"}


def _records(run_dir: Path) -> list[dict]:
    lines = (run_dir / "records.jsonl").read_text().splitlines()
    records = [{k: v for k, v in json.loads(line).items() if k not in _TIMINGS} for line in lines]
    return sorted(
        records, key=lambda r: (r["condition"], r["query_id"], r.get("sample", -1))
    )  # file: as done


def test_three_samples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "exec-cache"))
    calls = Calls()
    _provider(calls)
    result = _run(tmp_path, "a", samples=3, temperature=0.7)
    records = result.records
    keys = [r.key for r in records]
    assert len(keys) == len(set(keys)) == 3 * 2 * 3  # one record per (query, condition, sample)
    assert {r.sample for r in records} == {0, 1, 2}
    assert calls.n == 18
    for r in records:
        assert r.passed == (r.condition == "oracle" and r.sample != 1), r.key
    s = result.summary.samples
    assert s is not None and s.samples == 3
    assert s.conditions["oracle"].pass_at_k == {"pass@1": 0.6667, "pass@2": 1.0, "pass@3": 1.0}
    assert s.conditions["closed_book"].pass_at_k == {"pass@1": 0.0, "pass@2": 0.0, "pass@3": 0.0}
    assert s.conditions["oracle"].flaky == 3 and s.conditions["closed_book"].flaky == 0
    assert [(p.condition, p.passed, p.n) for p in s.flaky] == [("oracle", 2, 3)] * 3
    assert len(s.per_query) == 6 and {p.fraction for p in s.per_query} == {0.0, 0.6667}
    # attribution pairs per-query pass fractions: oracle 2/3 against closed_book 0 on every query
    value = result.summary.attribution.value_of_right_context
    assert value.difference == pytest.approx(0.6667) and value.other_rate == pytest.approx(0.6667)
    assert [q.outcomes["oracle"] for q in result.summary.per_query] == [pytest.approx(2 / 3)] * 3
    written = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert written["samples"]["conditions"]["oracle"]["pass_at_k"]["pass@2"] == 1.0
    assert json.loads((tmp_path / "a" / "config.json").read_text())["samples"] == 3

    # the same configuration in a new run directory: every answer from the LLM cache
    again = _run(tmp_path, "b", samples=3, temperature=0.7)
    assert calls.n == 18 and again.llm_stats["calls"] == 0
    assert _records(tmp_path / "b") == _records(tmp_path / "a")
    # resume keys on the sample: a run that lost its last 8 records redoes exactly those (a cold cache)
    path = tmp_path / "a" / "records.jsonl"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:10]))
    resumed = _run(tmp_path, "a", cache="cold", samples=3, temperature=0.7, resume=True)
    assert calls.n == 26 and len(resumed.records) == 18
    assert sorted(map(str, (r.key for r in resumed.records))) == sorted(map(str, keys))
    _run(tmp_path, "a", cache="cold", samples=3, temperature=0.7, resume=True)
    assert calls.n == 26  # nothing left to do
    with pytest.raises(ConfigError, match="samples"):  # another --samples is another run
        _run(tmp_path, "a", samples=2, temperature=0.7, resume=True)


def test_one_sample_is_no_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "exec-cache"))
    calls = Calls()
    _provider(calls)
    plain = _run(tmp_path, "plain")
    one = _run(tmp_path, "one", cache="other", samples=1)
    assert calls.n == 2 * 6  # the same requests, each made once per cache
    assert _records(tmp_path / "one") == _records(tmp_path / "plain")
    assert all("sample" not in r for r in _records(tmp_path / "one"))
    assert [r.passed for r in plain.records] == [False] * 3 + [True] * 3  # seed 0: oracle copies
    config = json.loads((tmp_path / "one" / "config.json").read_text())
    assert "samples" not in config and config == {
        **json.loads((tmp_path / "plain" / "config.json").read_text()),
        "run_dir": config["run_dir"],
    }
    summary = json.loads((tmp_path / "one" / "summary.json").read_text())
    assert "samples" not in summary and plain.summary.samples is None and one.summary.samples is None


def test_bad_input_and_greedy_warning(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    _provider(Calls())
    common = [
        "run", "--llm", "byseed/m", "--embedder", "bm25", "--sandbox", "process", "--limit", "1",
        "--conditions", "oracle", "--store-dir", str(tmp_path / "stores"),
    ]  # fmt: skip
    for bad in ("0", "-2"):
        code, _, err = cli(capsys, *common, "--run-dir", str(tmp_path / "never"), "--samples", bad)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert "--samples must be at least 1" in err and f"got {bad}" in err
    assert not (tmp_path / "never").exists()
    code, out, err = cli(capsys, *common, "--run-dir", str(tmp_path / "greedy"), "--samples", "2")
    assert code == 0, err
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert warnings == [
        "agentbench: warning: --samples 2 at temperature 0 decodes greedily, so the samples will be "
        "identical; set --temperature above 0 for pass@k"
    ]
    assert "pass@2" in out and "flaky" in out
    code, out, err = cli(
        capsys, *common, "--run-dir", str(tmp_path / "warm"), "--samples", "2", "--temperature", "0.8"
    )
    assert code == 0 and "warning" not in err, err
    code, out, err = cli(capsys, *common, "--run-dir", str(tmp_path / "single"))
    assert code == 0 and "pass@" not in out, out
