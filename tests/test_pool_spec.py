"""Tasks solvable from what the generator is shown: specs that state every convention the tests check,
test setups that give the asserts their names, and prompts that use the spec."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentbench.execution import Job, ProcessExecutor
from agentbench.pools.spec import borrowed_names, unstated_conventions

from .conftest import run_cli, tiny_rows, write_rows


@pytest.mark.parametrize(
    ("test", "text", "gaps"),
    [
        ("assert reverse_bits(-1) is None", "Reverse the bits of a 32-bit integer", ["None"]),
        ("assert reverse_bits(-1) is None", "Returns None for negative input", []),
        ("assert find([1, 2], 3) == -1", "Index of x in xs", ["-1"]),
        ("assert find([1, 2], 3) == -1", "Index of x in xs, or -1 when absent", []),
        ("assert find([1, 2], 3) == -1", "Index of x in xs. When absent, returns -1.", []),
        ("assert find([1, 2], 3) == -1", "Index of x in xs, or -1.5 when absent", ["-1"]),
        ("assert clamp(-5, 0, 9) == 0", "Clamp x into [lo, hi]", []),
        ("assert sign_extend(0xF, 4) == -1", "Sign-extend", ["-1"]),
        ("assert budget(50) == ('insufficient', 50)", "Check a budget", ["a tuple", "'insufficient'"]),
        ("assert budget(50) == ('insufficient', 50)", 'Returns a tuple ("insufficient", amount)', []),
        ("assert upper('abc') == 'ABC'", "Upper-case a string", []),  # derived from the argument
        ("assert caesar('Hello World', 3) == 'Khoor Zruog'", "Shift letters", []),  # mostly its letters
        ("assert check('abc') == 'invalid'", "Check a code", ["'invalid'"]),  # a label
        ("assert swap((1, 2)) == (2, 1)", "Swap a pair's items", []),  # the argument has the shape
        ("assert count_words('a b a') == {'a': 2, 'b': 1}", "Count each word", ["a dict"]),
        ("assert invert({'a': 1}) == {1: 'a'}", "Invert a mapping", []),  # the argument is one
        ("assert 'low' == classify(3)", "Classify a reading", ["'low'"]),  # expected value on the left
        ("assert parse('x') == ValueError", "Parse", ["ValueError"]),
        ("assert len(primes(10)) == 4", "Primes up to n", []),
    ],
)
def test_unstated_conventions(test: str, text: str, gaps: list[str]) -> None:
    assert [g.literal for g in unstated_conventions([test], text)] == gaps


def test_computed_strings_shown_by_the_spec_are_not_conventions() -> None:
    """A cipher, a roman numeral or a digest differs per assert; once the spec's examples show one, the
    others follow from the mapping (HumanEval/89, 156, 162 were flagged before)."""
    roman = [f"assert to_roman({n}) == {r!r}" for n, r in [(19, "xix"), (251, "ccli"), (43, "xliii")]]
    assert unstated_conventions(roman, "Roman numeral in lowercase. to_roman(19) == 'xix'") == []
    # without an example the results are still reported: nothing shows what the function returns
    assert [str(g) for g in unstated_conventions(roman, "Roman numeral in lowercase.")] == [
        "test 0 expects 'xix'",
        "test 1 expects 'ccli'",
        "test 2 expects 'xliii'",
    ]
    # a label that recurs is a convention even when the spec shows it once
    labels = ["assert grade(1) == 'fail'", "assert grade(9) == 'pass'", "assert grade(2) == 'fail'"]
    assert [str(g) for g in unstated_conventions(labels, "Grade a score, e.g. grade(1) == 'fail'")] == [
        "test 1 expects 'pass'"
    ]


def test_borrowed_names_are_the_ones_only_the_reference_imports() -> None:
    code = "from datetime import date, timedelta\ndef next_day(d):\n    return d + timedelta(days=1)\n"
    tests = [
        "assert next_day(date(2024, 2, 28)) == date(2024, 2, 29)",
        "assert all(next_day(date(2024, 1, d)).day == d + 1 for d in range(1, 10))",
        "assert isinstance(next_day(date(2024, 1, 1)), date)",
    ]
    assert borrowed_names(tests, code) == ["date"]
    assert borrowed_names(tests, code, "from datetime import date") == []


def _run(job: Job) -> list[str]:
    with ProcessExecutor(workers=1) as ex:
        return ex.run([job])[0].results


def test_test_setup_gives_the_asserts_their_names_and_not_the_solution() -> None:
    code = "def weekday_name(d):\n    return ('Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun')[d.weekday()]\n"
    tests = (
        "assert weekday_name(date(2024, 1, 1)) == 'Mon'",
        "assert weekday_name(date(2024, 1, 7)) == 'Sun'",
    )
    assert _run(Job(code, tests)) == ["ERROR:NameError"] * 2
    assert _run(Job(code, tests, setup="from datetime import date")) == ["pass", "pass"]
    # the setup runs in the asserts' namespace only: it cannot supply a name the solution forgot to import
    needs_import = "def today_ordinal(y, m, d):\n    return date(y, m, d).toordinal()\n"
    job = Job(needs_import, ("assert today_ordinal(1, 1, 1) == 1",), setup="from datetime import date")
    assert _run(job) == ["ERROR:NameError"]
    # a broken setup errors every assert, and the setup is part of the cache key
    assert _run(Job(code, tests, setup="import no_such_module_here")) == ["ERROR:ModuleNotFoundError"] * 2
    assert Job(code, tests).key != Job(code, tests, setup="from datetime import date").key
    assert Job(code, tests).key == Job(code, tests, setup="").key


def _spec_pool(tmp_path: Path, spec: str | None, setup: str | None = None) -> Path:
    rows = tiny_rows()
    q = rows["queries.jsonl"][0]
    q["test_suite"] = ["assert add_one(1) == 2", "assert add_one(None) == 0", "assert add_one(-2) == -1"]
    if spec is not None:
        q["spec"] = spec
    if setup is not None:
        q["test_setup"] = setup
    return write_rows(tmp_path / "pool", rows)


def test_pool_validate_lists_queries_whose_spec_misses_a_convention(tmp_path: Path) -> None:
    res = run_cli("pool", "validate", str(_spec_pool(tmp_path, "Add one to x.")))
    assert res.returncode == 2
    line = next(x for x in res.stderr.splitlines() if "q_0001" in x)
    assert "queries.jsonl:1" in line and "test 2 expects -1" in line and "add it to the spec" in line
    ok = run_cli(
        "pool", "validate", str(_spec_pool(tmp_path, "Add one to x (-2 gives -1); None counts as 0."))
    )
    assert ok.returncode == 0, ok.stderr


def test_pool_without_specs_is_warned_not_failed(tmp_path: Path) -> None:
    res = run_cli("pool", "validate", str(_spec_pool(tmp_path, None)))
    assert res.returncode == 0, res.stderr
    assert "warning: no query has a spec" in res.stderr and "q_0001" in res.stderr


def test_pool_validate_flags_names_only_the_reference_provides(tmp_path: Path) -> None:
    rows = tiny_rows()
    q = rows["queries.jsonl"][0]
    q["spec"] = "Add one to x; None counts as 0."
    q["test_suite"] = ["assert add_one(1) == 2", "assert add_one(None) == 0", "assert add_one(sqrt(4)) == 3"]
    res = run_cli("pool", "validate", str(write_rows(tmp_path / "p", rows)))
    assert res.returncode == 2 and "`sqrt`" in res.stderr and "test_setup" in res.stderr
    q["test_setup"] = "from math import sqrt"
    res = run_cli(
        "pool", "validate", str(write_rows(tmp_path / "p", rows)), "--execute", "--sandbox", "process"
    )
    assert res.returncode == 0, res.stderr
