"""Matrix runs: 2 scripted LLMs x 2 real embedders (minilm, bm25) on eight core queries.

The two providers behave differently: ``copycat`` copies the first context snippet it is shown (so its rag
pass is exactly the retriever's exec@1), ``picky`` does the same only for prompts whose sha256 starts with
an even byte and otherwise answers a stub. The leaderboard's numbers are checked against values computed
here by hand from the run records; the sharing (one retrieval stage and one embedding per embedder, one
execution per distinct (code, asserts) pair) by counting calls on the real embedder and executor.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import agentbench
from agentbench.analysis.compare import paired_stats
from agentbench.analysis.leaderboard import Leaderboard
from agentbench.api import evaluate_config
from agentbench.errors import ConfigError
from agentbench.execution.process import ProcessExecutor
from agentbench.llm._litellm import register_provider
from agentbench.pipeline import RunConfig
from agentbench.pipeline import evaluate as pipeline_evaluate
from agentbench.retrieval.embedders import SentenceTransformerEmbedder

from .conftest import ROOT, core_subset, run_cli
from .test_pipeline import PROVIDER
from .test_pipeline_local import MODEL as LOCAL_MODEL
from .test_pipeline_local import _sandbox as local_sandbox
from .test_pipeline_local import weights  # noqa: F401 - the verified GGUF fixture

PICKY = '''
import hashlib

class Picky(Copycat):
    """Copies the context only for prompts whose hash starts with an even byte; a stub otherwise."""
    async def acompletion(self, model, messages, model_response, optional_params, **kw):
        user = messages[-1]["content"]
        if hashlib.sha256(user.encode()).digest()[0] % 2 == 0:
            return await super().acompletion(model, messages, model_response, optional_params, **kw)
        self.calls += 1
        name = re.search(r"def (\\w+)", user).group(1)
        model_response.choices[0].message.content = f"```python\\ndef {name}(*a, **k):\\n    return None\\n```"
        model_response.usage = litellm.Usage(prompt_tokens=11, completion_tokens=5, total_tokens=16)
        return model_response
'''
namespace: dict = {}
exec(PROVIDER + PICKY, namespace)
Copycat, Picky = namespace["Copycat"], namespace["Picky"]

N_QUERIES = 8
LLMS = ["copycat/a", "picky/b"]
EMBEDDERS = ["minilm", "bm25"]
NAMES = ["copycat-a__minilm", "copycat-a__bm25", "picky-b__minilm", "picky-b__bm25"]
CONDITIONS = ("closed_book", "rag", "oracle", "distractor")


def _settings(tmp: Path) -> dict:
    return dict(sandbox="process", concurrency=2, store_dir=str(tmp / "stores"), seed=0)


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory):
    """The 2 x 2 matrix, run once with call counting on the real embedder, executor and retrieval stage."""
    tmp = tmp_path_factory.mktemp("matrix")
    # every 101st query spans the domains; the first 8 are all bit_manipulation, where MiniLM and BM25 both
    # rank a distractor first for every query (core v4), and the paired checks need them to disagree
    pool = core_subset(N_QUERIES, tmp / "pool", step=101)
    counts = {"retrievals": [], "encoded": 0, "jobs": []}
    real_retrieval, real_encode, real_run = (
        pipeline_evaluate.evaluate_retrieval,
        SentenceTransformerEmbedder._encode,
        ProcessExecutor.run,
    )

    def retrieval(pool, embedder, *a, **k):
        counts["retrievals"].append(k.get("retriever_name") or getattr(embedder, "name", str(embedder)))
        return real_retrieval(pool, embedder, *a, **k)

    def encode(self, texts, kind):
        counts["encoded"] += len(texts)
        return real_encode(self, texts, kind)

    def run(self, jobs, progress=None):
        counts["jobs"] += [j.key for j in jobs]
        return real_run(self, jobs, progress)

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AGENTBENCH_CACHE_DIR", str(tmp / "cache"))
        mp.setattr(pipeline_evaluate, "evaluate_retrieval", retrieval)
        mp.setattr(SentenceTransformerEmbedder, "_encode", encode)
        mp.setattr(ProcessExecutor, "run", run)
        register_provider("copycat", Copycat())
        register_provider("picky", Picky())
        result = agentbench.evaluate_matrix(
            str(pool), llms=LLMS, embedders=EMBEDDERS, run_dir=tmp / "m", limit=N_QUERIES, **_settings(tmp)
        )
        # the same settings as one ordinary run: its records must equal the matrix's combination
        single = evaluate_config(
            RunConfig(
                pool=str(pool),
                llm="picky/b",
                embedder="bm25",
                limit=N_QUERIES,
                run_dir=str(tmp / "single"),
                **_settings(tmp),
            ),
            show_progress=False,
        )
    return tmp, pool, result, counts, single


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]


def _stable(rows: list[dict]) -> list[dict]:
    drop = {"cached", "llm_seconds", "exec_seconds", "seconds"}
    return sorted(
        ({k: v for k, v in r.items() if k not in drop} for r in rows),
        key=lambda r: (r["condition"], r["query_id"]),
    )


def _wilson(k: int, n: int) -> tuple[float, float]:
    z = 1.959963984540054
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def _mcnemar(b: int, c: int) -> float:
    """Exact two-sided McNemar: the binomial tail of the smaller discordant count at 1/2, doubled."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


