"""Code extraction from LLM replies."""

from __future__ import annotations

import ast

import pytest

from agentbench.agent.extract import extract_code

F = "```"


def _names(code: str) -> list[str]:
    return [n.name for n in ast.parse(code).body if isinstance(n, ast.FunctionDef | ast.ClassDef)]


def test_python_fence_with_prose_around() -> None:
    reply = f"Sure! Here is the function:\n\n{F}python\ndef add(a, b):\n    return a + b\n{F}\n\nIt adds two numbers."
    assert extract_code(reply, "add") == "def add(a, b):\n    return a + b"


@pytest.mark.parametrize("lang", ["py", "", "Python", "python3"])
def test_fence_language_variants(lang: str) -> None:
    reply = f"{F}{lang}\ndef add(a, b):\n    return a + b\n{F}"
    assert extract_code(reply, "add") == "def add(a, b):\n    return a + b"


def test_tilde_fence_and_indented_fence() -> None:
    assert extract_code("~~~python\ndef f():\n    return 1\n~~~", "f") == "def f():\n    return 1"
    reply = f"1. Code:\n   {F}python\n   def f():\n       return 1\n   {F}\n"
    assert extract_code(reply, "f") == "def f():\n    return 1"


def test_bare_code_without_fences() -> None:
    assert extract_code("def f(x):\n    return x * 2\n", "f") == "def f(x):\n    return x * 2"


def test_bare_code_with_text_before_and_after() -> None:
    reply = "Here is my solution.\n\ndef f(x):\n    if x:\n        return 1\n    return 0\n\nThis returns 1 for truthy input."
    assert extract_code(reply, "f") == "def f(x):\n    if x:\n        return 1\n    return 0"


def test_bare_code_split_by_prose_keeps_both_functions() -> None:
    reply = "def f(x):\n    return helper(x)\n\nThe helper is:\n\ndef helper(y):\n    return y + 1\n"
    code = extract_code(reply, "f")
    assert sorted(_names(code)) == ["f", "helper"]


def test_prefers_block_defining_the_required_function() -> None:
    reply = (
        f"First a utility:\n{F}python\ndef unrelated():\n    return 0\n{F}\n"
        f"Now the answer:\n{F}python\ndef target(n):\n    return n\n{F}\n"
        f"Usage:\n{F}python\nprint(target(3))\n{F}"
    )
    assert extract_code(reply, "target") == "def target(n):\n    return n"


def test_later_block_wins_when_several_define_the_function() -> None:
    reply = (
        f"The snippet you gave:\n{F}python\ndef f(n):\n    return n - 1\n{F}\n"
        f"has a bug; corrected:\n{F}python\ndef f(n):\n    return n\n{F}"
    )
    assert extract_code(reply, "f") == "def f(n):\n    return n"


def test_helpers_and_imports_from_other_blocks_are_pulled_in() -> None:
    reply = (
        f"{F}python\nimport math\nfrom collections import Counter\n\ndef _norm(v):\n    return math.sqrt(v)\n\n"
        f"def unused():\n    return Counter()\n{F}\n"
        f"{F}python\ndef length(v):\n    return _norm(v)\n{F}"
    )
    code = extract_code(reply, "length")
    assert code.startswith("import math")
    assert "Counter" not in code and "unused" not in code
    assert _names(code) == ["_norm", "length"]
    ns: dict = {}
    exec(code, ns)
    assert ns["length"](16) == 4.0


def test_multiple_functions_in_one_block_and_top_imports_kept() -> None:
    reply = (
        f"{F}python\nfrom datetime import date, timedelta\n\nWEEKEND = {{5, 6}}\n\n"
        f"def _is_weekend(d):\n    return d.weekday() in WEEKEND\n\n"
        f"def add_days(d, n):\n    while n:\n        d += timedelta(days=1)\n        n -= 0 if _is_weekend(d) else 1\n    return d\n{F}"
    )
    code = extract_code(reply, "add_days")
    assert code.startswith("from datetime import date, timedelta")
    assert "WEEKEND = {5, 6}" in code
    assert _names(code) == ["_is_weekend", "add_days"]


