"""`agentbench report`: the terminal summary and the self-contained HTML report, opened in headless Chromium.

The run comes from the real pipeline with a scripted LLM that copies the first context snippet (closed book
gets a stub), so distractor contexts are inherited and the report has failures to show. One record is then
made hostile (script tags, event handlers, a NUL) to check that untrusted text is escaped.
"""

from __future__ import annotations

import base64
import contextlib
import html
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from agentbench.analysis.compare import load_run
from agentbench.analysis.html import _distractor_marks, render_html, write_html
from agentbench.api import evaluate_config as evaluate
from agentbench.llm import LLMClient
from agentbench.llm._litellm import litellm_module, register_provider
from agentbench.pipeline import RunConfig
from agentbench.pools import load_pool

HOSTILE = (
    '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"></pre>]]>\x00 & "quotes"'
)


def cli(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    """Run the agentbench entry point in this process (modules stay imported): exit code, stdout, stderr."""
    from agentbench.cli import main

    capsys.readouterr()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "argv", ["agentbench", *args])
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


def scripted_client(name: str = "scripted") -> LLMClient:
    """A LiteLLM provider that answers with the first python block of the prompt (closed book: a stub)."""
    litellm = litellm_module()

    class Scripted(litellm.CustomLLM):
        async def acompletion(self, model, messages, model_response, optional_params, **_):
            blocks = re.findall(r"```python\n(.*?)```", messages[-1]["content"], re.S)
            text = blocks[0] if len(blocks) > 1 else blocks[0].rstrip() + "\n    return None\n"
            model_response.choices[0].message.content = "```python\n" + text + "```"
            model_response.usage = litellm.Usage(prompt_tokens=7, completion_tokens=3, total_tokens=10)
            return model_response

    register_provider(name, Scripted())
    return LLMClient(f"{name}/m", concurrency=2)