def test_one_run_directory_per_combination_and_leaderboard_files(matrix) -> None:
    tmp, _, result, _, _ = matrix
    m = tmp / "m"
    assert [c.name for c in result.combinations] == NAMES
    for name in NAMES:
        for f in ("config.json", "retrieval.json", "records.jsonl", "summary.json", "report.md"):
            assert (m / name / f).exists(), (name, f)
        assert len(_records(m / name)) == N_QUERIES * len(CONDITIONS)
    manifest = json.loads((m / "matrix.json").read_text())
    assert [(c["agent"], c["retriever"]) for c in manifest["combinations"]] == [
        (a, e) for a in LLMS for e in EMBEDDERS
    ]
    board = json.loads((m / "leaderboard.json").read_text())
    assert board["baseline"]["name"] == NAMES[0] and board["primary_metric"] == "rag.pass"
    assert sorted(r["rank"] for r in board["rows"]) == [1, 2, 3, 4]
    assert Leaderboard.model_validate(board).to_json_dict() == board  # docs/schema/leaderboard.schema.json
    html = (m / "leaderboard.html").read_text()
    assert "picky/b" in html and "Content-Security-Policy" in html and "<script" not in html


def test_leaderboard_numbers_match_the_records(matrix) -> None:
    tmp, _, result, _, _ = matrix
    m = tmp / "m"
    board = json.loads((m / "leaderboard.json").read_text())
    rows = {r["name"]: r for r in board["rows"]}
    by_name = {name: _records(m / name) for name in NAMES}

    def rag(name: str) -> dict[str, int]:
        return {r["query_id"]: int(r["passed"]) for r in by_name[name] if r["condition"] == "rag"}

    for name in NAMES:
        for cond in CONDITIONS:
            outcomes = [r["passed"] for r in by_name[name] if r["condition"] == cond]
            k, n = sum(outcomes), len(outcomes)
            stats = rows[name]["conditions"][cond]
            assert (stats["n"], stats["passed"]) == (n, k)
            assert stats["pass_rate"] == pytest.approx(k / n, abs=1e-4)
            assert stats["ci95"] == pytest.approx(_wilson(k, n), abs=1e-4)
    # copycat copies its context: its rag pass rate is its retriever's exec@1
    for name in NAMES[:2]:
        assert rows[name]["conditions"]["rag"]["pass_rate"] == pytest.approx(
            rows[name]["retrieval"]["metrics"]["exec@1"], abs=1e-4
        )
    # paired tests against the baseline, from the per-query outcomes
    base = rag(NAMES[0])
    assert rows[NAMES[0]]["vs_baseline"] is None
    discordant_somewhere = False
    for name in NAMES[1:]:
        other = rag(name)
        shared = sorted(base)
        b = sum(base[q] and not other[q] for q in shared)
        c = sum(other[q] and not base[q] for q in shared)
        discordant_somewhere |= b + c > 0
        d = rows[name]["vs_baseline"]["rag.pass"]
        assert (d["n"], d["baseline_only"], d["other_only"]) == (len(shared), b, c)
        assert d["difference"] == pytest.approx((sum(other.values()) - sum(base.values())) / len(shared))
        assert d["p_value"] == pytest.approx(_mcnemar(b, c))
        lo, hi = d["ci95"]
        assert -1 <= lo <= d["difference"] <= hi <= 1
        expect = paired_stats([base[q] for q in shared], [other[q] for q in shared], seed=0)
        assert d["ci95"] == pytest.approx(expect["ci95"])
        assert {"exec@1", "closed_book.pass", "oracle.pass"} <= set(rows[name]["vs_baseline"])
    assert discordant_somewhere, "the two providers must disagree somewhere, or the test proves little"
    # picky answers a stub to some prompts: it never beats copycat with the same retriever
    assert rows["picky-b__minilm"]["conditions"]["oracle"]["pass_rate"] < 1.0
    assert result.leaderboard.row(1).name == NAMES[0]


