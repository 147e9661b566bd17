"""The HTML report's templates: untrusted text from a run is escaped wherever it lands, and a template that
reads a variable nobody passed fails instead of printing nothing."""

from __future__ import annotations

import html
import re
from pathlib import Path

import jinja2
import pytest

from agentbench.analysis.compare import load_run
from agentbench.analysis.html import _context, _env, render_html
from agentbench.pipeline import RunConfig
from agentbench.pipeline.records import RunRecord
from agentbench.pools.models import Pool, Query, Snippet

PAYLOAD = '<script>alert(1)</script> "quotes" & co'
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt; &#34;quotes&#34; &amp; co"


def hostile_run(tmp_path: Path) -> tuple[Path, Pool]:
    """A run directory and its pool where the query text, the snippet and generated code, the model name
    and an error message all carry the payload."""
    pool = Pool(
        name="hostile",
        path=str(tmp_path / "pool"),
        queries=[
            Query(
                query_id="q1",
                query=f"Write f. {PAYLOAD}",
                test_suite=[f"assert f() == {PAYLOAD!r}"],
                correct_corpus_ids=["c1"],
            )
        ],
        corpus=[Snippet(corpus_id="c1", code=f"def f():\n    return {PAYLOAD!r}", label="correct")],
    )
    run = tmp_path / "run"
    run.mkdir()
    config = RunConfig(llm=f"openai/{PAYLOAD}", conditions=["closed_book", "rag"], run_dir=str(run))
    (run / "config.json").write_text(config.model_dump_json())
    records = [
        RunRecord(
            query_id="q1",
            condition="closed_book",
            code=f"def f():\n    # {PAYLOAD}\n    return None",
            results=["fail"],
        ),
        RunRecord(
            query_id="q1",
            condition="rag",
            context_ids=["c1"],
            context_kind="canonical",
            context_passes=True,
            status="llm_error",
            error=f"provider said: {PAYLOAD}\x00",
        ),
    ]
    (run / "records.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records))
    return run, pool


def test_untrusted_text_is_escaped_everywhere(tmp_path: Path) -> None:
    run, pool = hostile_run(tmp_path)
    page = render_html(load_run(run), pool)
    assert "<script>alert(1)" not in page and "alert(1)</script>" not in page
    assert page.count("<script>") == 1  # the report's own
    assert f"<title>agentbench run: openai/{ESCAPED} with " in page  # model name
    assert f'<p class="qtext">Write f. {ESCAPED}</p>' in page  # query text
    assert f'<span class="l">    # {ESCAPED}</span>' in page  # generated code
    assert f'<span class="l">    return &#39;{ESCAPED}&#39;</span>' in page  # snippet
    assert f"<code>assert f() == &#39;{ESCAPED}&#39;</code>" in page  # an assert of the query
    # an error message; NUL, which HTML cannot carry, is replaced
    assert f'<div class="note">error: provider said: {ESCAPED}\ufffd</div>' in page
    assert "\x00" not in page
    # attributes: the search text of the query's <details> stays one quoted attribute
    search = re.search(r'<details class="q" id="q-q1" data-search="([^"]*)" data-failed="1">', page)
    assert (
        search and html.unescape(search.group(1)) == f"q1 unknown write f. {PAYLOAD} closed_book rag".lower()
    )


def test_a_missing_template_variable_fails_loudly(tmp_path: Path) -> None:
    run, pool = hostile_run(tmp_path)
    context = _context(load_run(run), pool)
    del context["queries"]
    with pytest.raises(jinja2.UndefinedError, match="queries"):
        _env().get_template("report.html.j2").render(context)
    with pytest.raises(jinja2.UndefinedError):  # a missing field, not only a missing name
        _env().from_string("[{{ summary.no_such_field }}]").render(summary={})


def test_every_template_is_package_data() -> None:
    """A template the package-data globs miss would be absent from an installed agentbench."""
    import tomllib
    from fnmatch import fnmatch

    root = Path(__file__).resolve().parents[1]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    package = root / "agentbench"
    templates = sorted((package / "analysis" / "templates").iterdir())
    assert any(t.name == "report.html.j2" for t in templates)
    for template in templates:
        relative = template.relative_to(package).as_posix()
        assert any(fnmatch(relative, g) for g in globs["agentbench"]), relative
