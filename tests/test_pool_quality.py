"""Task data checks on the bundled pools, run in the sandbox: spec examples agree with the canonical, and no
task's canonical passes every assert of another task (the tests could not tell the two tasks apart)."""

from __future__ import annotations

import pytest

from agentbench.execution import Job, make_executor
from agentbench.execution.cache import ExecCache, run_cached
from agentbench.pools import load_pool
from agentbench.pools.quality import TaskView, duplicate_pairs, example_asserts, task_views

from .conftest import require_docker

# Spec examples that disagree with the canonical and stay: HumanEval's docstrings are kept as HumanEval
# gives them to models, errors included (reviewed against the canonical solution and the tests).
WRONG_EXAMPLES_KEPT: dict[str, set[str]] = {
    "core": set(),
    "humaneval": {
        # the median of [-10, 4, 6, 1000, 10, 20] is 8.0; HumanEval's docstring says 15.0
        "HumanEval/47: assert abs((median([-10, 4, 6, 1000, 10, 20])) - (15.0)) <= 0.050000001",
        # the docstring's tri(n) is the sequence, the function returns its first n + 1 terms as a list
        "HumanEval/130: assert (tri(1)) == (3)",
        "HumanEval/130: assert (tri(2)) == (1 + (2 / 2))",
        "HumanEval/130: assert (tri(4)) == (3)",
        # ("Venus") is a string; the function returns the tuple ("Venus",)
        'HumanEval/148: assert (bf("Earth", "Mercury")) == (("Venus"))',
        # the docstring's expected value is mistyped as ""aaaaaaa"
        'HumanEval/158: assert (find_max(["aaaaaaa", "bb" ,"cc"])) == ("")',
    },
}

# (A, B): B's canonical passes every assert of A, reviewed (entry ids). Each is a task whose inputs are a
# special case of the other's (sorted, distinct, a one-character word), where both agree by definition.
REVIEWED_OVERLAPS: dict[str, set[tuple[str, str]]] = {
    "core": {
        # the one value that occurs once is the first item occurring once
        ("bit_manipulation/single_number_thrice", "collections/first_item_with_count"),
        ("sorting_searching/single_unpaired_in_sorted", "collections/first_item_with_count"),
        # any ascending sort orders a list of 0s, 1s and 2s
        ("sorting_searching/dutch_flag_sort_colors", "sorting_searching/insertion_sort_copy"),
        ("sorting_searching/dutch_flag_sort_colors", "sorting_searching/radix_sort_lsd_base10"),
        ("sorting_searching/dutch_flag_sort_colors", "sorting_searching/sort_by_set_bits"),
        ("sorting_searching/dutch_flag_sort_colors", "sorting_searching/sort_by_digit_sum"),
        # distinct values: each is a mode, and the smallest mode is the minimum
        ("sorting_searching/rotated_sorted_minimum", "math_numerical/mode_smallest_on_tie"),
        # in a sorted list the longest strictly increasing subsequence takes each distinct value once
        (
            "sorting_searching/count_distinct_sorted",
            "sorting_searching/longest_increasing_subsequence_length",
        ),
        # distinct values: the only occurrence is the first and the last
        ("sorting_searching/sorted_index_of", "sorting_searching/find_first_occurrence_sorted"),
        ("sorting_searching/sorted_index_of", "sorting_searching/last_occurrence_sorted"),
        # the anagram windows of a one-character word are that character's positions
        ("string_processing/indices_of_char", "string_processing/anagram_window_starts"),
        # intervals sorted by start are meetings in one particular order
        ("validation/intervals_do_not_overlap", "sorting_searching/can_attend_all_meetings"),
        # the same shift; shift_series only adds a default fill (a near-duplicate, kept for now)
        ("collections/shift_with_fill", "data_transformation/shift_series"),
    },
    # HumanEval's own tests, kept as HumanEval has them
    "humaneval": {
        ("HumanEval/27", "HumanEval/161"),  # flip_case's inputs all hold letters: solve swaps their case
        ("HumanEval/28", "HumanEval/51"),  # concatenate's strings hold no vowel for remove_vowels to drop
        ("HumanEval/28", "HumanEval/140"),  # ... and no space for fix_spaces to replace
        ("HumanEval/29", "HumanEval/7"),  # filter_by_prefix's substrings only ever occur as prefixes
    },
}

# at least this many tasks must state examples the check can read (guards the example parser)
MIN_TASKS_WITH_EXAMPLES = {"core": 780, "humaneval": 120}


@pytest.fixture(scope="module")
def run():
    require_docker()
    cache = ExecCache()
    with make_executor("docker") as executor:
        yield lambda jobs: run_cached(executor, jobs, cache)


@pytest.fixture(scope="module", params=["core", "humaneval"])
def views(request) -> tuple[str, list[TaskView]]:
    return request.param, task_views(load_pool(request.param))