def test_combinations_share_retrieval_embeddings_and_executions(matrix) -> None:
    tmp, pool, result, counts, single = matrix
    # one retrieval stage per embedder (the picky runs reuse the copycat runs'); the single run, with the
    # same pool, embedder and settings, reads the bm25 stage back from the retrieval cache
    assert counts["retrievals"] == ["minilm", "bm25"]
    assert single.retrieval.run_info.store == "cached"
    assert result.runs[2].retrieval is result.runs[0].retrieval
    # each text embedded once: the corpus and the queries, no more
    loaded = agentbench.load_pool(str(pool))
    assert counts["encoded"] == len(loaded.corpus) + N_QUERIES
    # each distinct (code, asserts, setup) executed once across all four runs and the single run
    assert counts["jobs"] and len(counts["jobs"]) == len(set(counts["jobs"]))
    # same records as an ordinary run with the same settings (whose executions were all cache hits)
    assert _stable(_records(tmp / "m" / "picky-b__bm25")) == _stable(_records(tmp / "single"))
    assert single.summary.llm.calls == 0


def test_cli_matrix_resume_of_a_complete_matrix_runs_nothing_and_takes_a_new_baseline(matrix) -> None:
    from agentbench.cli import app

    tmp, pool, _, _, _ = matrix
    m = tmp / "m"
    before = {n: (m / n / "summary.json").read_text() for n in NAMES}
    handler = Copycat()
    register_provider("copycat", handler)
    register_provider("picky", Picky())
    args = [
        "run",
        "--pool",
        str(pool),
        "--limit",
        str(N_QUERIES),
        "--sandbox",
        "process",
        "--concurrency",
        "2",
    ]
    args += [
        "--store-dir",
        str(tmp / "stores"),
        "--run-dir",
        str(m),
        "--resume",
        "--baseline",
        "picky/b,bm25",
    ]
    for llm in LLMS:
        args += ["--llm", llm]
    for e in EMBEDDERS:
        args += ["--embedder", e]
    res = CliRunner().invoke(app, [*args, "--json"], env={"AGENTBENCH_CACHE_DIR": str(tmp / "cache")})
    assert res.exit_code == 0, res.output
    board = json.loads(res.stdout)
    assert board["baseline"]["index"] == 4 and board["rows"][0]["rank"] == 1
    assert handler.calls == 0
    assert {n: (m / n / "summary.json").read_text() for n in NAMES} == before
    assert json.loads((m / "leaderboard.json").read_text())["baseline"]["name"] == "picky-b__bm25"
    res = CliRunner().invoke(app, args, env={"AGENTBENCH_CACHE_DIR": str(tmp / "cache"), "COLUMNS": "200"})
    assert res.exit_code == 0 and "leaderboard on" in res.stdout and "matrix directory:" in res.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--llm", "a/x", "--llm", "a/x", "--embedder", "bm25"], "--llm a/x is given twice"),
        (["--llm", "a/x", "--llm", "b/y", "--baseline", "c/z"], "unknown --baseline 'c/z'"),
        (["--llm", "a/x", "--llm", "b/y", "--baseline", "3"], "out of range"),
        (
            [
                "--llm",
                "a/x",
                "--llm",
                "b/y",
                "--embedder",
                "bm25",
                "--embedder",
                "minilm",
                "--baseline",
                "a/x",
            ],
            "matches 2 combinations",
        ),
        (["--llm", "a/x", "--llm", "b/y", "--fail-under", "rag=0.5"], "gate a single run"),
        (["--llm", "a/x", "--baseline", "1"], "--baseline compares the combinations of a matrix"),
    ],
)
def test_bad_matrix_input_is_one_line_and_exit_2(tmp_path: Path, extra: list[str], message: str) -> None:
    res = run_cli("run", "--run-dir", str(tmp_path / "m"), *extra)
    assert res.returncode == 2, res.stderr
    assert message in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "m").exists()


