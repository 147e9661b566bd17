"""`pool mine`: a repository's functions and tests as an execution-verified pool (issue 28).

The fixture repository `tests/fixtures/minerepo` covers every test style the miner reads and every case it
must skip (see its README); mining runs its code only in the sandbox (the process executor here, as in the
other pool tests; one test repeats the mining through Docker where the engine is up).
"""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest

from agentbench.errors import PoolError
from agentbench.execution import Job, ProcessExecutor
from agentbench.pools import load_pool, scan_pool
from agentbench.pools.mine import REPORT_FILE, discover_project, mine_pool, write_mined
from agentbench.pools.mine.source import open_source, project_files
from agentbench.pools.validate import execution_problems, spec_problems, structural_problems

from .conftest import ROOT, require_docker, run_cli

FIXTURE = ROOT / "tests" / "fixtures" / "minerepo"
BROKEN = "def broken(:\n    return 1\n"
TASKS = {
    "minerepo.mathdoc.gcd",
    "minerepo.mathdoc.ordinal",
    "minerepo.numbers.Temperature.is_freezing",
    "minerepo.numbers.Temperature.to_fahrenheit",
    "minerepo.numbers.clamp",
    "minerepo.numbers.mean",
    "minerepo.text.first_word",
    "minerepo.text.is_palindrome",
    "minerepo.text.slugify",
    "minerepo.text.word_count",
}


def minerepo(dest: Path) -> Path:
    """A copy of the fixture repository with a file that does not parse."""
    root = dest / "minerepo"
    shutil.copytree(FIXTURE, root)
    (root / "minerepo" / "broken.py").write_text(BROKEN)
    return root


def _mine(root: Path, executor) -> tuple:
    return mine_pool(root, executor.run, name="mined")


@pytest.fixture(scope="module")
def mined(tmp_path_factory) -> tuple:
    base = tmp_path_factory.mktemp("mine")
    root = minerepo(base)
    with ProcessExecutor() as ex:
        pool, report = _mine(root, ex)
    out = base / "pool"
    write_mined(pool, report, out)
    return pool, report, out, root


def _query(pool, key: str):
    return next(q for q in pool.queries if q.entry_id == key)


def _code(pool, key: str) -> str:
    q = _query(pool, key)
    return pool.snippet(q.correct_corpus_ids[0]).code


def test_every_test_style_becomes_standalone_asserts(mined) -> None:
    pool, _, _, _ = mined
    assert {q.entry_id for q in pool.queries} == TASKS
    tests = {q.entry_id: q.test_suite for q in pool.queries}
    # plain pytest asserts: ==, is None, not f(x), pytest.raises (with and without match)
    assert "assert slugify('Hello World') == 'hello-world'" in tests["minerepo.text.slugify"]
    assert "assert first_word('') is None" in tests["minerepo.text.first_word"]
    assert "assert not is_palindrome('abca')" in tests["minerepo.text.is_palindrome"]
    assert "assert _raises(ValueError, lambda: clamp(1, 2, 1))" in tests["minerepo.numbers.clamp"]
    assert "assert _raises(ValueError, lambda: clamp(0, 5, -5), 'empty')" in tests["minerepo.numbers.clamp"]
    # parametrize tables, inline and from a module constant; a loop over a literal list, unrolled
    assert "assert word_count('x-y z') == 3" in tests["minerepo.text.word_count"]
    assert "assert slugify('  Many   spaces here ') == 'many-spaces-here'" in tests["minerepo.text.slugify"]
    assert "assert is_palindrome('noon')" in tests["minerepo.text.is_palindrome"]
    # a local variable inlined
    assert "assert word_count('the quick brown fox') == 4" in tests["minerepo.text.word_count"]
    # unittest: assertEqual, assertTrue, assertFalse, assertIsNone, assertRaises (call and with), AlmostEqual
    assert "assert clamp(-3, 0, 10) == 0" in tests["minerepo.numbers.clamp"]
    assert "assert is_freezing(0)" in tests["minerepo.numbers.Temperature.is_freezing"]
    assert "assert not is_freezing(0.5)" in tests["minerepo.numbers.Temperature.is_freezing"]
    assert "assert first_word('\\t') is None" in tests["minerepo.text.first_word"]
    assert "assert _raises(ValueError, lambda: clamp(1, 5, 4))" in tests["minerepo.numbers.clamp"]
    assert "assert _raises(ValueError, lambda: clamp(0, 1, 0))" in tests["minerepo.numbers.clamp"]
    assert (
        "assert mean([0.1, 0.2]) == 0.15 or round(abs(mean([0.1, 0.2]) - 0.15), 10) == 0"
        in tests["minerepo.numbers.mean"]
    )
    assert (
        "assert mean([1e-09]) == 0.0 or abs(mean([1e-09]) - 0.0) <= 1e-06" in tests["minerepo.numbers.mean"]
    )
    # doctests: values, an expected exception, a name bound by an earlier example
    assert "assert gcd(12, 18) == 6" in tests["minerepo.mathdoc.gcd"]
    assert "assert _raises(ValueError, lambda: gcd(-1, 3))" in tests["minerepo.mathdoc.gcd"]
    assert "assert gcd(*(21, 6)) == 3" in tests["minerepo.mathdoc.gcd"]
    assert "assert ordinal(104) == '104th'" in tests["minerepo.mathdoc.ordinal"]
    # the _raises helper comes from the test setup, never from the solution
    clamp = _query(pool, "minerepo.numbers.clamp")
    assert clamp.test_setup is not None and clamp.test_setup.startswith("def _raises(")
    assert _query(pool, "minerepo.text.slugify").test_setup is None