@pytest.mark.docker
@pytest.mark.slow
def test_spec_examples_agree_with_the_canonical(views, run) -> None:
    name, tasks = views
    owners: list[tuple[TaskView, list[str]]] = []
    for t in tasks:
        if examples := example_asserts(t.spec, t.function, t.setup, t.arity):
            owners.append((t, examples))
    assert len(owners) >= MIN_TASKS_WITH_EXAMPLES[name]
    results = run([Job(t.code, tuple(examples), setup=t.setup) for t, examples in owners])
    wrong = {
        f"{t.name}: {example}"
        for (t, examples), res in zip(owners, results, strict=True)
        for example, outcome in zip(examples, res.results, strict=True)
        if outcome != "pass"
    }
    assert wrong == WRONG_EXAMPLES_KEPT[name]


@pytest.mark.docker
@pytest.mark.slow
def test_no_canonical_passes_another_tasks_asserts(views, run) -> None:
    name, tasks = views
    by_key = {t.key: t.name for t in tasks}
    found = {(by_key[a], by_key[b]) for a, b in duplicate_pairs(tasks, run)}
    assert found == REVIEWED_OVERLAPS[name], (
        "each pair: the second task's canonical passes the first's asserts"
    )


# ------------------------------------------------------------------------ the checks themselves


def test_example_parser_reads_the_forms_specs_use() -> None:
    spec = (
        "Count things.\n"
        ">>> count_things([5], 1)\n"
        "2\n"
        "count_things([0], 0) ➞ True (an aside), count_things([1], 1) ==> 0\n"
        "count_things([2], 2) = 1.5 and then prose\n"
        "count_things([3], 3) -> raises ValueError\n"
    )
    assert example_asserts(spec, "count_things") == [
        "assert (count_things([5], 1)) == (2)",
        "assert (count_things([0], 0)) == (True)",
        "assert (count_things([1], 1)) == (0)",
        "assert abs((count_things([2], 2)) - (1.5)) <= 0.050000001",
    ]
    assert example_asserts("Example: f([1, 2], 3) -> 4.", "count_things") == [
        "assert (count_things([1, 2], 3)) == (4)"
    ]
    unnamed = "Split evenly.\nExamples: (80, 4) -> 2; (81, 4) -> 3.\n"
    assert example_asserts(unnamed, "root_of", arity=2) == [
        "assert (root_of(*((80, 4)))) == (2)",
        "assert (root_of(*((81, 4)))) == (3)",
    ]
    assert example_asserts(unnamed, "root_of", arity=1)[0] == "assert (root_of((80, 4))) == (2)"
    assert example_asserts(unnamed, "root_of", arity=3) == []  # a pair is not three arguments
    assert example_asserts(unnamed, "root_of") == []  # arity unknown: examples must name the function


def _task(key: str, code: str, tests: list[str], spec: str = "") -> TaskView:
    function = code.split("(", 1)[0].removeprefix("def ")
    return TaskView(key, key, function, code, tuple(tests), "", spec)


CHUNKS = _task(
    "chunk_list",
    "def chunk_list(items, size):\n    return [items[i:i + size] for i in range(0, len(items), size)]\n",
    ["assert chunk_list([1, 2, 3], 2) == [[1, 2], [3]]", "assert chunk_list([], 2) == []"],
)
CHUNK_STRING = _task(
    "chunk_string",
    "def chunk_string(s, n):\n    out = []\n    for i in range(0, len(s), n):\n        out.append(s[i:i + n])\n"
    "    return out\n",
    ["assert chunk_string('abc', 2) == ['ab', 'c']", "assert chunk_string('abcd', 2) == ['ab', 'cd']"],
    spec="Example: chunk_string('abcde', 2) -> ['ab', 'cd', 'ef'].",  # wrong on purpose
)
RIGHT_CHUNKS = _task(
    "right_chunks",
    "def right_chunks(s, n):\n    out = []\n    end = len(s)\n    while end > 0:\n"
    "        out.insert(0, s[max(end - n, 0):end])\n        end -= n\n    return out\n",
    ["assert right_chunks('abc', 2) == ['a', 'bc']", "assert right_chunks('', 2) == []"],
)
SPIN = _task(
    "spin",
    "def spin(s, n):\n    return sum(range(10**15))\n",  # hangs in C, past the per-assert guard
    ["assert spin('abc', 2) == ['x']"],
)


@pytest.mark.docker
@pytest.mark.slow
def test_duplicate_check_finds_tasks_the_tests_cannot_tell_apart(run) -> None:
    """The chunked list and the chunked string pass each other's asserts (as q_0105/q_0840 did); chunks
    counted from the right do not, and a canonical that hangs on the others' inputs stops nothing."""
    tasks = [CHUNKS, SPIN, CHUNK_STRING, RIGHT_CHUNKS]
    assert duplicate_pairs(tasks, run) == [
        ("chunk_list", "chunk_string"),
        ("chunk_string", "chunk_list"),
    ]


@pytest.mark.docker
@pytest.mark.slow
def test_example_check_catches_a_wrong_example(run) -> None:
    examples = example_asserts(CHUNK_STRING.spec, CHUNK_STRING.function)
    assert examples == ["assert (chunk_string('abcde', 2)) == (['ab', 'cd', 'ef'])"]
    (res,) = run([Job(CHUNK_STRING.code, tuple(examples))])
    assert res.results == ["FAIL"]
