"""Mutation operators: each bug type, and edits that preserve the source text outside one line."""

from __future__ import annotations

import ast
import difflib

import pytest

from agentbench.pools import find_mutants

SAMPLE = '''def clamp_window(values, size, lo=0):
    """Return windows; 5 is not mutated in this docstring."""
    if not values:
        return []
    out = []
    for i in range(lo, len(values) - size + 1):   # keep comment  é
        window = values[i:i + size]
        if len(window) < size or window[0] == None:
            continue
        total = sum(window) - window[0] * 2
        out.append(divmod(total, size)[0] // 1 if total >= 0 and i in range(9) else total % 3)
    return out
'''


def _mutants(code: str, bug_type: str):
    return [m for m in find_mutants(code) if m.bug_type == bug_type]


def _after_lines(code: str, bug_type: str) -> set[str]:
    return {m.line_after.strip() for m in _mutants(code, bug_type)}


def test_off_by_one_shifts_integer_constants() -> None:
    after = _after_lines("def f(x):\n    return x[0] + 7\n", "off_by_one")
    assert after == {"return x[1] + 7", "return x[-1] + 7", "return x[0] + 8", "return x[0] + 6"}


def test_off_by_one_keeps_hex_base() -> None:
    after = _after_lines("def f(x):\n    return x & 0xFF\n", "off_by_one")
    assert after == {"return x & 0x100", "return x & 0xFE"}


def test_off_by_one_boundary_flips_comparisons_and_range_ends() -> None:
    code = (
        "def f(xs, n):\n    for i in range(n):\n        if xs[i] < 3:\n            return i\n    return -1\n"
    )
    after = _after_lines(code, "off_by_one_boundary")
    assert "if xs[i] <= 3:" in after
    assert {"for i in range(n + 1):", "for i in range(n - 1):"} <= after


def test_swap_arguments_swaps_call_args_and_noncommutative_operands() -> None:
    code = "def f(a, b):\n    return pow(a, b) - (a + b)\n"
    after = _after_lines(code, "swap_arguments")
    assert "return pow(b, a) - (a + b)" in after
    results = set()
    for m in _mutants(code, "swap_arguments"):
        ns: dict = {}
        exec(m.code, ns)
        results.add(ns["f"](2, 3))
    assert (2 + 3) - pow(2, 3) in results  # operands of the outer `-` swapped, precedence kept
    for m in _mutants(code, "swap_arguments"):
        ast.parse(m.code)


def test_swap_keeps_precedence_of_compound_operand() -> None:
    code = "def f(a, b, c):\n    return a * b - c\n"
    (m,) = [m for m in _mutants(code, "swap_arguments") if "c" in m.line_after.split("-")[0]]
    ns: dict = {}
    exec(m.code, ns)
    assert ns["f"](2, 3, 4) == 4 - 2 * 3


def test_remove_edge_case_check_deletes_whole_guard() -> None:
    code = "def f(x):\n    if x is None:\n        return 0\n    return x + 1\n"
    (m,) = _mutants(code, "remove_edge_case_check")
    assert m.code == "def f(x):\n    return x + 1\n"
    assert m.line_number == 2 and m.line_after == ""
    assert m.line_before == "    if x is None:\n        return 0"


def test_guard_that_is_only_statement_is_not_removed() -> None:
    code = "def f(xs):\n    for x in xs:\n        if x:\n            continue\n    return 1\n"
    assert _mutants(code, "remove_edge_case_check") == []


def test_wrong_comparison_variants() -> None:
    code = "def f(a, b, xs):\n    if a == b and a in xs and b is not None:\n        return 1\n    return 0\n"
    after = _after_lines(code, "wrong_comparison")
    assert "if a != b and a in xs and b is not None:" in after
    assert "if a == b and a not in xs and b is not None:" in after
    assert "if a == b and a in xs and b is None:" in after
    assert "if not (a == b and a in xs and b is not None):" in after


def test_negation_removed() -> None:
    code = "def f(x):\n    if not x:\n        return 1\n    return 2\n"
    assert "if x:" in _after_lines(code, "wrong_comparison")


def test_wrong_operator_variants() -> None:
    code = "def f(a, b):\n    a += 1\n    return (a * b) // 2 + (a or b) % 3\n"
    after = _after_lines(code, "wrong_operator")
    assert "a -= 1" in after
    assert "return (a / b) // 2 + (a or b) % 3" in after
    assert "return (a * b) % 2 + (a or b) % 3" in after
    assert "return (a * b) // 2 - (a or b) % 3" in after
    assert "return (a * b) // 2 + (a and b) % 3" in after


@pytest.mark.parametrize(
    "bug_type", ["off_by_one", "off_by_one_boundary", "swap_arguments", "wrong_comparison", "wrong_operator"]
)
def test_single_line_edits_leave_everything_else_byte_identical(bug_type: str) -> None:
    mutants = _mutants(SAMPLE, bug_type)
    assert mutants, bug_type
    original = SAMPLE.splitlines(keepends=True)
    for m in mutants:
        changed = m.code.splitlines(keepends=True)
        assert len(changed) == len(original)
        diff = [i for i, (a, b) in enumerate(zip(original, changed, strict=True)) if a != b]
        assert diff == [m.line_number - 1], (m.description, diff)
        assert changed[m.line_number - 1].rstrip("\n") == m.line_after
        assert original[m.line_number - 1].rstrip("\n") == m.line_before


def test_guard_removal_only_removes_lines() -> None:
    for m in _mutants(SAMPLE, "remove_edge_case_check"):
        ops = difflib.SequenceMatcher(a=SAMPLE.splitlines(), b=m.code.splitlines()).get_opcodes()
        assert [op[0] for op in ops if op[0] != "equal"] == ["delete"]


def test_comments_docstrings_and_non_ascii_survive() -> None:
    for m in find_mutants(SAMPLE):
        assert "# keep comment  é" in m.code
        assert '"""Return windows; 5 is not mutated in this docstring."""' in m.code


def test_fstrings_are_not_mutated() -> None:
    code = "def f(x):\n    return f'{x + 1:>5}'\n"
    assert find_mutants(code) == []


def test_mutants_are_unique_and_differ_from_canonical() -> None:
    mutants = find_mutants(SAMPLE)
    codes = [m.code for m in mutants]
    assert len(codes) == len(set(codes))
    assert SAMPLE not in codes
    assert {m.bug_type for m in mutants} == {
        "off_by_one",
        "off_by_one_boundary",
        "swap_arguments",
        "remove_edge_case_check",
        "wrong_comparison",
        "wrong_operator",
    }