def test_task_text_and_code(mined) -> None:
    pool, _, _, _ = mined
    slug = _query(pool, "minerepo.text.slugify")
    assert slug.query == "Turn a title into a URL slug of lower-case words joined by the separator."
    assert slug.spec.startswith("def slugify(text, max_words=None)\n\nTurn a title into a URL slug")
    # no docstring: the name split into words
    assert _query(pool, "minerepo.text.word_count").query == "word count"
    # the module constant, the helper (and the constant and import it needs), nothing unrelated
    code = _code(pool, "minerepo.text.slugify")
    assert code.startswith("import re\n")
    for needed in ("SEPARATOR = '-'", "_WORD = re.compile", "def _normalize(text):", "def slugify("):
        assert needed.replace("'", '"') in code
    assert "def word_count" not in code and "HISTORY" not in code
    assert code.index("def _normalize") < code.index("def slugify")
    # a static method and a class method become top-level functions
    assert _code(pool, "minerepo.numbers.Temperature.to_fahrenheit").startswith("def to_fahrenheit(celsius):")
    assert _code(pool, "minerepo.numbers.Temperature.is_freezing").startswith("def is_freezing(celsius):")
    assert _query(pool, "minerepo.numbers.Temperature.is_freezing").metadata["function_name"] == "is_freezing"
    # a convention the docstring does not state is added to the spec, so the task is solvable from it
    first = _query(pool, "minerepo.text.first_word")
    assert "None" in first.spec
    clamp = _query(pool, "minerepo.numbers.clamp")
    assert clamp.metadata["source"] == {"path": "minerepo/numbers.py", "line": 8, "qualname": "clamp"}
    assert clamp.metadata["domain"] == "minerepo.numbers"


def test_pool_is_valid_and_verified(mined) -> None:
    pool, report, out, _ = mined
    scan = scan_pool(out)
    assert scan.problems == [] and structural_problems(scan) == []
    problems, warnings = spec_problems(scan)
    assert problems == [] and warnings == []
    with ProcessExecutor() as ex:
        assert execution_problems(load_pool(out), ex.run) == []
    with_two = sum(len(q.paired_distractor_corpus_ids) >= 2 for q in pool.queries)
    assert with_two >= len(pool.queries) // 2
    assert report.summary()["tasks"] == len(pool.queries) == 10


