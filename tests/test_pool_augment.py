"""pool augment: new asserts from a task's own asserts that kill surviving mutants (real Docker sandbox).

A plausible wrong solution (``x > t`` for ``x >= t``) passes every original assert of the small pool
below; the augmented asserts must fail it, ``--tests original`` must score on the originals alone, inputs
where the canonical is nondeterministic must be dropped and counted, and a pool without augmented tests
must still load and run.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from agentbench.execution import ExecCache, Job, make_executor, run_cached
from agentbench.pools import build_pool, load_pool, read_sources, write_pool
from agentbench.pools.augment import AUGMENT_REPORT, augment_pool, generate_inputs, parse_seeds
from agentbench.pools.augment.heldout import held_out

from .conftest import run_cli

SOURCES = [
    {
        "id": "first_at_least",
        "query": "index of the first element at least a threshold",
        "code": (
            "def first_at_least(xs, t):\n"
            "    for i, x in enumerate(xs):\n"
            "        if x >= t:\n"
            "            return i\n"
            "    return -1\n"
        ),
        "tests": [
            "assert first_at_least([1, 5, 9], 4) == 1",
            "assert first_at_least([1, 2], 7) == -1",
            "assert first_at_least([8, 1], 3) == 0",
        ],
    },
    {
        "id": "pick",
        "query": "pick one of the values, any of them",
        "code": (
            "import random\n\n\n"
            "def pick(xs):\n"
            "    if len(set(xs)) <= 1:\n"
            "        return xs[0]\n"
            "    return random.getrandbits(64)  # any value will do when they differ\n"
        ),
        "tests": ["assert pick([5]) == 5", "assert pick([2, 2]) == 2", "assert pick([7, 7, 7]) == 7"],
    },
]
WRONG = (
    "def first_at_least(xs, t):\n"
    "    for i, x in enumerate(xs):\n"
    "        if x > t:\n"
    "            return i\n"
    "    return -1\n"
)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("augment")
    mp = pytest.MonkeyPatch()
    mp.setenv("AGENTBENCH_CACHE_DIR", str(root / "cache"))
    src = root / "tasks.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in SOURCES))
    cache = ExecCache(root / "cache" / "executions")
    with make_executor("docker") as executor:

        def run(jobs: list[Job]):
            return run_cached(executor, jobs, cache)

        pool, _ = build_pool(read_sources(src), run, seed=1, distractors=2)
        augmented, report = augment_pool(pool, run, seed=1, inputs=60)
        again, report_again = augment_pool(pool, run, seed=1, inputs=60)
        held = held_out(augmented, run, seed=2, inputs=60)  # fresh inputs, the same mutants
        bare = held_out(pool, run, seed=2, inputs=60)  # the pool before augmenting
        wrong = {
            name: run([Job(WRONG, tuple(q.test_suite), 10.0)])[0]
            for name, q in (
                ("original", pool.queries[0]),
                ("augmented", augmented.with_tests("augmented").queries[0]),
            )
        }
    yield {
        "root": root,
        "src": src,
        "pool": pool,
        "augmented": augmented,
        "report": report,
        "again": again,
        "report_again": report_again,
        "wrong": wrong,
        "held": held,
        "bare": bare,
    }
    cache.close()
    mp.undo()


def test_generated_values_stay_in_the_seeds_domain() -> None:
    seeds = parse_seeds(["assert f('ab', 3) == 1", "assert f('ba c', 0) == 2"], "f")
    strict = generate_inputs(seeds, random.Random(0), 300)
    assert strict and all(set(a[0]) <= set("abc ") and a[0] and a[1] >= 0 for _, a, _ in strict)
    loose = generate_inputs(seeds, random.Random(0), 300, strict=False)
    assert any(a[1] < 0 for _, a, _ in loose) and any(not set(a[0]) <= set("abc ") for _, a, _ in loose)
    assert any(a[0] == "" for _, a, _ in loose)
    # the smallest example number bounds the generated ones; an empty example admits empty values
    seeds = parse_seeds(["assert g([3, 5], '') == 1", "assert g([4], 'ab') == 0"], "g")
    args = [a for _, a, _ in generate_inputs(seeds, random.Random(0), 300)]
    assert all(a[0] and min(a[0]) >= 3 for a in args)
    assert any(a[1] == "" and a[0] != [3, 5] for a in args)


def test_seeds_read_the_assert_shapes() -> None:
    seeds = parse_seeds(
        [
            "assert f([1, 2], 3) == 4",
            "assert abs(f([1.5], 2) - 0.5) < 1e-6",
            "assert not f([], 0)",
            "assert sorted(f([3, 1], 1)) == [1, 3]",
            "assert f(x, 1) == 2",  # a name: no literal to vary
            "assert f([1], 1) in (1, 2)",  # not an equality
        ],
        "f",
    )
    assert [(s.subject, s.kind, s.args) for s in seeds] == [
        ("_AB_CALL", "eq", ([1, 2], 3)),
        ("_AB_CALL", "close", ([1.5], 2)),
        ("_AB_CALL", "eq", ([], 0)),
        ("sorted(_AB_CALL)", "eq", ([3, 1], 1)),
    ]
    assert seeds[1].assert_for("f([2.5], 2)", 0.5) == "assert abs(f([2.5], 2) - 0.5) < 1e-06"


def test_wrong_solution_passes_originals_and_fails_augmented(env) -> None:
    assert env["wrong"]["original"].passed
    assert not env["wrong"]["augmented"].passed
    q = env["augmented"].queries[0]
    assert q.augmented_tests and all(t.startswith("assert first_at_least(") for t in q.augmented_tests)
    assert q.test_suite == SOURCES[0]["tests"]  # the originals are untouched
    row = env["report"].tasks[0]
    assert row.non_equivalent > 0 and row.killed_by_added == row.non_equivalent
    assert row.score(True) > row.score(False)


def test_held_out_inputs_score_the_augmented_asserts(env) -> None:
    held, bare = env["held"], env["bare"]
    first = held.tasks[0]
    # seed 2's inputs expose the boundary mutant (x > t) again, and the asserts seed 1 added kill it
    assert first.query_id == "q_0001" and first.added >= 1
    assert first.non_equivalent >= 1 and first.killed_by_added == first.non_equivalent
    assert held.summary()["held_out_reduction"] == 1.0
    # without augmented asserts the same survivors are exposed and none is killed
    assert [t.non_equivalent for t in bare.tasks] == [t.non_equivalent for t in held.tasks]
    assert bare.summary()["held_out_reduction"] == 0.0 and all(t.added == 0 for t in bare.tasks)


def test_nondeterministic_inputs_are_dropped_and_counted(env) -> None:
    row = env["report"].tasks[1]
    assert row.dropped["nondeterministic"] > 0
    # the only inputs kept are ones where the canonical cannot choose (all values equal)
    for t in env["augmented"].queries[1].augmented_tests or []:
        args = t.split("pick(", 1)[1].rsplit(") ==", 1)[0]
        assert len(set(eval(args))) <= 1 if args.startswith("[") else True  # noqa: S307 - our own literal


def test_same_pool_and_seed_give_byte_identical_output(env, tmp_path: Path) -> None:
    write_pool(env["augmented"], tmp_path / "a")
    write_pool(env["again"], tmp_path / "b")
    for name in ("queries.jsonl", "corpus.jsonl", "distractor_metadata.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert env["report"].to_json() == env["report_again"].to_json()


def test_old_pool_without_augmented_tests_loads_and_round_trips(env, tmp_path: Path) -> None:
    write_pool(env["pool"], tmp_path / "old")
    text = (tmp_path / "old" / "queries.jsonl").read_text()
    assert "augmented_tests" not in text
    loaded = load_pool(tmp_path / "old")
    assert not loaded.has_augmented_tests
    assert loaded.with_tests("augmented").queries[0].test_suite == SOURCES[0]["tests"]
    write_pool(env["augmented"], tmp_path / "new")
    new = load_pool(tmp_path / "new")
    assert new.queries[0].augmented_tests == env["augmented"].queries[0].augmented_tests
    assert new.with_tests("original").queries[0].test_suite == SOURCES[0]["tests"]


def _wrong_agent(task) -> str:
    return WRONG if task.function_name == "first_at_least" else "def pick(xs):\n    return xs[0]\n"


@pytest.mark.parametrize("tests, expected", [("original", True), ("augmented", False)])
def test_run_scores_on_the_chosen_tests(env, tests: str, expected: bool) -> None:
    from agentbench.api import evaluate_config
    from agentbench.pipeline import RunConfig

    pool_dir = env["root"] / "pool-aug"
    if not pool_dir.exists():
        write_pool(env["augmented"], pool_dir)
    config = RunConfig(
        pool=str(pool_dir),
        agent="wrong",
        embedder="bm25",
        conditions=["closed_book"],
        sandbox="docker",
        concurrency=1,
        tests=tests,
        run_dir=str(env["root"] / f"run-{tests}"),
        store_dir=str(env["root"] / "stores"),
    )
    result = evaluate_config(config, agent=_wrong_agent, show_progress=False)
    by_query = {r.query_id: r.passed for r in result.records}
    assert by_query["q_0001"] is expected


def test_cli_augment_writes_the_pool_and_report(env, tmp_path: Path) -> None:
    src_pool = tmp_path / "in"
    write_pool(env["pool"], src_pool)
    out = tmp_path / "out"
    res = run_cli("pool", "augment", str(src_pool), "--out", str(out), "--seed", "1", "--inputs", "60")
    assert res.returncode == 0, res.stderr
    assert "surviving non-equivalent mutants" in res.stdout
    report = json.loads((out / AUGMENT_REPORT).read_text())
    assert report["summary"]["added_asserts"] > 0
    assert load_pool(out).queries[0].augmented_tests == env["augmented"].queries[0].augmented_tests
    bad = run_cli("pool", "augment", str(src_pool), "--out", str(src_pool))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_cli_build_augment_tests_reports_scores(env, tmp_path: Path) -> None:
    out = tmp_path / "built"
    res = run_cli(
        "pool", "build", "--from", str(env["src"]), "--out", str(out), "--seed", "1", "--distractors", "2",
        "--augment-tests", "--inputs", "60", "--sandbox", "docker",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "mutation score per task" in res.stdout and "first_at_least" in res.stdout
    built = load_pool(out)
    assert built.queries[0].augmented_tests == env["augmented"].queries[0].augmented_tests
    assert json.loads((out / AUGMENT_REPORT).read_text())["summary"] == env["report"].summary()


def test_run_rejects_an_unknown_test_set(tmp_path: Path) -> None:
    res = run_cli("run", "--tests", "extra", "--run-dir", str(tmp_path / "run"), "--limit", "1")
    assert res.returncode == 2
    assert "--tests must be augmented or original" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "run").exists()