def test_resume_with_a_different_matrix_is_refused(matrix) -> None:
    tmp, pool, _, _, _ = matrix
    m = tmp / "m"
    manifest = (m / "matrix.json").read_text()
    common = [
        "run",
        "--pool",
        str(pool),
        "--limit",
        str(N_QUERIES),
        "--sandbox",
        "process",
        "--run-dir",
        str(m),
    ]
    common += ["--store-dir", str(tmp / "stores"), "--concurrency", "2"]
    cases = [
        (
            ["--resume", "--llm", "copycat/a", "--llm", "picky/b", "--embedder", "bm25"],
            "it has 4 combinations",
        ),
        (
            [
                "--resume",
                "--llm",
                "picky/b",
                "--llm",
                "copycat/a",
                "--embedder",
                "minilm",
                "--embedder",
                "bm25",
            ],
            "combination 1 is copycat/a,minilm there, picky/b,minilm here",
        ),
        (
            [
                "--resume",
                "--seed",
                "5",
                "--llm",
                "copycat/a",
                "--llm",
                "picky/b",
                "--embedder",
                "minilm",
                "--embedder",
                "bm25",
            ],
            "has different settings",
        ),
        (
            ["--llm", "copycat/a", "--llm", "picky/b", "--embedder", "minilm", "--embedder", "bm25"],
            "already holds a matrix: pass --resume",
        ),
    ]
    for extra, message in cases:
        res = run_cli(*common, *extra)
        assert res.returncode == 2, res.stderr
        assert message in res.stderr and "Traceback" not in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
    assert (m / "matrix.json").read_text() == manifest
    with pytest.raises(ConfigError, match="holds a single run, not a matrix"):
        agentbench.evaluate_matrix(str(pool), llms=LLMS, run_dir=tmp / "single", resume=True)
    register_provider("copycat", Copycat())
    with pytest.raises(ConfigError, match="holds a matrix run: continue it with the same repeated"):
        agentbench.evaluate(
            str(pool), llm="copycat/a", embedder="bm25", run_dir=m, resume=True, **_settings(tmp)
        )
    assert sorted(p.name for p in m.iterdir()) == sorted(
        [*NAMES, "leaderboard.html", "leaderboard.json", "matrix.json"]
    )


def test_resume_after_kill_finishes_without_duplicates_or_losses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = core_subset(4, tmp_path / "pool")
    driver = tmp_path / "driver.py"
    driver.write_text(
        PROVIDER
        + PICKY
        + textwrap.dedent(
            f"""
            import sys
            import agentbench
            delay = float(sys.argv[2])
            register_provider("copycat", Copycat(delay))
            register_provider("picky", Picky(delay))
            agentbench.evaluate_matrix({str(pool)!r}, llms=["copycat/a", "picky/b"], embedders=["bm25"],
                                       run_dir=sys.argv[1], resume=True, sandbox="process", concurrency=1,
                                       store_dir={str(tmp_path / "stores")!r})
            """
        )
    )
    env = {**os.environ, "AGENTBENCH_CACHE_DIR": str(tmp_path / "cache")}
    killed = tmp_path / "killed"
    second = killed / "picky-b__bm25" / "records.jsonl"
    proc = subprocess.Popen([sys.executable, str(driver), str(killed), "0.3"], env=env, cwd=ROOT)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if second.exists() and len(second.read_text().splitlines()) >= 3:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first_dir = killed / "copycat-a__bm25"
    assert (first_dir / "summary.json").exists(), "the first combination finished before the kill"
    partial = len(second.read_text().splitlines())
    assert 3 <= partial < 16 and not (killed / "picky-b__bm25" / "summary.json").exists()
    assert not (killed / "leaderboard.json").exists()
    first_summary = (first_dir / "summary.json").read_text()
    with open(second, "ab") as fh:
        fh.write(b'{"query_id": "q_00')  # a torn final line, as if killed mid-write
    subprocess.run([sys.executable, str(driver), str(killed), "0"], env=env, cwd=ROOT, check=True)
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    register_provider("copycat", Copycat())
    register_provider("picky", Picky())
    agentbench.evaluate_matrix(
        str(pool),
        llms=LLMS,
        embedders=["bm25"],
        run_dir=tmp_path / "clean",
        concurrency=1,
        sandbox="process",
        store_dir=str(tmp_path / "stores"),
    )
    assert (first_dir / "summary.json").read_text() == first_summary, "a complete combination is not re-run"
    for name in ("copycat-a__bm25", "picky-b__bm25"):
        resumed, clean = _records(killed / name), _records(tmp_path / "clean" / name)
        assert len(resumed) == 16, "no duplicates and nothing missing"
        assert _stable(resumed) == _stable(clean)
    board = json.loads((killed / "leaderboard.json").read_text())
    assert all(r["complete"] and r["n_records"] == 16 for r in board["rows"])