def test_other_functions_are_snippets_every_query_fails(mined) -> None:
    pool, report, _, _ = mined
    others = [s for s in pool.corpus if (s.model_extra or {}).get("role") == "other"]
    owners = {s.source_entry_id for s in others}
    assert {"minerepo.text.log_message", "minerepo.text.count_lines", "minerepo.text._normalize"} <= owners
    assert "minerepo.remote.status_ok" in owners
    referenced = {c for q in pool.queries for c in (*q.correct_corpus_ids, *q.paired_distractor_corpus_ids)}
    assert not referenced & {s.corpus_id for s in others}
    assert all(s.label == "incorrect" and not s.bug_type for s in others)
    # scored by execution, each is wrong for every query: run each against every query's asserts at once
    # (each assert runs on its own, so one job per snippet holds them all)
    setups = "\n\n".join(dict.fromkeys(q.test_setup for q in pool.queries if q.test_setup))
    every_assert = tuple(t for q in pool.queries for t in q.test_suite)
    with ProcessExecutor() as ex:
        results = ex.run([Job(s.code, every_assert, 5.0, setups) for s in others])
    assert all(r.infra_error is None and "pass" not in r.results for r in results)
    assert report.summary()["other_snippets"] == len(others)


def test_report_lists_files_functions_and_skips_with_reasons(mined) -> None:
    _, _, out, _ = mined
    report = json.loads((out / REPORT_FILE).read_text())
    files = report["files"]
    assert files["minerepo/broken.py"]["parsed"] is False
    assert "does not parse" in files["minerepo/broken.py"]["error"]
    assert report["summary"]["files_not_parsed"] == 1
    text = files["minerepo/text.py"]
    assert text["functions"] == [
        "_normalize",
        "slugify",
        "word_count",
        "first_word",
        "is_palindrome",
        "log_message",
        "count_lines",
    ]
    assert text["tasks"] == ["slugify", "word_count", "first_word", "is_palindrome"]
    assert text["functions_skipped"]["log_message"] == "side_effects: calls print"
    checks = files["tests/check_text.py"]
    assert checks["tests"] == 13
    skipped = checks["asserts"]["skipped"]
    # a function with side effects, a test argument from a fixture, a file, a global, a third-party module
    assert skipped["side_effects"] == 1
    assert skipped["fixture"] == 2
    assert skipped["files"] == 1
    assert skipped["global_state"] == 1
    assert skipped["third_party"] == 3
    assert checks["skip_examples"]["fixture"].endswith("title is a fixture of test_slugify_from_fixture")
    numbers = files["tests/check_numbers.py"]
    assert numbers["asserts"]["skipped"] == {"fixture": 1, "project_object": 1}
    assert numbers["matched"]["minerepo.numbers.mean"] == 6
    assert files["minerepo/mathdoc.py"]["asserts"] == {
        "found": 12,
        "kept": 11,
        "skipped": {"doctest_output": 1},
    }
    assert report["summary"]["asserts_kept"] == sum(
        f.get("asserts", {}).get("kept", 0) for f in files.values()
    )


@pytest.mark.docker
def test_docker_sandbox_mines_the_same_pool(mined, tmp_path: Path) -> None:
    require_docker()
    from agentbench.execution import DockerExecutor

    _, _, first, root = mined
    with DockerExecutor() as ex:
        pool, report = _mine(root, ex)
    write_mined(pool, report, tmp_path / "pool")
    for name in ("queries.jsonl", "corpus.jsonl", "distractor_metadata.jsonl"):
        assert (first / name).read_bytes() == (tmp_path / "pool" / name).read_bytes(), name


def _archive(src: Path, dest: Path, kind: str, extra: dict[str, bytes] | None = None) -> Path:
    top = "minerepo-0.1.0"
    files = {
        f"{top}/{p.relative_to(src).as_posix()}": p.read_bytes()
        for p in sorted(src.rglob("*"))
        if p.is_file()
    }
    files.update(extra or {})
    if kind == "zip":
        path = dest / f"{top}.zip"
        with zipfile.ZipFile(path, "w") as zf:
            for name, data in files.items():
                zf.writestr(name, data)
        return path
    path = dest / f"{top}.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize("kind", ["tar", "zip"])