def make_run(root: Path, name: str, **kw) -> Path:
    """A real run directory (bm25, process sandbox, a few queries); caches live under ``root``."""
    settings = dict(
        llm="scripted/m",
        embedder="bm25",
        limit=4,
        sandbox="process",
        run_dir=str(root / name),
        concurrency=2,
        store_dir=str(root / "stores"),
    )
    settings.update(kw)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AGENTBENCH_CACHE_DIR", str(root / "cache"))
        evaluate(RunConfig(**settings), client=scripted_client(), show_progress=False)
    return root / name


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report")
    path = make_run(root, "run")
    lines = (path / "records.jsonl").read_text().splitlines()
    recs = [json.loads(line) for line in lines]
    target = next(r for r in recs if r["condition"] == "closed_book")
    target["code"] = target["code"] + "\n# " + HOSTILE
    target["error"] = HOSTILE
    (path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


@pytest.fixture(scope="module")
def html_file(run_dir: Path) -> Path:
    return write_html(run_dir, run_dir / "report.html")


# ------------------------------------------------------------------------------------- the HTML file


def test_html_is_self_contained_and_escaped(html_file: Path, run_dir: Path) -> None:
    text = html_file.read_text()
    assert text.startswith("<!DOCTYPE html>")
    # no reference to anything outside the file: every image is an embedded SVG
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:|//|file:)""", text, re.I)
    assert "url(" not in text and "@import" not in text
    images = re.findall(r'<img src="([^"]+)"', text)
    assert len(images) == 4 and all(i.startswith("data:image/svg+xml;base64,") for i in images)
    for src in images:
        svg = base64.b64decode(src.split(",", 1)[1]).decode()
        assert "<svg" in svg and "http://www.w3.org/2000/svg" in svg
    # the hostile record appears only as text
    assert text.count("<script>") == 1
    assert "window.__pwned = 1</script>" not in text and 'onerror="window' not in text
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in text
    assert "\x00" not in text
    head = html.unescape(text.split("</head>", 1)[0])
    assert "Content-Security-Policy" in head and "default-src 'none'" in head


def test_render_is_deterministic(run_dir: Path) -> None:
    run = load_run(run_dir)
    pool = load_pool("core")
    assert render_html(run, pool) == render_html(run, pool)


def test_distractor_marks_follow_the_metadata() -> None:
    pool = load_pool("core")
    metas = pool.distractor_meta()
    replaced = next(m for m in metas.values() if m.line_after.strip())
    code = pool.snippet(replaced.corpus_id).code
    lines, removed, note = _distractor_marks(code, replaced)
    assert not removed and lines
    assert code.splitlines()[min(lines)].strip() == replaced.line_after.splitlines()[0].strip()
    assert replaced.line_before.strip() in note
    gone = next(m for m in metas.values() if not m.line_after.strip())
    code = pool.snippet(gone.corpus_id).code
    lines, removed, _ = _distractor_marks(code, gone)
    assert not lines and list(removed.values()) == [gone.line_before.splitlines()]
    assert gone.line_before.splitlines()[0] not in code.splitlines()


# ------------------------------------------------------------------------------------------- the CLI


def test_report_cli_prints_tables_and_writes_html(run_dir: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "sub" / "r.html"
    code, stdout, stderr = cli(capsys, "report", str(run_dir), "--html", str(out))
    assert code == 0, stderr
    assert "closed_book" in stdout and "by domain" in stdout and "top-1" in stdout
    assert out.exists() and out.stat().st_size > 10_000
    code, stdout, _ = cli(capsys, "report", str(run_dir), "--format", "json")
    assert code == 0
    assert json.loads(stdout) == json.loads((run_dir / "summary.json").read_text())


def test_report_of_an_unfinished_run_summarises_its_records(run_dir: Path, tmp_path: Path, capsys) -> None:
    partial = tmp_path / "partial"
    shutil.copytree(run_dir, partial)
    (partial / "summary.json").unlink()
    code, _, stderr = cli(capsys, "report", str(partial), "--html", str(partial / "r.html"))
    assert code == 0, stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    recomputed = load_run(partial).summary.conditions
    assert {name: c.to_json_dict() for name, c in recomputed.items()} == summary["conditions"]


def test_report_on_a_non_run_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    for target in (tmp_path / "missing", tmp_path):
        code, _, stderr = cli(capsys, "report", str(target))
        assert code == 2
        assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr
    code, _, stderr = cli(capsys, "report", str(tmp_path), "--format", "yaml")
    assert code == 2 and "yaml" in stderr


# --------------------------------------------------------------------------------- a real browser


class Chromium:
    """Headless Debian chromium driven over the DevTools protocol; network requests go to a dead proxy."""

    def __init__(self, tmp: Path) -> None:
        from websockets.sync.client import connect

        self.stack = contextlib.ExitStack()
        profile = tmp / "chromium-profile"
        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        if exe is None:
            if os.environ.get("CI"):
                pytest.fail("chromium is not installed (apt-get install -y chromium)")
            pytest.skip("chromium is not installed (apt-get install -y chromium)")
        self.proc = subprocess.Popen(
            [
                exe,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--remote-debugging-port=0",
                "--proxy-server=http://127.0.0.1:9",
                "--window-size=1280,1600",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.time() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.time() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not start its DevTools endpoint")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with direct.open(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:
            targets = json.load(resp)
        page = next(t for t in targets if t["type"] == "page")
        self.ws = self.stack.enter_context(connect(page["webSocketDebuggerUrl"], max_size=None, proxy=None))
        self.ids = itertools.count(1)
        self.events: list[dict] = []
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")

    def send(self, method: str, **params) -> dict:
        i = next(self.ids)
        self.ws.send(json.dumps({"id": i, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=60))
            if msg.get("id") == i:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]
            self.events.append(msg)

    def open(self, url: str) -> None:
        self.events.clear()
        self.send("Page.navigate", url=url)
        deadline = time.time() + 60
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            if time.time() > deadline:
                raise TimeoutError(f"{url} did not load")
            self.events.append(json.loads(self.ws.recv(timeout=60)))
        self.eval("new Promise(r => requestAnimationFrame(() => setTimeout(r, 50)))")

    def eval(self, expression: str):
        res = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(res["exceptionDetails"])
        return res["result"].get("value")

    def problems(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions and browser log errors (CSP, network)."""
        out = []
        for ev in self.events:
            p = ev.get("params", {})
            if ev.get("method") == "Runtime.consoleAPICalled" and p.get("type") in (
                "error",
                "warning",
                "assert",
            ):
                out.append(
                    "console: " + " ".join(str(a.get("value", a.get("description"))) for a in p["args"])
                )
            elif ev.get("method") == "Runtime.exceptionThrown":
                out.append("exception: " + json.dumps(p["exceptionDetails"])[:300])
            elif ev.get("method") == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
                out.append(f"log {p['entry']['source']}: {p['entry']['text']}")
        return out

    def screenshot(self, path: Path, full: bool = False) -> Path:
        params: dict = {"format": "png"}
        if full:
            size = self.send("Page.getLayoutMetrics")["cssContentSize"]
            params |= {
                "captureBeyondViewport": True,
                "clip": {
                    "x": 0,
                    "y": 0,
                    "width": size["width"],
                    "height": min(size["height"], 12000),
                    "scale": 1,
                },
            }
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", **params)["data"]))
        return path

    def close(self) -> None:
        self.stack.close()
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    b = Chromium(tmp_path_factory.mktemp("browser"))
    yield b
    b.close()


def test_browser_harness_sees_console_errors(browser: Chromium, tmp_path: Path) -> None:
    """The check below would be vacuous if the harness missed errors: show that it catches them."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        "<!DOCTYPE html><html><body>x<script>console.error('boom'); undefinedFunction()</script>"
        '<img src="https://example.invalid/x.png"></body></html>'
    )
    browser.open(bad.as_uri())
    problems = browser.problems()
    assert any("boom" in p for p in problems)
    assert any(p.startswith("exception") for p in problems)


def test_html_report_renders_in_chromium(
    browser: Chromium, html_file: Path, run_dir: Path, tmp_path: Path
) -> None:
    browser.open(html_file.as_uri())
    shot = browser.screenshot(tmp_path / "report.png", full=True)
    assert shot.stat().st_size > 20_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert browser.problems() == []
    summary = json.loads((run_dir / "summary.json").read_text())
    headline = browser.eval("document.getElementById('headline').innerText")
    expected = [summary["retrieval"]["metrics"]["exec@1"], summary["propagation"]["bug_inheritance_rate"]]
    expected += [c["pass_rate"] for c in summary["conditions"].values()]
    for value in expected:
        assert f"{value:.3f}" in headline
    for name in summary["conditions"]:
        assert f"{name} pass rate" in headline
    # every plot decoded to a real image; the hostile record did not run or create elements
    sizes = browser.eval("[...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight])")
    assert len(sizes) == 4 and all(ok and w > 200 and h > 100 for ok, w, h in sizes)
    assert browser.eval("typeof window.__pwned") == "undefined"
    assert browser.eval("document.scripts.length") == 1
    assert browser.eval("document.querySelectorAll('img').length") == 4
    assert "window.__pwned = 1" in browser.eval("document.body.textContent")  # shown as text


def test_per_query_section_is_browsable(browser: Chromium, html_file: Path, tmp_path: Path) -> None:
    browser.open(html_file.as_uri())
    total = browser.eval("document.querySelectorAll('details.q').length")
    assert total == 4
    first = browser.eval("document.querySelector('details.q summary code').textContent")
    visible = (
        "(() => { const box = document.getElementById('q-filter'); box.value = %s;"
        " box.dispatchEvent(new Event('input'));"
        " return [...document.querySelectorAll('details.q')].filter(d => !d.hidden).length; })()"
    )
    assert browser.eval(visible % json.dumps(first)) == 1
    assert browser.eval(visible % json.dumps("no such query")) == 0
    assert browser.eval(visible % json.dumps("")) == total
    assert "of 4 queries" in browser.eval("document.getElementById('q-count').textContent")
    # open a query whose rag or distractor context is a distractor: its mutated line is marked
    opened = browser.eval(
        "(() => { const d = [...document.querySelectorAll('details.q')].find(d => d.querySelector('.mut, .del'));"
        " d.open = true; d.scrollIntoView(); return d.id; })()"
    )
    assert opened.startswith("q-")
    assert (
        browser.eval(f"document.getElementById({json.dumps(opened)}).querySelectorAll('.mut, .del').length")
        > 0
    )
    verdicts = browser.eval(
        f"document.getElementById({json.dumps(opened)}).querySelectorAll('.v-pass, .v-fail').length"
    )
    assert verdicts > 0
    browser.screenshot(tmp_path / "query.png")
    assert browser.problems() == []


def test_compare_on_real_run_and_its_retrieval_file(run_dir: Path, tmp_path: Path) -> None:
    """Per-query exec@k recomputed from a real retrieval.json matches its metrics; a run against a copy of
    itself (or against its own retrieval results file) differs by nothing."""
    from agentbench.analysis import compare_sources, load_sources

    summary = json.loads((run_dir / "summary.json").read_text())
    (source,) = load_sources([run_dir])
    for k in (1, 3, 5, 10):
        outcomes = source.outcomes[f"exec@{k}"]
        assert sum(outcomes.values()) / len(outcomes) == pytest.approx(
            summary["retrieval"]["metrics"][f"exec@{k}"]
        )
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    rows = compare_sources(load_sources([run_dir, copy]))
    assert {r.metric for r in rows} >= {
        "exec@1",
        "rag.pass",
        "oracle.pass",
        "closed_book.pass",
        "distractor.pass",
    }
    assert all(r.difference == 0 and r.p_value == 1.0 and r.ci95 == [0.0, 0.0] and r.n == 4 for r in rows)
    results_file = tmp_path / "bm25.json"
    shutil.copy(run_dir / "retrieval.json", results_file)
    rows = compare_sources(load_sources([results_file, run_dir]))
    assert [r.metric for r in rows] == ["exec@1", "exec@3", "exec@5", "exec@10"]
    assert all(r.difference == 0 and r.p_value == 1.0 for r in rows)


def test_terminal_tables_show_each_interval_once():
    """The conditions table's CI column holds the interval alone, and attribution counts keep theirs
    (a second ``_ci`` helper once shadowed the first: the column repeated the pass rate and every
    attribution count lost its interval)."""
    from agentbench.analysis.report import attribution_rows, condition_rows
    from agentbench.analysis.summary import Attribution, ConditionStats, CountEffect, Unavailable

    unmeasured = Unavailable(reason="not measured")
    summary = SimpleNamespace(
        conditions={"rag": ConditionStats(n=10, passed=3, pass_rate=0.3, ci95=[0.11, 0.6])},
        attribution=Attribution(
            n_queries=10,
            resamples=100,
            seed=0,
            retrieval_induced_failures=CountEffect(n=10, count=2, rate=0.2, ci95=[0.0, 0.5], p_value=0.5),
            retrieval_rescues=unmeasured,
            net_effect_of_retrieval=unmeasured,
            cost_of_buggy_context=unmeasured,
            value_of_right_context=unmeasured,
            retrieval_share_of_oracle_gain=Unavailable(reason="no gain"),
            decomposition=Unavailable(reason="no rag"),
        ),
    )
    (row,) = condition_rows(summary)
    assert row[4] == "[0.11, 0.60]"
    cells = dict(attribution_rows(summary))
    assert any("2/10 = 0.200 [0.00, 0.50]" in cell for cell in cells.values()), cells
