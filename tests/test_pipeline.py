"""The end-to-end run with a scripted LLM: propagation numbers, cache reuse, resume after a kill, errors.

The scripted provider copies the first context snippet it is shown (closed book: an empty stub), so the
expected outcomes are known exactly: the oracle passes, a distractor's bug is inherited, and rag passes
exactly when the retriever's top-1 passes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agentbench.api import evaluate_config as evaluate
from agentbench.errors import ConfigError
from agentbench.llm import LLMClient
from agentbench.llm._litellm import litellm_module, register_provider
from agentbench.pipeline import RunConfig

from .conftest import ROOT, run_cli

PROVIDER = '''
import asyncio, re
from agentbench.llm._litellm import litellm_module, register_provider
litellm = litellm_module()

class Copycat(litellm.CustomLLM):
    """Replies with the first python block of the prompt; closed book gets a stub."""
    def __init__(self, delay=0.0):
        super().__init__()
        self.delay = delay
        self.calls = 0

    async def acompletion(self, model, messages, model_response, optional_params, **_):
        self.calls += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        user = messages[-1]["content"]
        blocks = re.findall(r"```python\\n(.*?)```", user, re.S)
        text = blocks[0] if len(blocks) > 1 else blocks[0].rstrip() + "\\n    return None\\n"
        model_response.choices[0].message.content = "```python\\n" + text + "```"
        model_response.usage = litellm.Usage(prompt_tokens=11, completion_tokens=5, total_tokens=16)
        return model_response
'''
namespace: dict = {}
exec(PROVIDER, namespace)
Copycat = namespace["Copycat"]


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "cache"))


def _config(tmp_path: Path, name: str, **kw) -> RunConfig:
    base = dict(
        llm="copycat/m",
        embedder="bm25",
        limit=6,
        sandbox="process",
        run_dir=str(tmp_path / name),
        concurrency=2,
        store_dir=str(tmp_path / "stores"),
    )
    base.update(kw)
    return RunConfig(**base)


def _client(model: str = "copycat/m", delay: float = 0.0) -> tuple[LLMClient, object]:
    handler = Copycat(delay)
    register_provider("copycat", handler)
    return LLMClient(model, concurrency=2), handler


def _stable(records) -> list[dict]:
    drop = {"cached", "llm_seconds", "exec_seconds", "seconds"}
    return [{k: v for k, v in r.model_dump().items() if k not in drop} for r in records]


def test_run_writes_directory_and_exact_propagation(tmp_path: Path) -> None:
    client, _ = _client()
    result = evaluate(_config(tmp_path, "run"), client=client, show_progress=False)
    run_dir = tmp_path / "run"
    for name in ("config.json", "retrieval.json", "records.jsonl", "summary.json", "report.md"):
        assert (run_dir / name).exists(), name
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["conditions"]["oracle"]["pass_rate"] == 1.0
    assert s["conditions"]["distractor"]["pass_rate"] == 0.0
    assert s["conditions"]["closed_book"]["pass_rate"] == 0.0
    assert (
        s["conditions"]["rag"]["n"] == 6
        and s["conditions"]["rag"]["ci95"][0] <= s["conditions"]["rag"]["ci95"][1]
    )
    # copying a distractor reproduces its per-assert outcomes and its mutated line
    assert s["propagation"]["bug_inheritance_rate"] == 1.0
    assert s["propagation"]["mutated_line_rate"] == 1.0
    assert s["propagation"]["repair_rate"] == 0.0
    # rag passes exactly when the retriever's top-1 passes: pass rate == exec@1
    assert s["conditions"]["rag"]["pass_rate"] == pytest.approx(s["retrieval"]["metrics"]["exec@1"])
    by_top1 = s["propagation"]["rag_pass_by_top1"]
    assert by_top1["canonical"]["pass_rate"] in (None, 1.0)
    assert by_top1["own_distractor"]["pass_rate"] in (None, 0.0)
    # identical prompts (e.g. rag whose top-1 is the canonical, and oracle) are answered from the cache
    assert s["llm"]["calls"] + s["llm"]["cache_hits"] == 24 and s["llm"]["prompt_tokens"] == 24 * 11
    lines = (run_dir / "records.jsonl").read_text().splitlines()
    assert len(lines) == 24 == len(result.records)
    rec = json.loads(lines[0])
    assert {"messages", "response", "code", "results", "prompt_tokens", "cost_usd"} <= set(rec)


def test_rerun_of_same_config_makes_zero_llm_calls(tmp_path: Path) -> None:
    client, handler = _client()
    evaluate(_config(tmp_path, "first"), client=client, show_progress=False)
    first_calls = handler.calls
    client2, handler2 = _client()
    again = evaluate(_config(tmp_path, "second"), client=client2, show_progress=False)
    assert 0 < first_calls <= 24
    assert handler2.calls == 0
    assert again.summary.llm.calls == 0 and again.summary.llm.cache_hits == 24


def test_same_config_and_seed_is_deterministic(tmp_path: Path) -> None:
    a = evaluate(_config(tmp_path, "a"), client=_client()[0], show_progress=False)
    b = evaluate(_config(tmp_path, "b"), client=_client()[0], show_progress=False)
    assert _stable(a.records) == _stable(b.records)
    assert a.summary.conditions == b.summary.conditions


def test_conditions_subset_and_k(tmp_path: Path) -> None:
    cfg = _config(tmp_path, "sub", conditions=["rag"], k=3)
    result = evaluate(cfg, client=_client()[0], show_progress=False)
    assert {r.condition for r in result.records} == {"rag"}
    assert all(len(r.context_ids) == 3 for r in result.records)


def test_resume_after_kill_gives_same_records(tmp_path: Path) -> None:
    cache = tmp_path / "killcache"
    driver = tmp_path / "driver.py"
    driver.write_text(
        PROVIDER
        + textwrap.dedent(
            f"""
            import sys
            from agentbench.llm import LLMClient
            from agentbench.api import evaluate_config as evaluate
            from agentbench.pipeline import RunConfig
            register_provider("copycat", Copycat(delay=float(sys.argv[2])))
            cfg = RunConfig(llm="copycat/m", embedder="bm25", limit=6, sandbox="process", concurrency=1,
                            run_dir=sys.argv[1], resume=True, store_dir={str(tmp_path / "stores")!r})
            evaluate(cfg, client=LLMClient("copycat/m", concurrency=1), show_progress=False)
            """
        )
    )
    env = {**os.environ, "AGENTBENCH_CACHE_DIR": str(cache)}
    killed_dir = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, str(driver), str(killed_dir), "0.4"], env=env, cwd=ROOT)
    records = killed_dir / "records.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline:
        if records.exists() and len(records.read_text().splitlines()) >= 5:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = len(records.read_text().splitlines())
    assert 5 <= partial < 24, "the run must be killed mid-way"
    with open(records, "ab") as fh:
        fh.write(b'{"query_id": "q_00')  # a torn final line, as if killed mid-write
    subprocess.run([sys.executable, str(driver), str(killed_dir), "0"], env=env, cwd=ROOT, check=True)
    subprocess.run([sys.executable, str(driver), str(tmp_path / "clean"), "0"], env=env, cwd=ROOT, check=True)

    def load(d: Path) -> list[dict]:
        rows = [json.loads(line) for line in (d / "records.jsonl").read_text().splitlines()]
        drop = {"cached", "llm_seconds", "exec_seconds", "seconds"}
        return sorted(
            ({k: v for k, v in r.items() if k not in drop} for r in rows),
            key=lambda r: (r["condition"], r["query_id"]),
        )

    resumed, clean = load(killed_dir), load(tmp_path / "clean")
    assert len(resumed) == 24, "no duplicates and nothing missing"
    assert resumed == clean


def test_resume_with_different_settings_is_refused(tmp_path: Path) -> None:
    evaluate(_config(tmp_path, "r", conditions=["oracle"]), client=_client()[0], show_progress=False)
    with pytest.raises(ConfigError, match="different settings"):
        evaluate(_config(tmp_path, "r", conditions=["oracle"], seed=5, resume=True), client=_client()[0])
    with pytest.raises(ConfigError, match="already holds a run"):
        evaluate(_config(tmp_path, "r", conditions=["oracle"]), client=_client()[0])


def test_llm_errors_are_recorded_not_counted_as_failures(tmp_path: Path) -> None:
    litellm = litellm_module()

    class Broken(litellm.CustomLLM):
        async def acompletion(self, *a, **k):
            raise litellm.InternalServerError("boom", llm_provider="broken", model="m")

    register_provider("broken", Broken())
    client = LLMClient("broken/m", max_retries=0, backoff_s=0.0, cache=False)
    result = evaluate(
        _config(tmp_path, "err", llm="broken/m", conditions=["oracle"]), client=client, show_progress=False
    )
    oracle = result.summary.conditions["oracle"]
    assert oracle.llm_errors == 6 and oracle.n == 0 and oracle.pass_rate is None
    assert all(r.status == "llm_error" for r in result.records)


def test_missing_api_key_fails_fast_with_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["OPENAI_API_KEY"] = ""
    started = time.time()
    res = subprocess.run(
        [sys.executable, "-m", "agentbench", "run", "--llm", "gpt-4o", "--run-dir", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    assert res.returncode == 2
    assert "OPENAI_API_KEY" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert time.time() - started < 30  # includes interpreter start-up; the check itself is instant
    assert not (tmp_path / "x").exists(), "nothing is written before the key check"


def test_bad_condition_is_usage_error() -> None:
    res = run_cli("run", "--conditions", "rag,telepathy", "--limit", "1")
    assert res.returncode == 2 and "telepathy" in res.stderr and "Traceback" not in res.stderr


def test_secrets_do_not_reach_run_artifacts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-" + "9" * 24
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("AGENTBENCH_SECRET_PROBE", secret)
    evaluate(_config(tmp_path, "sec", conditions=["oracle"]), client=_client()[0], show_progress=False)
    for path in (tmp_path / "sec").iterdir():
        assert secret not in path.read_text(), path.name
    assert not re.search(r"sk-test-9+", "".join(p.read_text() for p in (tmp_path / "sec").iterdir()))


def test_while_waiting_is_called_once_when_the_first_record_is_on_disk(tmp_path: Path) -> None:
    from agentbench.pipeline import run_pipeline

    client, handler = _client()
    run_dir = tmp_path / "waiting"
    lines_then: list[int] = []

    def while_waiting() -> None:
        lines_then.append(len((run_dir / "records.jsonl").read_text().splitlines()))

    config = _config(tmp_path, "waiting", conditions=["oracle", "closed_book"])
    result = run_pipeline(config, client=client, show_progress=False, while_waiting=while_waiting)
    assert len(result.records) == 12 and handler.calls == 12
    assert len(lines_then) == 1 and lines_then[0] >= 1


def test_the_analysis_imports_can_be_made_in_the_background() -> None:
    """What evaluate_config hands the run as ``while_waiting``: the summary's modules (scipy.stats among
    them) are imported off the run's thread; importing the helper itself loads none of them."""
    code = (
        "import sys\n"
        "from agentbench.analysis.warm import ANALYSIS_MODULES, import_in_background\n"
        "before = [m for m in (*ANALYSIS_MODULES, 'scipy.stats') if m in sys.modules]\n"
        "thread = import_in_background()\n"
        "thread.join()\n"
        "print(before, thread.name != 'MainThread', all(m in sys.modules for m in ANALYSIS_MODULES),"
        " 'scipy.stats' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[]", "True", "True", "True"]