def test_sdist_archives_are_unpacked_and_read_like_the_directory(tmp_path: Path, kind: str) -> None:
    root = minerepo(tmp_path)
    archive = _archive(root, tmp_path, kind)
    direct = discover_project(root)
    with open_source(archive) as unpacked:
        assert unpacked.name == "minerepo-0.1.0"
        assert [f.rel for f in project_files(unpacked)] == [f.rel for f in project_files(root)]
        from_archive = discover_project(unpacked)
        kept = [(c.rel, c.line, c.text) for c in from_archive.candidates if c.kept]
        assert kept == [(c.rel, c.line, c.text) for c in direct.candidates if c.kept]
        assert {k: p.code for k, p in from_archive.plans.items()} == {
            k: p.code for k, p in direct.plans.items()
        }
    assert not unpacked.exists()  # the temporary directory is removed


def test_archive_links_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "links.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        data = b"def f():\n    return 1\n"
        info = tarfile.TarInfo("pkg-1/pkg/mod.py")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("pkg-1/pkg/passwd.py")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        tf.addfile(link)
    with open_source(path) as root:
        assert [f.rel for f in project_files(root)] == ["pkg/mod.py"]
        assert not (root / "pkg" / "passwd.py").exists()


@pytest.mark.parametrize("member", ["/etc/evil.py", "pkg-1/../../evil.py"])
@pytest.mark.parametrize("kind", ["tar", "zip"])
def test_archive_members_escaping_the_directory_are_refused(tmp_path: Path, member: str, kind: str) -> None:
    if kind == "zip":
        path = tmp_path / "evil.zip"
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr(zipfile.ZipInfo(member), b"x = 1\n")
    else:
        path = tmp_path / "evil.tar.gz"
        with tarfile.open(path, "w:gz") as tf:
            info = tarfile.TarInfo(member)
            info.size = 6
            tf.addfile(info, io.BytesIO(b"x = 1\n"))
    with pytest.raises(PoolError, match="refusing it"), open_source(path):
        pass
    assert not (tmp_path.parent / "evil.py").exists() and not Path("/etc/evil.py").exists()