def test_demo_code_is_dropped_but_needed_globals_kept() -> None:
    reply = (
        f"{F}python\nTABLE = [i * i for i in range(10)]\nLOOKUP = build()\n\ndef build():\n    return 1\n\n"
        f"def sq(i):\n    return TABLE[i] + LOOKUP\n\n"
        f"print(sq(3))\nassert sq(2) == 5\nresult = sq(4)\nsq(1)\n\n"
        f'if __name__ == "__main__":\n    print(sq(5))\n{F}'
    )
    code = extract_code(reply, "sq")
    assert "print" not in code and "assert" not in code and "__main__" not in code and "result" not in code
    assert "TABLE = " in code and "LOOKUP = build()" in code


def test_setup_calls_are_kept_but_bare_calls_dropped() -> None:
    reply = f"{F}python\nimport sys\nsys.setrecursionlimit(10000)\n\ndef f(n):\n    return n\n\nmain()\n{F}"
    assert extract_code(reply, "f") == "import sys\nsys.setrecursionlimit(10000)\n\ndef f(n):\n    return n"


def test_doctest_transcript() -> None:
    reply = f"{F}pycon\n>>> def f(x):\n...     return x + 1\n...\n>>> f(1)\n2\n{F}"
    assert extract_code(reply, "f") == "def f(x):\n    return x + 1"


def test_doctest_examples_in_a_docstring_are_not_a_transcript() -> None:
    """A function whose docstring holds ``>>>`` examples (as mined pools' specs do) is kept whole."""
    code = 'def ordinalize(n):\n    """Examples::\n\n        >>> ordinalize(1)\n        \'1st\'\n    """\n    return f"{n}st"'
    assert extract_code(f"{F}python\n{code}\n{F}", "ordinalize") == code
    assert extract_code(code, "ordinalize") == code


def test_truncated_reply_with_unclosed_fence() -> None:
    reply = f"{F}python\ndef f(x):\n    return x\n\ndef g(y):\n    return (y +"
    assert extract_code(reply, "f") == "def f(x):\n    return x"


def test_prose_line_inside_fence_is_trimmed() -> None:
    reply = f"{F}\nHere is the code:\ndef f():\n    return 2\n{F}"
    assert extract_code(reply, "f") == "def f():\n    return 2"


def test_non_python_fences_are_ignored_when_python_exists() -> None:
    reply = f"{F}bash\npip install nothing\n{F}\n{F}python\ndef f():\n    return 3\n{F}\n{F}text\n3\n{F}"
    assert extract_code(reply, "f") == "def f():\n    return 3"


def test_python_in_mislabelled_fence_is_still_found() -> None:
    assert extract_code(f"{F}text\ndef f():\n    return 3\n{F}", "f") == "def f():\n    return 3"


def test_annotation_like_prose_is_not_kept() -> None:
    reply = "def f(x):\n    return x\nNote: this handles negatives too"
    assert extract_code(reply, "f") == "def f(x):\n    return x"


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "I cannot help with that.",
        f"{F}python\nprint('hello')\n{F}",
        f"{F}python\ndef broken(:\n    pass\n{F}",
        "The answer is: x = 3",
    ],
)
def test_no_function_gives_empty_string(reply: str) -> None:
    assert extract_code(reply, "f") == ""


def test_bare_function_with_fenced_usage_example() -> None:
    reply = f"def f(x):\n    return x + 1\n\nExample:\n{F}python\nprint(f(1))\n{F}\n"
    assert extract_code(reply, "f") == "def f(x):\n    return x + 1"


def test_renamed_function_is_still_returned() -> None:
    reply = f"{F}python\ndef other_name(x):\n    return x\n{F}"
    assert extract_code(reply, "wanted") == "def other_name(x):\n    return x"


def test_without_function_name_the_last_defining_block_is_used() -> None:
    reply = f"{F}python\ndef a():\n    return 1\n{F}\n{F}python\ndef b():\n    return 2\n{F}"
    assert extract_code(reply) == "def b():\n    return 2"


def test_class_based_solution_and_crlf() -> None:
    reply = f"{F}python\r\nclass Stack:\r\n    def __init__(self):\r\n        self.items = []\r\n{F}\r\n"
    assert _names(extract_code(reply, "Stack")) == ["Stack"]


def test_result_always_parses() -> None:
    replies = [
        f"{F}python\ndef f():\n    return [1,\n{F}\nand\n{F}python\ndef f():\n    return 1\n{F}",
        "def f():\n    return 1\n    }",
        f"Text {F}inline{F} text\n\ndef f():\n    pass",
    ]
    for reply in replies:
        code = extract_code(reply, "f")
        assert code
        ast.parse(code)