def test_agent_plugin_objects_form_an_axis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Python API: agent objects (and an LLM) are one axis; each plug-in is recorded by its name."""
    from agentbench import Task

    def copy_context(task: Task) -> str:
        return task.context[0] if task.context else f"{task.signature}\n    return None\n"

    def stub(task: Task) -> str:
        return f"{task.signature}\n    return None\n"

    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    register_provider("copycat", Copycat())
    pool = core_subset(3, tmp_path / "pool")
    result = agentbench.evaluate_matrix(
        str(pool),
        llms=["copycat/a"],
        agents=[copy_context, stub],
        embedders=["bm25"],
        conditions=["oracle"],
        baseline=2,
        run_dir=tmp_path / "m",
        **_settings(tmp_path),
    )
    kinds = [(c.agent.kind, c.config.agent) for c in result.combinations]
    assert kinds[0] == ("llm", None) and [k for k, _ in kinds[1:]] == ["agent", "agent"]
    assert all(name and name.endswith(("copy_context", "stub")) for _, name in kinds[1:])
    board = result.leaderboard
    assert board.baseline["index"] == 2
    assert [board.row(i).conditions["oracle"]["pass_rate"] for i in (1, 2, 3)] == [1.0, 1.0, 0.0]
    vs = board.row(3).vs_baseline["oracle.pass"]
    assert (vs["baseline_only"], vs["other_only"], vs["difference"]) == (3, 0, -1.0)
    assert vs["p_value"] == pytest.approx(_mcnemar(3, 0))  # 0.25: three queries cannot be significant
    summary = json.loads((tmp_path / "m" / result.combinations[2].name / "summary.json").read_text())
    assert summary["run"]["agent"] == kinds[2][1]


def test_a_fatal_model_error_stops_the_matrix_with_a_resume_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentbench.errors import ModelError
    from agentbench.llm._litellm import litellm_module

    litellm = litellm_module()

    class Revoked(litellm.CustomLLM):
        async def acompletion(self, *a, **k):
            raise litellm.AuthenticationError(message="key revoked", llm_provider="revoked", model="b")

    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    register_provider("copycat", Copycat())
    register_provider("revoked", Revoked())
    pool = core_subset(3, tmp_path / "pool")
    m = tmp_path / "m"
    kw = dict(llms=["copycat/a", "revoked/b"], embedders=["bm25"], run_dir=m, **_settings(tmp_path))
    with pytest.raises(ModelError) as caught:
        agentbench.evaluate_matrix(str(pool), **kw)
    message = str(caught.value)
    assert "\n" not in message and "combination 2 (revoked/b,bm25)" in message and "key revoked" in message
    assert message.endswith(f"continue with --resume --run-dir {m}")
    first = (m / "copycat-a__bm25" / "summary.json").read_text()
    assert not (m / "revoked-b__bm25" / "summary.json").exists() and not (m / "leaderboard.json").exists()
    register_provider("revoked", Copycat())  # the key is fixed
    result = agentbench.evaluate_matrix(str(pool), resume=True, **kw)
    assert result.runs[0] is None and result.runs[1] is not None  # the complete combination is not re-run
    assert (m / "copycat-a__bm25" / "summary.json").read_text() == first
    assert [r.n_records for r in result.leaderboard.rows] == [12, 12]


@pytest.mark.slow
def test_local_model_with_two_embedders(
    weights: Path,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The real offline model: the second embedder's run asks the model only what the first did not
    (closed-book and oracle prompts do not depend on the retriever)."""
    from agentbench.llm.weights import local_model_spec

    cache = tmp_path / "cache"
    (cache / "models").mkdir(parents=True)
    spec = local_model_spec(LOCAL_MODEL)
    for name in (spec.filename, spec.filename + ".verified"):
        (cache / "models" / name).symlink_to(weights.parent / name)
    monkeypatch.setenv("AGENTBENCH_CACHE_DIR", str(cache))
    pool = core_subset(2, tmp_path / "pool")
    result = agentbench.evaluate_matrix(
        str(pool),
        llms=[LOCAL_MODEL],
        embedders=["minilm", "bm25"],
        conditions=["closed_book", "rag", "oracle"],
        max_tokens=256,
        run_dir=tmp_path / "m",
        **{**_settings(tmp_path), "sandbox": local_sandbox()},
    )
    first, second = (r.summary.llm.to_json_dict() for r in result.runs)
    assert first["calls"] + first["cache_hits"] == 6 and first["errors"] == 0
    assert second["cache_hits"] >= 4 and second["calls"] <= 2  # only rag prompts can be new
    rags = [{r.query_id: r.context_ids for r in run.records if r.condition == "rag"} for run in result.runs]
    assert second["calls"] <= sum(rags[0][q] != rags[1][q] for q in rags[0])
    board = result.leaderboard
    assert [r.n_records for r in board.rows] == [6, 6]
    assert board.row(2).vs_baseline["rag.pass"]["n"] == 2
    assert all(r.status in ("ok", "no_code") for run in result.runs for r in run.records)