def _project(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _one_line_exit_2(res) -> str:
    """The error: exit code 2 and one line (progress bars of the sandbox stage aside)."""
    assert res.returncode == 2, res.stderr
    errors = [line for line in res.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith("agentbench: error: "), res.stderr
    assert res.stderr.rstrip("\n").endswith(errors[0]) and not res.stdout, res.stderr
    return errors[0]


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    out = tmp_path / "out"
    docs = _project(tmp_path / "docs", {"README.md": "# hi\n", "notes.txt": "x\n"})
    line = _one_line_exit_2(run_cli("pool", "mine", str(docs), "--out", str(out), "--sandbox", "process"))
    assert "is not a Python project: it holds no .py files (2 other files)" in line
    untested = _project(
        tmp_path / "untested", {"pkg/__init__.py": "", "pkg/m.py": "def f(x):\n    return x\n"}
    )
    line = _one_line_exit_2(run_cli("pool", "mine", str(untested), "--out", str(out), "--sandbox", "process"))
    assert "found 2 Python modules with 1 functions but no tests" in line
    unusable = _project(
        tmp_path / "unusable",
        {
            "pkg/__init__.py": "",
            "pkg/m.py": "def f(x):\n    return x\n",
            "tests/test_m.py": "from pkg.m import f\n\ndef test_f(value):\n    assert f(value) == value\n",
        },
    )
    line = _one_line_exit_2(run_cli("pool", "mine", str(unusable), "--out", str(out), "--sandbox", "process"))
    assert (
        "found 1 tests and 1 asserts, but no function has 3 asserts that can stand alone (skipped: fixture 1)"
        in line
    )
    line = _one_line_exit_2(run_cli("pool", "mine", str(tmp_path / "nope"), "--out", str(out)))
    assert "does not exist" in line
    (tmp_path / "file.txt").write_text("x")
    line = _one_line_exit_2(run_cli("pool", "mine", str(tmp_path / "file.txt"), "--out", str(out)))
    assert "is a file but not an sdist archive" in line
    line = _one_line_exit_2(run_cli("pool", "mine", str(FIXTURE), "--out", str(tmp_path / "file.txt")))
    assert "--out" in line and "is a file, not a directory" in line
    assert not out.exists()


def test_a_pool_with_no_verified_task_is_never_written(tmp_path: Path) -> None:
    # the asserts hold only with a file beside the module (the sandbox has no copy of the repository)
    project = _project(
        tmp_path / "proj",
        {
            "pkg/__init__.py": "",
            "pkg/m.py": "import json\n\ndef load_default(key):\n    return json.load(__loader__.get_data('d.json'))[key]\n",
            "tests/test_m.py": (
                "from pkg.m import load_default\n\n"
                "def test_defaults():\n"
                "    assert load_default('a') == 1\n"
                "    assert load_default('b') == 2\n"
                "    assert load_default('c') == 3\n"
            ),
        },
    )
    out = tmp_path / "out"
    line = _one_line_exit_2(run_cli("pool", "mine", str(project), "--out", str(out), "--sandbox", "process"))
    assert (
        "no function kept 3 asserts that pass in the sandbox (1 functions tried, 3 asserts failed there)"
        in line
    )
    assert "nothing was written" in line
    assert not out.exists()


def test_mining_is_deterministic(mined, tmp_path: Path) -> None:
    """A second mining of the same source, through the CLI with one sandbox worker instead of two and an
    empty execution cache (every verdict computed again), writes byte-identical files (pool and report)."""
    _, _, first, root = mined
    out = tmp_path / "again"
    args = ["--sandbox", "process", "--sandbox-workers", "1", "--json"]
    res = run_cli(
        "pool", "mine", str(root), "--out", str(out), *args, env={"AGENTBENCH_CACHE_DIR": str(tmp_path)}
    )
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["tasks"] == 10 and summary["files_not_parsed"] == 1
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in out.iterdir())
    assert names == ["corpus.jsonl", "distractor_metadata.jsonl", REPORT_FILE, "queries.jsonl"]
    for name in names:
        assert (first / name).read_bytes() == (out / name).read_bytes(), name


def test_discovery_never_imports_the_project(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    project = _project(
        tmp_path / "proj",
        {
            "pkg/__init__.py": f"open({str(marker)!r}, 'w').write('x')\n",
            "pkg/m.py": f"open({str(marker)!r}, 'w').write('x')\n\ndef f(x):\n    return x + 1\n",
            "tests/conftest.py": f"open({str(marker)!r}, 'w').write('x')\n",
            "tests/test_m.py": "from pkg.m import f\n\ndef test_f():\n    assert f(1) == 2\n",
        },
    )
    report = discover_project(project)
    assert [c.text for c in report.candidates if c.kept] == ["assert f(1) == 2"]
    assert not marker.exists()


def test_methods_needing_their_class_changed_locals_and_unordered_arguments_are_skipped(
    tmp_path: Path,
) -> None:
    project = _project(
        tmp_path / "proj",
        {
            "pkg/__init__.py": "",
            "pkg/m.py": (
                "class Box:\n"
                "    SIZE = 3\n\n"
                "    @classmethod\n"
                "    def size(cls, n):\n"
                "        return cls.SIZE * n\n\n"
                "def total(xs):\n"
                "    return sum(xs)\n"
            ),
            "tests/test_m.py": (
                "import random\n"
                "from pkg.m import Box, total\n\n"
                "def test_box():\n"
                "    assert Box.size(2) == 6\n\n"
                "def test_total():\n"
                "    xs = [1, 2]\n"
                "    assert total(xs) == 3\n"
                "    xs.append(4)\n"
                "    assert total(xs) == 7\n"
                "    assert total([random.random()]) < 1\n"
                "    assert total({2, 1}) == 3\n"
                "    assert total({'b', 'a'}) == 'ab'\n"
            ),
        },
    )
    report = discover_project(project)
    status = [(c.line, c.status) for c in report.candidates]
    assert status == [
        (5, "method_needs_class"),
        (9, "kept"),
        (11, "local_state"),
        (12, "nondeterministic"),
        (13, "kept"),  # a set of numbers iterates in the same order in every process
        (14, "nondeterministic"),  # a set of strings does not (hash randomization)
    ]
    assert report.plans["pkg.m.Box.size"].detail == "Box.size uses cls"
